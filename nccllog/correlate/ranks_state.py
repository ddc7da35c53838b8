"""Per-rank metrics: what each rank was last seen doing, and the failure that stopped it.

Everything here is a measurement, not a judgement; the rules (``correlate/rules/``) decide which
ranks stand out. Failures are weighed by how likely a line of that kind is to be a cause rather
than a consequence: an OOM or a SIGSEGV is a cause far more often than a ``DistBackendError``
that merely rethrows a watchdog timeout.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import polars as pl

from nccllog.attribution import MAX_RANKS, Topology
from nccllog.correlate import taxonomy
from nccllog.correlate.frame import int_list, row_dicts
from nccllog.correlate.network import AddressBook
from nccllog.correlate.rules.vocabulary import vocabulary

# Exceptions and texts that wrap or report another failure rather than being one.
WRAPPER_WORDS = (
    "DistBackendError",
    "ChildFailedError",
    "RayTaskError",
    "ActorDiedError",
    "ActorUnavailableError",
    "WorkerCrashedError",
    "CalledProcessError",
    "KeyboardInterrupt",
    "SystemExit",
    "ProcessExitedException",
    "ProcessRaisedException",
    "Watchdog caught",
    "NCCL error",
    "NCCL communicator",
    "ProcessGroupNCCL",
    "timed out",
    "Timeout",
    "timeout",
    "Connection closed",
    "Connection reset",
    "Broken pipe",
)
# Xids that follow an application fault (illegal address, MMU fault) or clean up after one.
APP_XIDS = vocabulary().xids("app")  # (classes in correlate/rules/vocabulary.toml)
SECONDARY_XIDS = vocabulary().xids("secondary")
INFO_XIDS = vocabulary().xids("info")
CRASH_EXITCODES = (-11, 139, -7, 135, -8, 136, -4, 132)  # SIGSEGV, SIGBUS, SIGFPE, SIGILL (negative or 128+n)
CRASH_SIGNALS = ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL")
_TERM_SIGNALS = ("SIGABRT", "SIGTERM", "SIGINT", "SIGHUP", "SIGKILL")

SIGNAL_CATEGORY = {
    "oom": "oom",
    "cuda_error": "cuda_error",
    "crash_signal": "segfault_crash",
    "xid": "gpu_hardware_xid",
    "duplicate_gpu": "init_failure",
    "network_ib": "network_ib",
    "network_socket": "network_socket",
    "store_timeout": "bootstrap_rendezvous",
    "nccl_error": "other",
    "nccl_warn": "other",
    "python_exception": "other",
    "actor_died": "other",
    "process_exit": "other",
    "version": "version_mismatch",
    "init": "init_failure",
}
HANG_SIGNALS = ("collective_timeout", "work_status", "desync_report", "heartbeat", "dump", "abort")
_STATE_COLUMNS = ("rank", "host", "local_rank", "pid", "source", "ctime", "_i", "repeat", "_fw", "signal")


def classify_failures(ev: pl.DataFrame, weights: dict[str, float] | None = None) -> pl.DataFrame:
    """Add ``_fw`` (weight as a cause, 0 = not a failure) and ``_fcat`` (category it points to).
    ``weights`` (pattern id -> weight) are the patterns' own ``weight`` keys: a line whose producer
    states the cause outright weighs what its pattern says, not what its signal's lines usually do."""
    sig = pl.col("signal")
    sev_ok = pl.col("severity").is_in(["warning", "error", "critical"])
    words = pl.concat_str(pl.col("error_name").fill_null(""), pl.lit(" "), pl.col("message").fill_null(""))
    wrapper = words.str.contains_any(list(WRAPPER_WORDS))
    term = pl.col("signal_name").fill_null("").is_in(list(_TERM_SIGNALS)) | words.str.contains_any(
        ["SIGABRT", "SIGTERM", "Aborted", "terminate called"]
    )
    code = pl.col("exitcode")
    crash_exit = code.is_in(list(CRASH_EXITCODES)) | pl.col("signal_name").is_in(list(CRASH_SIGNALS))
    xid = pl.col("xid")
    killed = code.is_in([-9, 137]) | (pl.col("signal_name") == "SIGKILL")
    weight = (
        pl.when(~sev_ok & ~sig.is_in(["oom", "xid", "duplicate_gpu"]))
        .then(0.0)
        .when(sig == "oom")
        .then(0.95)
        .when(sig == "cuda_error")
        .then(0.85)
        .when(sig == "duplicate_gpu")
        .then(0.9)
        .when(sig == "xid")
        .then(
            pl.when(xid.is_in(list(SECONDARY_XIDS)))
            .then(0.2)
            .when(xid.is_in(list(INFO_XIDS)))
            .then(0.3)
            .when(xid.is_in(list(APP_XIDS)))
            .then(0.6)
            .otherwise(0.9)
        )
        .when(sig == "crash_signal")
        .then(pl.when(term).then(0.25).otherwise(0.8))
        .when(sig == "network_ib")
        .then(pl.when(pl.col("ib_status") == 5).then(0.3).otherwise(0.7))
        .when(sig == "network_socket")
        .then(0.5)
        .when(sig == "store_timeout")
        .then(0.6)
        .when(sig == "nccl_error")
        .then(0.45)
        .when(sig == "python_exception")
        .then(pl.when(wrapper).then(0.15).otherwise(0.55))
        .when(sig == "actor_died")
        .then(0.35)
        .when(sig.is_in(["process_exit", "root_cause"]))
        .then(
            pl.when(crash_exit)
            .then(0.5)
            .when(killed)
            .then(0.5)
            .when(sig == "process_exit")
            .then(0.1)
            .otherwise(0.0)
        )
        .when(sig == "nccl_warn")
        .then(0.3)
        .when(sig.is_in(list(HANG_SIGNALS)) | sig.is_in(["progress", "stall", "info", "framework"]))
        .then(0.0)
        .when(
            sig.is_in(["version", "init", "env_setting", "bootstrap"])
            & pl.col("severity").is_in(["error", "critical"])
        )
        .then(0.6)
        .when(pl.col("category").is_not_null())
        .then(0.4)
        .otherwise(0.0)
    )
    mapped = sig.replace_strict(SIGNAL_CATEGORY, default=None, return_dtype=pl.String)
    # SIGKILL from outside with nothing else said: the kernel's (or the container's) OOM killer
    # is what sends it to training processes, far more often than a person.
    exit_cat = pl.when(crash_exit).then(pl.lit("segfault_crash")).when(killed).then(pl.lit("oom"))
    category = (
        pl.when((sig == "xid") & xid.is_in(list(APP_XIDS)))
        .then(pl.lit("cuda_error"))
        .when(sig.is_in(["process_exit", "root_cause"]))
        .then(pl.coalesce(exit_cat, pl.col("category"), pl.lit("other")))
        .otherwise(pl.coalesce(pl.col("category"), mapped, pl.lit("other")))
    )
    ev = ev.with_columns(taxonomy.place_text(), _fw=weight.fill_null(0.0), _fcat=category)  # once each
    category, weight = taxonomy.place("_fcat", "_fw")
    if weights:
        own = pl.col("pattern").replace_strict(weights, default=None, return_dtype=pl.Float64)
        weight = pl.coalesce(own, weight)
    return taxonomy.place_by_frame(ev.with_columns(_fw=weight, _fcat=category).drop(taxonomy.PLACE_TEXT))


@dataclass(frozen=True)
class Failure:
    """One failure line and the rank it is about."""

    rank: int | None
    host: str | None
    category: str
    weight: float
    signal: str
    pattern: str
    row: dict[str, Any]
    after_hang: bool = False  # the rank was already timed out / aborting when this was logged

    @property
    def time(self) -> datetime | None:
        """Corrected time of the line, if it had one."""
        t = self.row.get("ctime")
        return t if isinstance(t, datetime) else None


@dataclass(frozen=True)
class Timeout:
    """A watchdog timeout one rank reported."""

    rank: int | None
    pg: str
    seq: int | None
    op: str | None
    numel_in: int | None
    numel_out: int | None
    shape: str | None
    timeout_ms: int | None
    elapsed_ms: int | None
    repeat: int
    row: dict[str, Any]
    primary: bool = True  # the timeout line itself (False: only a follow-up line named the seq)

    @property
    def time(self) -> datetime | None:
        """Corrected time the watchdog fired."""
        t = self.row.get("ctime")
        return t if isinstance(t, datetime) else None

    @property
    def signature(self) -> tuple[str | None, int | None, int | None, str | None]:
        """What must agree across ranks for one collective: op and sizes."""
        return (self.op, self.numel_in, self.numel_out, None if self.numel_in is not None else self.shape)


@dataclass(frozen=True)
class RankState:
    """Everything measured about one global rank."""

    rank: int
    host: str | None = None
    local_rank: int | None = None
    pids: tuple[int, ...] = ()
    sources: tuple[str, ...] = ()
    lines: int = 0
    first_time: datetime | None = None
    last_time: datetime | None = None
    last_row: dict[str, Any] | None = None
    timeouts: tuple[Timeout, ...] = ()
    last_enqueued: dict[str, int] = field(default_factory=dict)
    last_completed: dict[str, int] = field(default_factory=dict)
    last_step: int | None = None
    total_steps: int | None = None
    failure: Failure | None = None
    failures: tuple[Failure, ...] = ()
    first_error: dict[str, Any] | None = None
    exitcode: int | None = None
    exit_signal: str | None = None
    heartbeat: tuple[dict[str, Any], ...] = ()
    stalls: int = 0
    repeat: int = 1
    hang_time: datetime | None = None  # first timeout/abort line of this rank
    hang_i: int | None = None
    last_active: datetime | None = None  # last line that is neither a failure nor a timeout

    @property
    def seen(self) -> bool:
        """Whether any line was attributed to this rank."""
        return self.lines > 0


def infer_world(ev: pl.DataFrame, topology: Topology) -> tuple[int | None, str]:
    """World size from the topology, else the largest NCCL communicator, else store/launcher lines."""
    named = pl.when(pl.col("signal").is_in(["process_exit", "root_cause"])).then(pl.col("target_rank"))
    # beside ranks that wrote lines, a launcher's line about a rank shows that rank exists too
    ranks = pl.when(pl.col("rank").max().is_not_null()).then(pl.max_horizontal("rank", named))
    top = ev.select(ranks.filter(ranks <= MAX_RANKS).max()).item()
    if topology.world_size and (top is None or top < topology.world_size):
        why = topology.world_size_evidence
        return topology.world_size, (
            "; ".join(why) if isinstance(why, tuple) else str(why)
        ) or "rank resolution"
    n = (
        ev.filter((pl.col("signal") == "init") & (pl.col("nranks") <= MAX_RANKS))
        .select(pl.col("nranks").max())
        .item()
    )
    if n:
        return int(n), "largest NCCL communicator (nranks)"
    n = ev.filter(pl.col("world_size") <= MAX_RANKS).select(pl.col("world_size").max()).item()
    if n and (top is None or top < n):
        return int(n), "world size printed by the launcher or store"
    if top is not None:
        return int(top) + 1, "highest rank seen"
    if "task_ids" in ev.columns:
        tasks = [
            max(int_list(t.replace("-", ",")))
            for t in ev["task_ids"].drop_nulls().to_list()
            if int_list(t.replace("-", ","))
        ]
        tasks = [t for t in tasks if t < MAX_RANKS]
        if tasks:
            return max(tasks) + 1, "highest Slurm task id (one task per rank)"
    return None, ""


def subject_ranks(ev: pl.DataFrame, topology: Topology, book: AddressBook) -> pl.DataFrame:
    """Add ``subject``: the global rank a failure line is about. The writer's rank for most lines;
    for launcher lines (torchrun failures, exits) the rank the line names; for unattributed lines
    whatever pid, GPU or address ties them to one rank."""
    about_other = pl.col("signal").is_in(["root_cause", "process_exit"])
    ev = ev.with_columns(
        subject=pl.when(about_other)
        .then(pl.coalesce("target_rank", "rank"))
        .otherwise(pl.coalesce("rank", "target_rank"))
    )
    # A host-level line (a Ray node OOM, a launcher about a node) names the host it is about.
    ev = ev.with_columns(
        host=pl.when(pl.col("rank").is_null() & pl.col("host").is_null() & (pl.col("_fw") > 0))
        .then(pl.col("target_host"))
        .otherwise(pl.col("host"))
    )
    ev = _placed_by_exit(ev)
    todo = ev.filter(pl.col("subject").is_null() & ((pl.col("_fw") > 0) | about_other))
    if todo.height == 0:
        return ev
    local: dict[tuple[str | None, int], int] = {}
    for r, h, lr in (
        ev.filter(pl.col("rank").is_not_null() & pl.col("local_rank").is_not_null())
        .select("rank", "host", "local_rank")
        .unique(maintain_order=True)
        .iter_rows()
    ):
        local.setdefault((h, lr), r)
    single_host = len(book.host_ranks) == 1
    # A line that names a local device (``GPU 2``, a PCI address) but no host is read on its file's
    # host when every line of that file that names a host names the same one (one node's log).
    hosts_of = ev.filter(pl.col("host").is_not_null()).group_by("source").agg(pl.col("host").unique())
    file_host = {src: hs[0] for src, hs in hosts_of.iter_rows() if len(hs) == 1}
    fixes: dict[int, int] = {}
    notes: dict[int, str] = {}  # how a local device was mapped to its global rank
    for row in todo.select(
        "_i", "source", "host", "pid", "target_pid", "target_local_rank", "gpu", "pci"
    ).iter_rows(named=True):
        host = row["host"]
        device_host = host if host is not None else file_host.get(row["source"])
        rank = None
        for pid in (row["target_pid"], row["pid"]):
            if pid is not None and rank is None:
                rank = topology.pid_rank.get((host, pid))
                if rank is None:
                    cands = {r for (h, p), r in topology.pid_rank.items() if p == pid}
                    rank = cands.pop() if len(cands) == 1 else None
        if rank is None and row["target_local_rank"] is not None:
            rank = local.get((host, row["target_local_rank"]))
            if rank is None and (single_host or host is None):
                cands = {r for (_h, lr), r in local.items() if lr == row["target_local_rank"]}
                rank = cands.pop() if len(cands) == 1 else None
        if rank is None and row["gpu"] is not None:
            rank = book.rank_of_gpu(device_host, row["gpu"])
            if rank is not None:
                notes[row["_i"]] = (
                    f"GPU {row['gpu']} on {device_host or 'its host'} is rank {rank} (NCCL init lines)"
                )
            elif (rank := _rank_of_local(local, device_host, row["gpu"])) is not None:
                # No init line ties the device to a rank: torchrun's usual one GPU per local rank.
                notes[row["_i"]] = (
                    f"GPU {row['gpu']} on {device_host}, taken as local rank {row['gpu']} "
                    f"(one GPU per local rank), is rank {rank}"
                )
        if rank is None and row["pci"] is not None:
            rank = book.rank_of_pci(device_host, row["pci"])
            if rank is not None:
                notes[row["_i"]] = (
                    f"PCI {row['pci']} on {device_host or 'its host'} is rank {rank} (NCCL init lines)"
                )
        if rank is not None:
            fixes[row["_i"]] = rank
    return _with_subjects(ev, fixes, notes)


def _with_subjects(ev: pl.DataFrame, fixes: dict[int, int], notes: dict[int, str]) -> pl.DataFrame:
    """``ev`` with the subjects ``fixes`` gives (row ``_i`` -> rank) where it had none, and the notes
    saying how each was found, next to those an earlier pass wrote."""
    if not fixes:
        return ev
    fix = pl.col("_i").replace_strict(fixes, default=None, return_dtype=pl.Int64)
    note = pl.col("_i").replace_strict(notes, default=None, return_dtype=pl.String)
    if "subject_note" in ev.columns:
        note = pl.coalesce("subject_note", note)
    return ev.with_columns(subject=pl.coalesce("subject", fix), subject_note=note)


# Lines of an exception escaping a worker (CUDA, OOM, NCCL errors too): its launcher sees exit 1.
EXCEPTION_SIGNALS = ("python_exception", "error_line", "cuda_error", "oom", "nccl_error")


def _placed_by_exit(ev: pl.DataFrame) -> pl.DataFrame:
    """An unprefixed traceback in a launcher's console is the worker's that the launcher saw exit
    with an error status, when exactly one worker of that console did (the others were stopped by
    a signal, or exited cleanly): an escaped exception is what makes a Python process exit 1.
    The traceback must come before that exit line, as a worker's output comes before its exit."""
    exits = ev.filter(
        pl.col("signal").is_in(["process_exit", "root_cause"])
        & pl.col("subject").is_not_null()
        # 1..127: the process exited itself; 128+N is a shell's or container's "killed by signal N"
        & pl.col("exitcode").is_between(1, 127)
    )
    if not exits.height:
        return ev
    by_source = exits.group_by("source").agg(ranks=pl.col("subject").unique(), at=pl.col("_i").min())
    placed = {src: (ranks[0], at) for src, ranks, at in by_source.iter_rows() if len(ranks) == 1}
    if not placed:
        return ev
    fixes: dict[int, int] = {}
    notes: dict[int, str] = {}
    todo = ev.filter(
        pl.col("subject").is_null()
        & pl.col("rank").is_null()
        & pl.col("signal").is_in(EXCEPTION_SIGNALS)
        & (pl.col("_fw") > 0)
        & pl.col("source").is_in(list(placed))
    )
    for i, src in todo.select("_i", "source").iter_rows():
        rank, at = placed[src]
        if i < at:
            fixes[i] = rank
            notes[i] = f"the launcher saw only rank {rank} exit with an error status in this log"
    return _with_subjects(ev, fixes, notes)


def _rank_of_local(local: dict[tuple[str | None, int], int], host: str | None, lr: int) -> int | None:
    """The global rank of local rank ``lr`` on ``host``: seen, or from the node's block of ranks
    (every rank seen there is its local rank plus one offset, as torchrun numbers nodes)."""
    if host is None:
        return None
    if (host, lr) in local:
        return local[(host, lr)]
    offsets = {r - lr_seen for (h, lr_seen), r in local.items() if h == host}
    return offsets.pop() + lr if len(offsets) == 1 else None


def rank_states(
    ev: pl.DataFrame,
    timeouts: list[Timeout],
    expected: tuple[int, ...],
    book: AddressBook,
) -> dict[int, RankState]:
    """One RankState per rank seen or expected."""
    per: dict[int, dict[str, Any]] = defaultdict(dict)
    # Columns first, then rows: a filter or sort of the whole table would copy its 100-odd columns.
    has_rank = pl.col("rank").is_not_null()
    attributed = ev.select(*_STATE_COLUMNS).filter(has_rank)
    if attributed.height:
        base = attributed.group_by("rank").agg(
            host=pl.col("host").drop_nulls().mode().sort().first(),
            local_rank=pl.col("local_rank").drop_nulls().first(),
            pids=pl.col("pid").drop_nulls().unique().sort(),
            sources=pl.col("source").unique().sort(),
            lines=pl.len(),
            first_time=pl.col("ctime").min(),
            last_time=pl.col("ctime").max(),
            last_i=pl.col("_i").max(),
            repeat=pl.col("repeat").max(),
        )
        for r in base.iter_rows(named=True):
            per[r["rank"]].update(r)
        last_rows = ev.filter(pl.col("_i").is_in(base["last_i"].implode()))
        for r in row_dicts(last_rows):
            per[r["rank"]]["last_row"] = r
        errs = (
            ev.filter(has_rank & pl.col("severity").is_in(["error", "critical"]))
            .sort("ctime", "_i", nulls_last=True)
            .group_by("rank", maintain_order=True)
            .first()
        )
        for r in row_dicts(errs):
            per[r["rank"]]["first_error"] = r
    quiet = ("root_cause", "process_exit", "dump", "abort", *HANG_SIGNALS)
    active = attributed.filter((pl.col("_fw") == 0) & ~pl.col("signal").fill_null("").is_in(list(quiet)))
    if active.height:
        for rank, t in active.group_by("rank").agg(pl.col("ctime").max()).iter_rows():
            per[rank]["last_active"] = t
    # Work status per process group (watchdog follow-ups and dump-signal lines carry it).
    ws = ev.select("rank", "pgk", "last_enqueued", "last_completed").filter(
        has_rank & (pl.col("last_enqueued").is_not_null() | pl.col("last_completed").is_not_null())
    )
    if ws.height:
        agg = (
            ws.with_columns(pgk=pl.col("pgk").fill_null("0"))
            .group_by("rank", "pgk")
            .agg(enq=pl.col("last_enqueued").max(), done=pl.col("last_completed").max())
        )
        for rank, pgk, enq, done in agg.iter_rows():
            if enq is not None:
                per[rank].setdefault("last_enqueued", {})[pgk] = enq
            if done is not None:
                per[rank].setdefault("last_completed", {})[pgk] = done
    prog = ev.filter((pl.col("signal") == "progress") & has_rank)
    if prog.height:
        steps = prog.group_by("rank").agg(step=pl.col("step").max(), total=pl.col("total_steps").max())
        for rank, step, total in steps.iter_rows():
            per[rank]["last_step"] = step
            per[rank]["total_steps"] = total
    for rank, n in ev.filter((pl.col("signal") == "stall") & has_rank).group_by("rank").len().iter_rows():
        per[rank]["stalls"] = n
    beats = ev.filter(
        (pl.col("signal") == "heartbeat") & has_rank & pl.col("severity").is_in(["error", "critical"])
    )
    for r in row_dicts(beats):
        per[r["rank"]].setdefault("heartbeat", []).append(r)
    hang = ev.select("rank", "signal", "ctime", "_i", "source").filter(
        pl.col("signal").is_in(["collective_timeout", "abort", "work_status"]) & has_rank
    )
    if hang.height:
        first_hang = (
            hang.sort("_i")
            .group_by("rank")
            .agg(t=pl.col("ctime").min(), i=pl.col("_i").first(), src=pl.col("source").first())
        )
        for rank, t, i, src in first_hang.iter_rows():
            per[rank]["hang_time"] = t
            per[rank]["hang_i"] = i
            per[rank]["hang_source"] = src
    exits = ev.filter(
        pl.col("signal").is_in(["process_exit", "root_cause"]) & pl.col("subject").is_not_null()
    )
    for r in row_dicts(exits.filter(pl.col("exitcode").is_not_null() | pl.col("signal_name").is_not_null())):
        d = per[r["subject"]]
        if r["exitcode"] is not None and d.get("exitcode") is None:
            d["exitcode"] = r["exitcode"]
        if r["signal_name"] is not None and d.get("exit_signal") is None:
            d["exit_signal"] = r["signal_name"]
    fails = _failures(ev, per)
    for t in timeouts:
        if t.rank is not None:
            per[t.rank].setdefault("timeouts", []).append(t)
    out: dict[int, RankState] = {}
    for rank in sorted(set(per) | set(expected) | set(fails)):  # a failure about a rank makes its state
        d = per.get(rank, {})
        rank_fails = sorted(fails.get(rank, []), key=failure_order)
        primary = [f for f in rank_fails if not f.after_hang and f.weight >= 0.3]
        best = sorted(primary, key=lambda f: (-f.weight, failure_order(f)))[0] if primary else None
        out[rank] = RankState(
            rank=rank,
            host=d.get("host") or book.rank_host.get(rank),
            local_rank=d.get("local_rank"),
            pids=tuple(d.get("pids") or ()),
            sources=tuple(d.get("sources") or ()),
            lines=d.get("lines", 0),
            first_time=d.get("first_time"),
            last_time=d.get("last_time"),
            last_row=d.get("last_row"),
            timeouts=tuple(d.get("timeouts", ())),
            last_enqueued=dict(d.get("last_enqueued", {})),
            last_completed=dict(d.get("last_completed", {})),
            last_step=d.get("last_step"),
            total_steps=d.get("total_steps"),
            failure=best,
            failures=tuple(rank_fails),
            first_error=d.get("first_error"),
            exitcode=d.get("exitcode"),
            exit_signal=d.get("exit_signal"),
            heartbeat=tuple(d.get("heartbeat", ())),
            stalls=d.get("stalls", 0),
            repeat=d.get("repeat") or 1,
            hang_time=d.get("hang_time"),
            hang_i=d.get("hang_i"),
            last_active=d.get("last_active"),
        )
    return out


def unattributed_failures(ev: pl.DataFrame) -> list[Failure]:
    """Failures no rank could be tied to (a host-level Xid, an unprefixed traceback)."""
    rows = ev.filter((pl.col("_fw") >= 0.3) & pl.col("subject").is_null())
    return [_failure(r, None, False) for r in row_dicts(rows)]


def _failures(ev: pl.DataFrame, per: Mapping[int, Mapping[str, Any]]) -> dict[int, list[Failure]]:
    out: dict[int, list[Failure]] = defaultdict(list)
    rows = ev.filter((pl.col("_fw") > 0) & pl.col("subject").is_not_null())
    for r in row_dicts(rows):
        d = per.get(r["subject"], {})
        out[r["subject"]].append(_failure(r, r["subject"], _after_hang(r, d)))
    return out


def _failure(r: dict[str, Any], rank: int | None, after: bool) -> Failure:
    return Failure(
        rank=rank,
        host=r["host"],
        category=r["_fcat"] or "other",
        weight=float(r["_fw"]),
        signal=r["signal"] or "",
        pattern=r["pattern"] or "",
        row=r,
        after_hang=after,
    )


def _after_hang(r: dict[str, Any], d: Mapping[str, Any]) -> bool:
    """Whether the rank was already in a timeout/abort when it logged this failure."""
    if r["signal"] in ("oom", "xid", "duplicate_gpu"):
        return False
    ht, hi = d.get("hang_time"), d.get("hang_i")
    if hi is None:
        return False
    if r["ctime"] is not None and ht is not None:
        return bool(r["ctime"] > ht)
    if r["source"] == d.get("hang_source"):
        return bool(r["_i"] > hi)
    return False


def failure_order(f: Failure) -> tuple[int, float, int]:
    """Sort key: timestamped failures first, by time; then the rest in file order."""
    t = f.time
    return (0 if t is not None else 1, t.timestamp() if t is not None else 0.0, int(f.row["_i"]))
