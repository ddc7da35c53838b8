"""Dataset-level attribution: give every event its global rank, local rank, host, pid and time.

Runs after pattern matching over the events table (``model.EVENT_BASE_COLUMNS`` + pattern
fields + the matcher's internal ``_`` columns, see ``INTERNAL_SCHEMA``) and returns the table
with ``rank``, ``local_rank``, ``host``, ``pid``, ``time`` and ``attribution`` filled and the
internal columns dropped, plus a :class:`Topology` of what the whole data set says.

Evidence, strongest first (the first that applies gives the rank; a disagreeing weaker one is
recorded in the attribution text):

1. the line's own global rank: ``[rankN]:`` (c10 / Python logger), NCCL 2.29.2+ ``[Rank G]``
   on a comm-init line, DeepSpeed ``log_dist`` ``[Rank N]``;
2. the line's process ``(host, pid)`` (NCCL header pid, Python-logger pid, Ray pid, the pid of
   a single-process file) mapped to a rank by: rank-prefixed lines of the same process, NCCL
   ``comm … rank R nranks N`` init lines on the world communicator (the largest ``nranks``),
   the torchrun ChildFailedError block (``rank : R (local_rank: L)`` + ``host`` + ``pid``);
3. the application prefix ``Rank N: `` (see ``ingest.prefixes``);
4. the file: a single-process file whose other lines name one rank; a file name
   (``rank_3.log``) unless the file's lines show other ranks;
5. a torchrun local rank (tee ``[default3]:`` or ``attempt_0/3/``) on a known node, through a
   (node, local rank) -> rank map learned from lines with both, NCCL ``localRank`` lines,
   ChildFailedError blocks, or local == global when the job has a single node;
6. a Slurm task id, only when tasks are ranks (every task with rank evidence shows exactly
   its own id as the rank; a task with several ranks, several pids or tee prefixes makes tasks
   nodes, which then give host evidence instead);
7. a process-group rank of the default group (``[PG 0 (default_pg) Rank 3]``, pg GUID ``0``;
   counted with 1), the unnamed WorkNCCL ``[Rank r]`` only when the data set shows no group but
   the default one; finally the only rank seen on the line's host (not for kernel, Ray-system
   or launcher lines, nor for a line whose own pid no evidence names).

Also: a process driving several GPUs (``ncclCommInitAll``, nccl-tests ``-g N``) maps ranks per
``[dev]``; NCCL Trees/Ring/Channel lines give a process's rank when no init line does (only when
no smaller communicator is seen); Ray Train's worker table, the nccl-tests device table and any
line with ``target_rank`` + ``target_pid`` teach pids; a torchrun worker folder
``attempt_N/<local>/`` is one process; the traceback torch.multiprocessing.spawn re-raises
after ``-- Process N terminated with the following error:`` belongs to process N.

``rank`` is always the rank of the process that *wrote* the line. A launcher or Ray line about
one worker (``Sending process 48230 closing signal``, ``exits with return code``, ``Worker PID``)
keeps ``rank`` null and gets ``target_rank`` from its ``target_pid`` / ``target_local_rank``;
its attribution text says both.

Missing years (c10/glog ``MMDD``, journald) come from other lines of the same file, then a date
in the file's path, then lines of the same host, then the whole data set (the year that puts
the time nearest the reference), never from today; with none the time stays null and a note
says so. dmesg uptime seconds are not placed on the wall clock.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import polars as pl
import regex

from nccllog.ingest.paths import FileAttrs, attrs_from_path
from nccllog.ingest.prefixes import LineAttrs, parse_line
from nccllog.ingest.timestamps import PLACEHOLDER_YEAR

# Internal columns resolve() reads (all optional; missing ones are derived from text/source or null).
INTERNAL_SCHEMA: dict[str, Any] = {
    "_srun_task": pl.Int64,
    "_ip": pl.String,
    "_ray_actor": pl.String,
    "_nccl_dev": pl.Int64,
    "_year_known": pl.Boolean,
    "_file_rank": pl.Int64,
    "_file_local_rank": pl.Int64,
    "_file_host": pl.String,
    "_file_pid": pl.Int64,
    "_file_evidence": pl.String,
    # beyond the matcher's first set; derived from `text` / `source` when absent
    "_rank_kind": pl.String,  # LineAttrs.rank_kind
    "_layers": pl.String,  # LineAttrs.layers joined by ","
    "_pg_desc": pl.String,
    "_src": pl.String,  # LineAttrs.src (producer file:line)
    "_logger": pl.String,
    "_file_year": pl.Int64,
    "_file_attempt": pl.Int64,
    "_file_single": pl.Boolean,
}
_DERIVED_FROM_TEXT = ("_year_known", "_rank_kind", "_layers", "_pg_desc", "_src", "_logger")
_DERIVED_FROM_PATH = ("_file_year", "_file_attempt", "_file_single")

# The writing process's own rank in NCCL topology lines (formats.md §5.3): `Trees [0] a/b/c->R->up`,
# `Ring 00 : p -> R -> n`, `Channel 00/0 : R[x] -> p[y] [send] via …` (own rank on the right for
# `[receive]`; P2P/SHM lines are printed by the sender).
_OWN_RANK = regex.compile(
    r"Trees \[[0-9]+\] -?[0-9]+/-?[0-9]+/-?[0-9]+->(?P<tree>[0-9]+)->"
    r"|Ring [0-9]+ : -?[0-9]+ -> (?P<ring>[0-9]+) -> -?[0-9]+$"
    r"|Channel [0-9]+(?:/[0-9]+)? : (?P<a>[0-9]+)\[[^\]]*\] -> (?P<b>[0-9]+)\[[^\]]*\] ?(?P<dir>\[send\]|\[receive\])? ?via "
    r"|Duplicate GPU detected : rank (?P<dup>[0-9]+) and rank",
    regex.ASCII,
)
# Lines that name a process's rank and pid together (read when no pattern gave target fields):
# Ray Train's worker table and the nccl-tests device table.
_NAMED_PROC = regex.compile(
    r".*?\(ip=(?P<ip>[0-9A-Fa-f.:]+), pid=(?P<pid>[0-9]+)\) world_rank=(?P<rank>[0-9]+), local_rank=(?P<local>[0-9]+)"
    r"|#\s+Rank\s+(?P<rank2>[0-9]+)(?:\s+Group\s+[0-9]+)?\s+Pid\s+(?P<pid2>[0-9]+)\s+on\s+(?P<host2>\S+)\s+device\s",
    regex.ASCII,
)
# DeepSpeed's global_rank_mapping: `'host': [8, 9, …]` entries (the launcher's authoritative map).
_RANK_MAP_ENTRY = regex.compile(r"""['"](?P<host>[^'"]+)['"]\s*:\s*\[(?P<ranks>[0-9,\s]*)\]""", regex.ASCII)
_SPAWN_BLOCK = regex.compile(r"-- Process (?P<n>[0-9]+) terminated with the following error:", regex.ASCII)
_EXC_LINE = regex.compile(
    r"(?:[A-Za-z_][A-Za-z0-9_]*\.)*[A-Za-z_][A-Za-z0-9_]*(?:Error|Exception|Interrupt)\b", regex.ASCII
)
_LAUNCHER_SRC = (
    "torch/distributed/elastic/",
    "torch/distributed/run.py",
    "torch/distributed/launch",
    "torch/multiprocessing/",
    "deepspeed/launcher/",
)
# Rank evidence that is the application's own word, weakest of all (see the module docstring).
_APP_KINDS = ("app", "text")
_LAUNCHER_LOGGERS = ("torch.distributed.elastic", "torch.distributed.run", "torch.multiprocessing")


def internal_values(attrs: LineAttrs, fattrs: FileAttrs) -> dict[str, Any]:
    """The internal-column values of one line, for the matcher (keys of ``INTERNAL_SCHEMA``)."""
    return {
        "_srun_task": attrs.srun_task,
        "_ip": attrs.ip,
        "_ray_actor": attrs.ray_actor,
        "_nccl_dev": attrs.nccl_dev,
        "_year_known": None if attrs.time is None else attrs.time.year is not None,
        "_file_rank": fattrs.rank,
        "_file_local_rank": fattrs.local_rank,
        "_file_host": fattrs.host,
        "_file_pid": fattrs.pid,
        "_file_evidence": fattrs.evidence or None,
        "_rank_kind": attrs.rank_kind,
        "_layers": ",".join(attrs.layers) or None,
        "_pg_desc": attrs.pg_desc,
        "_src": attrs.src,
        "_logger": attrs.logger,
        "_file_year": fattrs.year,
        "_file_attempt": fattrs.attempt,
        "_file_single": fattrs.single_process,
    }


@dataclass(frozen=True)
class Topology:
    """What the whole dataset says about ranks, hosts and processes."""

    world_size: int | None = None
    world_size_evidence: tuple[str, ...] = ()
    world_size_disagreements: tuple[str, ...] = ()
    pid_rank: dict[tuple[str | None, int], int] = field(default_factory=dict)  # (host, pid) -> rank
    host_ranks: dict[str, tuple[int, ...]] = field(default_factory=dict)
    rank_host: dict[int, str] = field(default_factory=dict)
    ip_host: dict[str, str] = field(default_factory=dict)
    rank_local_rank: dict[int, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


# --------------------------------------------------------------------------------------------
def _is_ip(h: str) -> bool:
    parts = h.split(".")
    return (len(parts) == 4 and all(p.isdigit() for p in parts)) or (":" in h)


def _hkey(h: str | None) -> str | None:
    """Host comparison key: IPs as they are, names lower-cased and cut at the first dot (as NCCL does)."""
    if not h:
        return None
    return h if _is_ip(h) else h.split(".", 1)[0].lower()


def _col(df: pl.DataFrame, name: str) -> list[Any]:
    return df.get_column(name).to_list() if name in df.columns else [None] * df.height


# No job has this many ranks (the largest have ~10^5): a rank, group size or world size beyond
# it is a garbled line, not evidence (and would make per-rank tables unbounded).
MAX_RANKS = 1 << 20


def _nonneg(values: list[Any], minimum: int = 0, maximum: int | None = MAX_RANKS) -> list[Any]:
    """Numbers below ``minimum`` (negative ranks, nranks 0 …) or above ``maximum`` are no evidence: None."""
    return [
        v if isinstance(v, int) and v >= minimum and (maximum is None or v <= maximum) else None
        for v in values
    ]


def _with_internal(events: pl.DataFrame) -> pl.DataFrame:
    """Add internal columns the matcher did not provide, derived from ``text``/``source`` or null."""
    missing_text = [c for c in _DERIVED_FROM_TEXT if c not in events.columns]
    missing_path = [c for c in _DERIVED_FROM_PATH if c not in events.columns]
    add: dict[str, pl.Series] = {}
    if missing_text and "text" in events.columns:
        cache: dict[str, dict[str, Any]] = {}
        vals: dict[str, list[Any]] = {c: [] for c in missing_text}
        for t in events.get_column("text").to_list():
            d = cache.get(t)
            if d is None:
                d = cache[t] = internal_values(parse_line(t or ""), FileAttrs())
            for c in missing_text:
                vals[c].append(d[c])
        for c in missing_text:
            add[c] = pl.Series(c, vals[c], INTERNAL_SCHEMA[c])
    if missing_path and "source" in events.columns:
        pcache: dict[str, dict[str, Any]] = {}
        pvals: dict[str, list[Any]] = {c: [] for c in missing_path}
        for s in events.get_column("source").to_list():
            d = pcache.get(s)
            if d is None:
                d = pcache[s] = internal_values(LineAttrs(message=""), attrs_from_path(s or ""))
            for c in missing_path:
                pvals[c].append(d[c])
        for c in missing_path:
            add[c] = pl.Series(c, pvals[c], INTERNAL_SCHEMA[c])
    if add:
        events = events.with_columns(list(add.values()))
    return events


class _Facts:
    """Rank facts about one key, with their evidence, strongest kind first."""

    ORDER = ("direct", "comm", "childfailed", "ring", "file", "app")

    def __init__(self) -> None:
        self.by_kind: dict[str, Counter[int]] = defaultdict(Counter)
        self.text: dict[tuple[str, int], str] = {}

    def add(self, kind: str, rank: int, text: str) -> None:
        self.by_kind[kind][rank] += 1
        self.text.setdefault((kind, rank), text)

    def best(self) -> tuple[int, str, list[str]] | None:
        """(rank, evidence, conflicts) from the strongest kind; the most frequent value within it."""
        chosen: tuple[int, str] | None = None
        conflicts: list[str] = []
        for kind in self.ORDER:
            c = self.by_kind.get(kind)
            if not c:
                continue
            top = sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))
            if chosen is None:
                chosen = (top[0][0], self.text[(kind, top[0][0])])
                others = [r for r, _ in top[1:]]
            else:
                others = [r for r, _ in top if r != chosen[0]]
            for r in others:
                conflicts.append(self.text[(kind, r)])
        if chosen is None:
            return None
        return chosen[0], chosen[1], conflicts


def resolve(
    events: pl.DataFrame, file_mtimes: Mapping[str, datetime] | None = None
) -> tuple[pl.DataFrame, Topology]:
    """Fill rank/local_rank/host/pid/time/attribution from all the evidence and drop the internal columns.

    ``file_mtimes`` (source -> modification time) is the last resort for a missing year.
    """
    if events.height == 0:
        out = events
        if "attribution" not in out.columns:
            out = out.with_columns(pl.lit(None, pl.String).alias("attribution"))
        return out.drop([c for c in out.columns if c.startswith("_")]), Topology()
    return _Resolver(_with_internal(events), file_mtimes or {}).run()


class _Resolver:
    def __init__(self, ev: pl.DataFrame, file_mtimes: Mapping[str, datetime]) -> None:
        self.ev = ev
        self.file_mtimes = file_mtimes
        self.n = ev.height
        c = lambda name: _col(ev, name)  # noqa: E731
        self.source: list[str] = [s or "" for s in c("source")]
        self.line: list[int] = [x or 0 for x in c("line")]
        self.signal = c("signal")
        self.lrank = _nonneg(c("rank"))
        self.rkind = c("_rank_kind")
        # A line that names its writer's rank in its text (`rank 2/16 …`, `… on rank 2...`) is
        # as weak as an application prefix: the application's word, not the launcher's.
        for i, r in enumerate(_nonneg(c("own_rank"))):
            if r is not None and self.lrank[i] is None:
                self.lrank[i] = r
                self.rkind[i] = "text"
        self.llocal = _nonneg(c("local_rank"))
        for i, lr in enumerate(_nonneg(c("own_local_rank"))):
            if lr is not None and self.llocal[i] is None:
                self.llocal[i] = lr
        self.lhost = c("host")
        self.lpid = _nonneg(c("pid"), maximum=None)
        self.pg = c("pg")
        self.pgdesc = c("_pg_desc")
        self.pgrank = _nonneg(c("pg_rank"))
        self.ip = c("_ip")
        self.srun = _nonneg(c("_srun_task"))
        self.layers = [tuple(x.split(",")) if x else () for x in c("_layers")]
        self.src = c("_src")
        self.logger = c("_logger")
        self.time = c("time")
        self.year_known = c("_year_known")
        self.f_rank = _nonneg(c("_file_rank"))
        self.f_local = _nonneg(c("_file_local_rank"))
        self.f_host = c("_file_host")
        self.f_pid = _nonneg(c("_file_pid"), maximum=None)
        self.f_ev = c("_file_evidence")
        self.f_year = c("_file_year")
        self.f_single = c("_file_single")
        self.f_attempt = _nonneg(c("_file_attempt"))
        self.comm_rank = _nonneg(c("comm_rank"))
        self.nranks = _nonneg(c("nranks"), 1)
        self.comm_id = c("comm_id")
        self.fld_ip = c("ip")
        self.fld_master = c("master_addr")
        self.fld_node_rank = c("node_rank")
        self.fld_thost = c("target_host")
        self.t_rank = _nonneg(c("target_rank"))
        self.t_local = _nonneg(c("target_local_rank"))
        self.t_pid = _nonneg(c("target_pid"), maximum=None)
        self.t_host = c("target_host")
        self.f_world = _nonneg(c("world_size"), 1)
        self.rank_map = c("rank_map")
        self.ndev = _nonneg(c("_nccl_dev"))
        self.cuda_dev = _nonneg(c("cuda_dev"))
        self.message = c("message")
        # the unit of "one process's output": a file, or a torchrun worker folder attempt_N/<local>/
        self.unit: list[str] = [
            src.rsplit("/", 1)[0] + "/"
            if self.f_attempt[i] is not None and self.f_local[i] is not None
            else src
            for i, src in enumerate(self.source)
        ]
        self.notes: list[str] = []
        self.display: dict[str, str] = {}  # host key -> display name
        self.strong: set[str] = set()

    # ---- helpers ---------------------------------------------------------------------------
    def _disp(self, key: str | None) -> str | None:
        return None if key is None else self.display.get(key, key)

    def _learn_display(self, h: str | None, strong: bool) -> str | None:
        """Register how a host is shown: the first NCCL-header spelling wins, else the first seen."""
        k = _hkey(h)
        if k is None or h is None:
            return k
        if k not in self.display or (strong and k not in self.strong):
            self.display[k] = h if _is_ip(h) else h.split(".", 1)[0]
            if strong:
                self.strong.add(k)
        return k

    # ---- passes ----------------------------------------------------------------------------
    def run(self) -> tuple[pl.DataFrame, Topology]:
        self._ip_map()
        self._keys()
        self._world()
        self._process_ranks()
        self._files()
        self._spawn_blocks()
        self._nodes_and_tasks()
        self._assign()
        self._times()
        return self._output()

    def _ip_map(self) -> None:
        seen: dict[str, set[str]] = defaultdict(set)
        for i in range(self.n):
            h = self.lhost[i] or self.f_host[i]
            k = self._learn_display(h, "nccl" in self.layers[i])
            if k is None or _is_ip(k):
                continue
            if self.signal[i] == "bootstrap" and self.fld_ip[i]:
                seen[self.fld_ip[i]].add(k)
            if self.ip[i] and "nccl" in self.layers[i]:
                seen[self.ip[i]].add(k)
        # A launch script on node rank 0 printing MASTER_ADDR says which host that address is.
        for i in range(self.n):
            master = self.fld_master[i]
            if master and _is_ip(master) and self.fld_node_rank[i] == 0:
                h = self.fld_thost[i] or self.lhost[i] or self.f_host[i]
                k = self._learn_display(h, False)
                if k is not None and not _is_ip(k):
                    seen[master].add(k)
        self.ip_host: dict[str, str] = {}
        for ip, hosts in sorted(seen.items()):
            if len(hosts) == 1:
                self.ip_host[ip] = next(iter(hosts))
            else:
                self.notes.append(
                    f"address {ip} is used by several hosts ({', '.join(sorted(hosts))}); not used to identify hosts"
                )

    def _host_of(self, h: str | None) -> str | None:
        k = _hkey(h)
        if k is not None and _is_ip(k):
            return self.ip_host.get(k, k)
        return k

    def _keys(self) -> None:
        """Each row's host key and process key (host, pid)."""
        self.hk: list[str | None] = []
        self.key: list[tuple[str | None, int] | None] = []
        for i in range(self.n):
            h = self._host_of(self.lhost[i])
            if h is None and self.ip[i]:
                h = self._host_of(self.ip[i])
            if h is None:
                h = self._host_of(self.f_host[i])
            p = self.lpid[i]
            if p is None and self.f_pid[i] is not None:
                p = self.f_pid[i]
                if h is None:
                    h = self._host_of(self.f_host[i])
            self.hk.append(h)
            self.key.append((h, p) if p is not None else None)
        # a pid seen without its host (Python logger, Ray on the driver's node) joins the one
        # process with that pid on a named host, when there is exactly one
        named: dict[int, set[str]] = defaultdict(set)
        for k in self.key:
            if k is not None and k[0] is not None and not _is_ip(k[0]):
                named[k[1]].add(k[0])
        for i, k in enumerate(self.key):
            if k is not None and (k[0] is None or _is_ip(k[0])) and len(named.get(k[1], ())) == 1:
                h = next(iter(named[k[1]]))
                self.key[i] = (h, k[1])
                if self.hk[i] is None or _is_ip(self.hk[i] or ""):
                    self.hk[i] = h

    def _world(self) -> None:
        """World size and the world communicator's (host, pid) -> rank."""
        sizes = Counter(
            x for i, x in enumerate(self.nranks) if x is not None and self.comm_rank[i] is not None
        )
        self.world: int | None = max(sizes) if sizes else None
        self.ws_evidence: list[str] = []
        self.ws_disagree: list[str] = []
        self.comm_facts: dict[tuple[str | None, int], dict[int, str]] = defaultdict(dict)
        self.local_facts: dict[tuple[str | None, int], Counter[int]] = defaultdict(Counter)
        self.nnodes: Counter[int] = Counter()
        self.dev_facts: dict[tuple[str | None, int], dict[int, set[int]]] = defaultdict(
            lambda: defaultdict(set)
        )
        self.multi_dev: dict[tuple[str | None, int], dict[int, tuple[int, str]]] = {}
        if self.world is not None:
            others = sorted(s for s in sizes if s != self.world)
            self.ws_evidence.append(
                f"NCCL comm init: largest communicator has {self.world} ranks"
                + (f" (smaller communicators: {', '.join(map(str, others))})" if others else "")
            )
        nn = _nonneg(_col(self.ev, "nnodes"), 1)
        for i in range(self.n):
            if self.nranks[i] != self.world or self.world is None or self.comm_rank[i] is None:
                continue
            k = self.key[i]
            if nn[i] is not None:
                self.nnodes[nn[i]] += 1
            if k is None:
                continue
            r = self.comm_rank[i]
            if r < 0 or r >= self.world:
                continue
            host = self._disp(k[0]) or "unknown host"
            self.comm_facts[k].setdefault(
                r, f"NCCL comm init: pid {k[1]} on {host} is rank {r} of {self.world}"
            )
            dev = self.cuda_dev[i] if self.cuda_dev[i] is not None else self.ndev[i]
            if dev is not None:
                self.dev_facts[k][dev].add(r)
            if self.t_local[i] is not None:
                self.local_facts[k][self.t_local[i]] += 1
        # one process driving several GPUs (ncclCommInitAll, nccl-tests -g N): rank per device
        for k, ranks in list(self.comm_facts.items()):
            devs = self.dev_facts.get(k, {})
            if len(ranks) > 1 and devs and all(len(rs) == 1 for rs in devs.values()):
                host = self._disp(k[0]) or "unknown host"
                self.multi_dev[k] = {
                    d: (
                        next(iter(rs)),
                        f"NCCL comm init: pid {k[1]} on {host} drives several GPUs; device [{d}] is rank "
                        f"{next(iter(rs))} of {self.world}",
                    )
                    for d, rs in devs.items()
                }
                del self.comm_facts[k]
        self._ring_ranks(sizes)
        for i in range(self.n):
            if self.t_pid[i] is not None and self.t_local[i] is not None and self.signal[i] != "init":
                h = self._host_of(self.t_host[i]) if self.t_host[i] else self.hk[i]
                self.local_facts[(h, self.t_pid[i])][self.t_local[i]] += 1
        # nodes x processes per node (torchrun command line, verl trainer config) is a world size too
        nproc = _nonneg(_col(self.ev, "nproc_per_node"), 1)
        for i in range(self.n):
            if nproc[i] is not None and self.f_world[i] is None and nproc[i] < 2**20:
                nodes = nn[i] if nn[i] is not None and nn[i] < 2**20 else 1
                self.f_world[i] = nodes * nproc[i]
        wf = Counter(x for x in self.f_world if x is not None and x > 0)
        for w, cnt in sorted(wf.items()):
            self.ws_evidence.append(f"world_size {w} printed on {cnt} line(s)")
        if self.world is None and wf:
            self.world = sorted(wf.items(), key=lambda kv: (-kv[1], -kv[0]))[0][0]
        elif self.world is not None:
            for w in sorted(wf):
                if w != self.world:
                    self.ws_disagree.append(
                        f"world_size {w} printed, but the largest NCCL communicator has {self.world} ranks"
                    )

    def _ring_ranks(self, sizes: Counter[int]) -> None:
        """Own comm rank from NCCL Trees/Ring/Channel lines, used when no init line names the process.

        Only when no communicator smaller than the largest is seen: these lines carry no comm id,
        and a subgroup's lines would give its group rank.
        """
        self.ring_facts: dict[tuple[str | None, int], Counter[int]] = defaultdict(Counter)
        if len(sizes) > 1:
            return
        for i in range(self.n):
            k = self.key[i]
            if k is None or k in self.multi_dev:
                continue
            r: int | None = None
            if self.comm_rank[i] is not None and self.nranks[i] is None:
                r = self.comm_rank[i]
            elif "nccl" in self.layers[i] and self.message[i]:
                m = _OWN_RANK.match(self.message[i])
                if m:
                    own = m.group("tree") or m.group("ring") or m.group("dup") or m.group("a")
                    if m.group("dir") == "[receive]":
                        own = m.group("b")
                    r = int(own) if own is not None and len(own) < 10 else None
            if r is not None:
                self.ring_facts[k][r] += 1

    def _process_ranks(self) -> None:
        """(host, pid) -> rank from direct prefixes, world comm init, ChildFailedError blocks, files."""
        self.proc: dict[tuple[str | None, int], _Facts] = defaultdict(_Facts)
        for i in range(self.n):
            k = self.key[i]
            if k is not None and self.lrank[i] is None and self.pgrank[i] is not None and self._default_pg(i):
                # the default group's rank is the global rank (`what(): [PG 0 (default_pg) Rank 0]`)
                self.proc[k].add(
                    "direct",
                    self.pgrank[i],
                    f"rank {self.pgrank[i]} in the default process group on a line of pid {k[1]}",
                )
            if k is None or self.lrank[i] is None:
                continue
            kind = self.rkind[i] or "prefix"
            if kind in _APP_KINDS:
                self.proc[k].add("app", self.lrank[i], f"{self._direct_text(i)} of pid {k[1]}")
            else:
                self.proc[k].add("direct", self.lrank[i], self._direct_text(i, k))
        for k, ranks in self.comm_facts.items():
            for r, text in ranks.items():
                self.proc[k].add("comm", r, text)
        for k, counts in self.ring_facts.items():
            if len(counts) == 1 and k not in self.comm_facts:
                r = next(iter(counts))
                self.proc[k].add(
                    "ring",
                    r,
                    f"NCCL ring/tree lines: pid {k[1]} on {self._disp(k[0]) or 'unknown host'} is rank {r}",
                )
        self._childfailed()
        for i in range(self.n):
            if self.f_rank[i] is not None and self.f_pid[i] is not None and self.key[i] is not None:
                k = (self._host_of(self.f_host[i]), self.f_pid[i])
                self.proc[k].add("file", self.f_rank[i], f"file name ({self.f_ev[i]})")
        self.proc_rank: dict[tuple[str | None, int], tuple[int, str, list[str]]] = {}
        for k, facts in self.proc.items():
            b = facts.best()
            if b:
                self.proc_rank[k] = b
                if b[2]:
                    self.notes.append(
                        f"pid {k[1]} on {self._disp(k[0]) or 'unknown host'}: {b[1]}; disagreeing: {'; '.join(b[2])}"
                    )
        by_pid: dict[int, set[tuple[str | None, int]]] = defaultdict(set)
        for k in self.proc_rank:
            by_pid[k[1]].add(k)
        self.pid_only = {p: next(iter(ks)) for p, ks in by_pid.items() if len(ks) == 1}

    def _direct_text(self, i: int, k: tuple[str | None, int] | None = None) -> str:
        kind = self.rkind[i] or "prefix"
        r = self.lrank[i]
        if kind == "nccl":
            return f"NCCL [Rank {r}] on the comm init line"
        if kind == "log_dist":
            return f"DeepSpeed log_dist [Rank {r}]"
        if kind == "app":
            return f"application prefix 'Rank {r}: '"
        if kind == "text":
            return f"the line names its writer: rank {r}"
        base = f"prefix [rank{r}]:"
        if k is not None:
            return f"{base} on a line of pid {k[1]}"
        return base

    def _childfailed(self) -> None:
        """torchrun ChildFailedError: `rank : R (local_rank: L)` + nearby `host :` and `exitcode … (pid: P)`.

        Also any line naming a rank and its pid together (target_rank + target_pid).
        """
        self.node_local: dict[tuple[str, int], Counter[int]] = defaultdict(Counter)
        self.node_local_text: dict[tuple[str, int, int], str] = {}
        self.rank_host_facts: dict[int, Counter[str]] = defaultdict(Counter)
        for i in range(self.n):
            r, p = self.t_rank[i], self.t_pid[i]
            h = self._host_of(self.t_host[i]) if self.t_host[i] else self.hk[i]
            lr = self.t_local[i]
            if (
                (r is None or p is None)
                and self.message[i]
                and ("pid=" in self.message[i] or " Pid " in self.message[i])
            ):
                m = _NAMED_PROC.match(self.message[i])
                if m:
                    r = int(m.group("rank") or m.group("rank2"))
                    p = int(m.group("pid") or m.group("pid2"))
                    h = self._host_of(m.group("ip") or m.group("host2"))
                    lr = int(m.group("local")) if m.group("local") else None
            if r is not None and p is not None and self.signal[i] != "init" and r < 2**31 and p < 2**31:
                text = f"{self.source[i]}:{self.line[i]} names pid {p}{f' on {self._disp(h)}' if h else ''} as rank {r}"
                self.proc[(h, p)].add("childfailed", r, text)
                if lr is not None and h is not None:
                    self.node_local[(h, lr)][r] += 1
                    self.node_local_text.setdefault((h, lr, r), text)
        self._rank_maps()
        rows = [
            i
            for i in range(self.n)
            if self.signal[i] == "root_cause" or self.t_host[i] is not None or self.t_pid[i] is not None
        ]
        if not rows:
            return
        by_src: dict[str, list[int]] = defaultdict(list)
        for i in rows:
            by_src[self.source[i]].append(i)
        for idx in by_src.values():
            idx.sort(key=lambda j: self.line[j])
            lines = [self.line[j] for j in idx]
            for j in idx:
                if self.signal[j] != "root_cause" or self.t_rank[j] is None:
                    continue
                r, lr = self.t_rank[j], self.t_local[j]
                host = pid = None
                lo = bisect_left(lines, self.line[j] - 3)
                hi = bisect_right(lines, self.line[j] + 3)
                for o in idx[lo:hi]:
                    d = self.line[o] - self.line[j]
                    if self.t_host[o] is not None and -3 <= d < 0 and self.signal[o] == "root_cause":
                        host = self._host_of(self.t_host[o])
                        self._learn_display(self.t_host[o], False)
                    if self.t_pid[o] is not None and 0 < d <= 3 and self.signal[o] == "root_cause":
                        pid = self.t_pid[o]
                hd = self._disp(host) or "unknown host"
                if host is not None:
                    self.rank_host_facts[r][host] += 1
                    if lr is not None:
                        self.node_local[(host, lr)][r] += 1
                        self.node_local_text.setdefault(
                            (host, lr, r), f"torchrun ChildFailedError: rank {r} is local rank {lr} on {hd}"
                        )
                if pid is not None:
                    self.proc[(host, pid)].add(
                        "childfailed", r, f"torchrun ChildFailedError: pid {pid} on {hd} is rank {r}"
                    )

    def _rank_maps(self) -> None:
        """DeepSpeed ``global_rank_mapping``: the i-th rank listed for a host is its local rank i."""
        for i in range(self.n):
            text = self.rank_map[i]
            if not text:
                continue
            for m in _RANK_MAP_ENTRY.finditer(text):
                h = self._host_of(m.group("host"))
                if h is None:
                    continue
                self._learn_display(m.group("host"), False)
                ranks = [int(x) for x in m.group("ranks").replace(",", " ").split() if len(x) < 10]
                for lr, r in enumerate(ranks):
                    self.rank_host_facts[r][h] += 1
                    self.node_local[(h, lr)][r] += 1
                    self.node_local_text.setdefault(
                        (h, lr, r),
                        f"DeepSpeed global_rank_mapping: local rank {lr} on {self._disp(h)} is rank {r}",
                    )

    def _files(self) -> None:
        """Per unit (a file, or a torchrun worker folder): is it one process's output, and whose."""
        rows: dict[str, list[int]] = defaultdict(list)
        for i in range(self.n):
            rows[self.unit[i]].append(i)
        self.file_rank: dict[str, tuple[int, str]] = {}
        self.file_key: dict[str, tuple[str | None, int]] = {}
        self.file_host: dict[str, str] = {}
        self.file_multi: dict[str, bool] = {}
        self.file_local: dict[str, int] = {}
        for unit, idx in rows.items():
            i0 = idx[0]
            keys = {self.key[i] for i in idx if self.key[i] is not None and self.lpid[i] is not None}
            direct: Counter[int] = Counter()
            how: dict[int, str] = {}
            for i in idx:
                r, text = self._line_rank(i)
                if r is not None:
                    direct[r] += 1
                    how.setdefault(r, text)
            hosts: set[str] = {h for h in (self.hk[i] for i in idx) if h is not None}
            if len(hosts) == 1:
                self.file_host[unit] = next(iter(hosts))
            launcher_layers = any(set(self.layers[i]) & {"tee", "srun", "ray", "pdsh"} for i in idx)
            single = bool(self.f_single[i0]) or (len(keys) == 1 and len(direct) <= 1 and not launcher_layers)
            if len(keys) > 1 or len(direct) > 1:
                single = False
            any_ranks = {self.lrank[i] for i in idx if self.lrank[i] is not None}
            self.file_multi[unit] = len(keys) > 1 or len(any_ranks | set(direct)) > 1
            if not single:
                if self.f_rank[i0] is not None and set(direct) - {self.f_rank[i0]}:
                    self.notes.append(
                        f"{unit}: the file name suggests rank {self.f_rank[i0]} but its lines show rank(s) "
                        f"{', '.join(map(str, sorted(direct)))}; the name is not used as a rank"
                    )
                continue
            if self.f_local[i0] is not None:
                self.file_local[unit] = self.f_local[i0]
            key = next(iter(keys)) if keys else None
            if key is None and self.f_pid[i0] is not None:
                key = (self._host_of(self.f_host[i0]), self.f_pid[i0])
            if key is not None:
                self.file_key[unit] = key
            cands: list[tuple[int, str]] = []
            if direct:
                r = direct.most_common(1)[0][0]
                cands.append((r, f"one process's output ({unit}): its other lines say rank {r} ({how[r]})"))
            if key is not None:
                pr = self._proc_lookup(key)
                if pr is not None:
                    cands.append((pr[0], pr[1]))
            if self.f_rank[i0] is not None:
                cands.append((self.f_rank[i0], f"file name ({self.f_ev[i0]})"))
            if cands:
                self.file_rank[unit] = cands[0]
                for r, text in cands[1:]:
                    if r != cands[0][0]:
                        self.notes.append(
                            f"{unit}: {cands[0][1]} (rank {cands[0][0]}), but {text} says rank {r}"
                        )

    def _line_rank(self, i: int) -> tuple[int | None, str]:
        """A global rank the line itself states (not the application prefix), with how."""
        if self.lrank[i] is not None and (self.rkind[i] or "prefix") not in _APP_KINDS:
            return self.lrank[i], self._direct_text(i)
        if self.pgrank[i] is not None and self._default_pg(i):
            return self.pgrank[i], f"rank {self.pgrank[i]} in the default process group ({self.pg[i]})"
        return None, ""

    def _default_pg(self, i: int) -> bool:
        return self.pg[i] is not None and (self.pg[i] == "0" or self.pgdesc[i] == "default_pg")

    def _proc_lookup(self, key: tuple[str | None, int]) -> tuple[int, str, list[str]] | None:
        pr = self.proc_rank.get(key)
        if pr is not None:
            return pr
        h, p = key
        other = self.pid_only.get(p)
        if other is not None and (h is None or other[0] is None or _is_ip(h) or _is_ip(other[0] or "")):
            return self.proc_rank[other]
        return None

    def _nodes_and_tasks(self) -> None:
        """Slurm tasks: ranks or nodes; node-level local -> global maps."""
        task_ranks: dict[int, Counter[int]] = defaultdict(Counter)
        task_pids: dict[int, set[int]] = defaultdict(set)
        task_hosts: dict[int, set[str]] = defaultdict(set)
        task_tee: set[int] = set()
        for i in range(self.n):
            t = self.srun[i]
            if t is None:
                continue
            r = self._row_rank_direct_or_proc(i)
            if r is not None:
                task_ranks[t][r] += 1
            if self.lpid[i] is not None:
                task_pids[t].add(self.lpid[i])
            hi = self.hk[i]
            if hi is not None:
                task_hosts[t].add(hi)
            if "tee" in self.layers[i] or self._not_a_worker(i):
                task_tee.add(t)
        tasks = {t for t in self.srun if t is not None}
        self.tasks_are: str | None = None
        self.task_rank: dict[int, int] = {}
        self.task_host = {t: next(iter(h)) for t, h in task_hosts.items() if len(h) == 1}
        if tasks:
            multi = [
                t
                for t in tasks
                if len(task_ranks.get(t, ())) > 1 or len(task_pids.get(t, ())) > 1 or t in task_tee
            ]
            if multi:
                self.tasks_are = "nodes"
                self.notes.append(
                    f"srun tasks are nodes, not ranks (task {min(multi)} shows several ranks or processes, "
                    "torchrun prefixes or launcher lines)"
                )
            else:
                self.task_rank = {t: c.most_common(1)[0][0] for t, c in task_ranks.items() if c}
                if self.task_rank and all(r == t for t, r in self.task_rank.items()):
                    self.tasks_are = "ranks"
                elif self.task_rank:
                    self.tasks_are = "processes"
                elif len(tasks) >= 2:
                    self.tasks_are = "ranks"
                    self.notes.append(
                        f"srun tasks taken as ranks: {len(tasks)} tasks, none showing several processes, "
                        "torchrun prefixes or launcher lines"
                        + (f" (world size {self.world})" if self.world is not None else "")
                    )
        # node-level (node, local) -> rank
        for k, (r, _text, _c) in self.proc_rank.items():
            for lr in self.local_facts.get(k, ()):
                if k[0] is not None:
                    self.node_local[(k[0], lr)][r] += 1
                    self.node_local_text.setdefault(
                        (k[0], lr, r), f"NCCL localRank {lr} of pid {k[1]} on {self._disp(k[0])} (rank {r})"
                    )
        for i in range(self.n):
            lr = self.llocal[i]
            if lr is None:
                continue
            r = self._row_rank_direct_or_proc(i)
            node = self._node(i)
            if r is not None and node is not None:
                self.node_local[(node, lr)][r] += 1
                self.node_local_text.setdefault(
                    (node, lr, r), f"lines with both [{lr}] tee and rank {r} on {self._node_disp(node)}"
                )
        # single node: NCCL says nNodes 1, or one node holds local rank world-1 (so all ranks)
        if self.nnodes:
            self.single_node = set(self.nnodes) == {1}
        else:
            top_local = max((x for x in self.llocal if x is not None), default=None)
            if top_local is None:
                top_local = max(self.file_local.values(), default=None)
            self.single_node = (
                self.world is not None
                and top_local is not None
                and top_local == self.world - 1
                and self.tasks_are != "nodes"
            )
        self.rank_local: dict[int, int] = {}
        rl: dict[int, Counter[int]] = defaultdict(Counter)
        for (_node, lr), c in self.node_local.items():
            for r in c:
                rl[r][lr] += 1
        for r, c in rl.items():
            if len(c) == 1:
                self.rank_local[r] = next(iter(c))

    def _row_rank_direct_or_proc(self, i: int) -> int | None:
        r, _how = self._line_rank(i)
        if r is not None:
            return r
        k = self.key[i]
        if k is not None:
            pr = self._proc_lookup(k)
            if pr is not None:
                return pr[0]
        return None

    def _node(self, i: int) -> str | None:
        if self.hk[i] is not None:
            return self.hk[i]
        unit = self.unit[i]
        t = self.srun[i]
        if t is not None and self.tasks_are == "nodes":
            return self.task_host.get(t, f"srun task {t}")
        if unit in self.file_host:
            return self.file_host[unit]
        return f"file {self.source[i]}"

    def _node_disp(self, node: str) -> str:
        return node if node.startswith(("srun task ", "file ")) else (self._disp(node) or node)

    # ---- per-row assignment ------------------------------------------------------------------
    def _assign(self) -> None:
        n = self.n
        self.out_rank: list[int | None] = [None] * n
        self.out_local: list[int | None] = [None] * n
        self.out_host: list[str | None] = [None] * n
        self.out_pid: list[int | None] = [None] * n
        self.out_attr: list[str] = [""] * n
        self.out_trank: list[int | None] = list(self.t_rank)
        only_default = self._only_default_group()
        self.host_rank: dict[str, set[int]] = defaultdict(set)
        for (h, _p), (r, _t, _c) in self.proc_rank.items():
            if h is not None:
                self.host_rank[h].add(r)
        for k, devs in self.multi_dev.items():
            if k[0] is not None:
                self.host_rank[k[0]].update(r for r, _t in devs.values())
        for i in range(n):
            unit = self.unit[i]
            key = self.key[i]
            if key is None and unit in self.file_key:
                key = self.file_key[unit]
            host_key = self.hk[i]
            if host_key is None and key is not None:
                host_key = key[0]
            rank, why, conflicts = self._own_rank(i, key, host_key, only_default)
            # `rank` is the writer's: a launcher or Ray line about one worker keeps rank null and
            # names that worker in target_rank (from target_pid / target_local_rank)
            target = self._target(i, host_key)
            if target is not None and self.t_rank[i] is None:
                self.out_trank[i] = target[0]
            if rank is not None and self.world is not None and rank >= self.world:
                conflicts.append(f"rank {rank} is outside the world size {self.world}")
            self.out_rank[i] = rank
            # host / pid / local rank
            if host_key is None and rank is not None:
                host_key = self._rank_host_key(rank)
            if host_key is None and self.srun[i] is not None and self.tasks_are == "nodes":
                host_key = self.task_host.get(self.srun[i])
            if host_key is None and unit in self.file_host and not self.file_multi.get(unit):
                host_key = self.file_host[unit]
            self.out_host[i] = self._disp(host_key)
            self.out_pid[i] = (
                self.lpid[i] if self.lpid[i] is not None else (key[1] if key is not None else None)
            )
            lr = self.llocal[i]
            if lr is None:
                lr = self.file_local.get(unit)
            if lr is None and key is not None and key in self.local_facts and len(self.local_facts[key]) == 1:
                lr = next(iter(self.local_facts[key]))
            if lr is None and rank is not None:
                lr = self.rank_local.get(rank)
            self.out_local[i] = lr
            if rank is None:
                why = self._reason(i, key)
            elif conflicts:
                why = f"{why}; conflicting evidence: {'; '.join(conflicts)}"
            if target is not None and self.t_rank[i] is None:
                why = f"{why}; the line is about {target[1]}"
            self.out_attr[i] = why
        self._terminate_what()

    def _terminate_what(self) -> None:
        """libstdc++ prints `terminate called after throwing …` and `  what():  …` together from one
        process: the first takes the rank of the second when only the second names it."""
        by_unit: dict[str, dict[int, int]] = defaultdict(dict)
        for i in range(self.n):
            by_unit[self.unit[i]][self.line[i]] = i
        for i in range(self.n):
            msg = self.message[i] or ""
            if self.out_rank[i] is not None or not msg.startswith("terminate called after throwing"):
                continue
            j = by_unit[self.unit[i]].get(self.line[i] + 1)
            if (
                j is None
                or self.out_rank[j] is None
                or not (self.message[j] or "").lstrip().startswith("what():")
            ):
                continue
            if (self.hk[i], self.srun[i], self.llocal[i]) != (self.hk[j], self.srun[j], self.llocal[j]):
                continue  # another node's or task's output interleaved between them
            self.out_rank[i] = self.out_rank[j]
            self.out_host[i] = self.out_host[i] or self.out_host[j]
            self.out_attr[i] = (
                f"the what() line right after it (line {self.line[j]}) is rank {self.out_rank[j]}: "
                "libstdc++ prints both from one process"
            )

    def _own_rank(
        self, i: int, key: tuple[str | None, int] | None, host_key: str | None, only_default: bool
    ) -> tuple[int | None, str, list[str]]:
        """The rank of the process that wrote row i, by the evidence order of the module docstring."""
        unit = self.unit[i]
        conflicts: list[str] = []
        pr = self._proc_lookup(key) if key is not None else None
        lrank, direct_how = self._line_rank(i)
        if lrank is not None:
            if pr is not None and pr[0] != lrank:
                conflicts.append(f"{pr[1]} says rank {pr[0]}")
            elif pr is not None:
                conflicts.extend(pr[2])
            return lrank, direct_how, conflicts
        if key is not None and key in self.multi_dev:
            dev = self.ndev[i]
            if dev is not None and dev in self.multi_dev[key]:
                r, text = self.multi_dev[key][dev]
                return r, text, conflicts
            return None, "", conflicts
        app = self.lrank[i]  # only the application prefix is left
        if pr is not None:
            why = pr[1] if self.key[i] is not None else f"{pr[1]} (one process's output: {unit})"
            conflicts.extend(pr[2])
            if app is not None and app != pr[0]:
                conflicts.append(f"application prefix says rank {app}")
            return pr[0], why, conflicts
        if app is not None:
            return app, self._direct_text(i), conflicts
        if unit in self.file_rank:
            return self.file_rank[unit][0], self.file_rank[unit][1], conflicts
        rank, why = self._via_local(i)
        if rank is not None:
            return rank, why, conflicts
        t = self.srun[i]
        if t is not None and self.tasks_are in ("ranks", "processes"):
            if t in self.task_rank:
                r = self.task_rank[t]
                return r, f"srun task {t} (one task per rank; its other lines are rank {r})", conflicts
            if self.tasks_are == "ranks":
                return t, f"srun task {t} (one task per rank)", conflicts
        pgr = self.pgrank[i]
        if pgr is not None and self.pg[i] is None and only_default:
            why = f"WorkNCCL [Rank {pgr}], taken as the default group: no other process group is seen"
            return pgr, why, conflicts
        if (
            key is None  # a pid of its own that no evidence names is another process
            and host_key is not None
            and len(self.host_rank.get(host_key, ())) == 1
            and not self._not_a_worker(i)
        ):
            r = next(iter(self.host_rank[host_key]))
            return r, f"the only rank seen on {self._disp(host_key)} is {r}", conflicts
        return None, "", conflicts

    def _not_a_worker(self, i: int) -> bool:
        """Kernel, Ray system and launcher lines: written on a host, but by no rank."""
        lay = set(self.layers[i])
        if lay & {"syslog", "dmesg"}:
            return True
        if "ray" in lay and self.lpid[i] is None:
            return True
        src_loc = self.src[i] or ""
        logger = self.logger[i] or ""
        return (
            any(s in src_loc for s in _LAUNCHER_SRC)
            or logger.startswith(_LAUNCHER_LOGGERS)
            or ("deepspeed" in lay and src_loc.startswith("launch.py"))
        )

    def _via_local(self, i: int) -> tuple[int | None, str]:
        lr = self.llocal[i]
        how = f"torchrun tee [{lr}]:" if lr is not None else ""
        if lr is None:
            lr = self.file_local.get(self.unit[i])
            how = f"torchrun log dir (local rank {lr})" if lr is not None else ""
        if lr is None and i in self.spawn_block:
            lr, header = self.spawn_block[i]
            how = (
                f"mp.spawn re-raises the error of process {lr} (line {header}: -- Process {lr} terminated …):"
            )
        if lr is None:
            return None, ""
        node = self._node(i)
        if node is not None:
            c = self.node_local.get((node, lr))
            if c:
                r = c.most_common(1)[0][0]
                text = self.node_local_text.get((node, lr, r), "")
                return r, f"{how} local rank {lr} on {self._node_disp(node)} is rank {r} ({text})"
        if self.single_node:
            return lr, f"{how} local rank {lr} = global rank (single-node job)"
        return None, ""

    def _spawn_blocks(self) -> None:
        """Rows of the traceback that torch.multiprocessing.spawn re-raises after
        `-- Process N terminated with the following error:` belong to process N (a local rank)."""
        self.spawn_block: dict[int, tuple[int, int]] = {}
        by_src: dict[str, list[int]] = defaultdict(list)
        for i in range(self.n):
            by_src[self.source[i]].append(i)
        for idx in by_src.values():
            if not any("terminated with the following error" in (self.message[i] or "") for i in idx):
                continue
            idx.sort(key=lambda j: self.line[j])
            open_block: tuple[int, int] | None = None
            for i in idx:
                msg = self.message[i] or ""
                m = _SPAWN_BLOCK.match(msg)
                if m and len(m.group("n")) < 10:
                    open_block = (int(m.group("n")), self.line[i])
                    continue
                if open_block is None:
                    continue
                if self.line[i] - open_block[1] > 400 or self.layers[i]:
                    open_block = None
                    continue
                if not msg or msg.startswith(("Traceback", " ")):
                    self.spawn_block[i] = open_block
                elif _EXC_LINE.match(msg):
                    self.spawn_block[i] = open_block
                    open_block = None
                else:
                    open_block = None

    def _rank_host_key(self, rank: int) -> str | None:
        hosts = {k[0] for k, (r, _t, _c) in self.proc_rank.items() if r == rank and k[0] is not None}
        hosts |= set(self.rank_host_facts.get(rank, ()))
        return next(iter(hosts)) if len(hosts) == 1 else None

    def _only_default_group(self) -> bool:
        for i in range(self.n):
            if self.pg[i] is not None and self.pg[i] != "0" and self.pgdesc[i] != "default_pg":
                return False
        sizes = {x for x in self.nranks if x is not None}
        return len(sizes) <= 1

    def _target(self, i: int, host_key: str | None) -> tuple[int, str] | None:
        """The rank a line talks about: its target_rank, or target_pid / target_local_rank mapped."""
        if self.t_rank[i] is not None:
            return self.t_rank[i], f"rank {self.t_rank[i]}"
        p = self.t_pid[i]
        if p is not None:
            h = self._host_of(self.t_host[i]) if self.t_host[i] else host_key
            pr = self._proc_lookup((h, p))
            if pr is None and h is not None:
                pr = self._proc_lookup((None, p))
            if pr is not None:
                return pr[0], f"target pid {p} is rank {pr[0]} ({pr[1]})"
        lr = self.t_local[i]
        if lr is not None and host_key is not None and self.signal[i] != "init":
            c = self.node_local.get((host_key, lr))
            if c:
                r = c.most_common(1)[0][0]
                text = self.node_local_text.get((host_key, lr, r), "")
                return r, f"target local rank {lr} on {self._disp(host_key)} is rank {r} ({text})"
        return None

    def _reason(self, i: int, key: tuple[str | None, int] | None) -> str:
        lay = set(self.layers[i])
        if self.pgrank[i] is not None:
            if self.pg[i] is not None:
                return (
                    f"no global rank: [PG {self.pg[i]} Rank {self.pgrank[i]}] is a rank inside process group "
                    f"{self.pg[i]}"
                )
            return f"no global rank: [Rank {self.pgrank[i]}] is a process-group rank and other groups exist"
        if lay & {"syslog", "dmesg"}:
            return "no rank evidence: kernel/system log line (host level)"
        if "ray" in lay and self.lpid[i] is None:
            return "no rank evidence: Ray system line (raylet/autoscaler) without a worker pid"
        if self._not_a_worker(i):
            where = self.src[i] or self.logger[i] or "launcher"
            return f"no rank evidence: launcher line ({where}) from the parent process, not a worker"
        if key is not None and key in self.multi_dev:
            ranks = sorted(r for r, _t in self.multi_dev[key].values())
            return (
                f"no rank evidence: pid {key[1]} drives several GPUs (ranks {', '.join(map(str, ranks))}) "
                "and the line names no device"
            )
        if key is not None:
            return (
                f"no rank evidence: pid {key[1]} on {self._disp(key[0]) or 'an unknown host'} appears in no NCCL "
                "comm init or rank-prefixed line"
            )
        if self.llocal[i] is not None or self.unit[i] in self.file_local:
            lr = self.llocal[i] if self.llocal[i] is not None else self.file_local[self.unit[i]]
            node = self._node(i)
            return (
                f"no rank evidence: torchrun local rank {lr} on {self._node_disp(node) if node else 'an unknown node'}, "
                "and no local-to-global map (multi-node job)"
            )
        if self.srun[i] is not None:
            if self.tasks_are == "nodes":
                return f"no rank evidence: srun task {self.srun[i]} runs several ranks (tasks are nodes)"
            return f"no rank evidence: srun task {self.srun[i]}, unknown whether tasks are ranks or nodes"
        if self.file_multi.get(self.unit[i]):
            return "no rank evidence: driver line without worker prefix in a file that mixes several ranks"
        return "no rank evidence: the line has no worker prefix, and its file says nothing about the rank"

    # ---- time ----------------------------------------------------------------------------------
    def _times(self) -> None:
        n = self.n
        self.out_time: list[datetime | None] = list(self.time)
        unknown = [i for i in range(n) if self.time[i] is not None and self.year_known[i] is False]
        if not unknown:
            return
        known = [i for i in range(n) if self.time[i] is not None and self.year_known[i] is not False]
        by_src: dict[str, list[datetime]] = defaultdict(list)
        by_host: dict[str, list[datetime]] = defaultdict(list)
        for i in known:
            by_src[self.source[i]].append(self.time[i])
            h = self.out_host[i]
            if h:
                by_host[h].append(self.time[i])
        # one reference time (the median) per file, per host and for the data set
        src_ref = {k: _median(v) for k, v in by_src.items()}
        host_ref = {k: _median(v) for k, v in by_host.items()}
        all_ref = _median([self.time[i] for i in known]) if known else None
        missing = from_mtime = 0
        for i in unknown:
            t: datetime = self.time[i]
            ref = src_ref.get(self.source[i])
            y: int | None = None
            if ref is not None:
                y = _nearest_year(t, ref)
            elif self.f_year[i] is not None:
                y = self.f_year[i]
            elif (oh := self.out_host[i]) and oh in host_ref:
                y = _nearest_year(t, host_ref[oh])
            elif all_ref is not None:
                y = _nearest_year(t, all_ref)
            elif (mtime := self.file_mtimes.get(self.source[i])) is not None:
                # A log is written before its file's last modification: the nearest year to it.
                y = _nearest_year(t, mtime)
                from_mtime += 1
            new = _with_year(t, y) if y is not None else None
            if y is None:  # keep the placeholder year: month, day and time still order the lines
                missing += 1
                new = t
            self.out_time[i] = new
        if from_mtime:
            self.notes.append(
                f"{from_mtime} timestamp(s) without a year (c10/glog MMDD or syslog form) took it from their "
                "file's modification time: no line, path or host of the data set gives the year"
            )
        if missing:
            self.notes.append(
                f"{missing} timestamp(s) without a year (c10/glog MMDD or syslog form) are shown without one: "
                "no line of the same file, host or data set and no date in a path gives the year"
            )

    # ---- output --------------------------------------------------------------------------------
    def _output(self) -> tuple[pl.DataFrame, Topology]:
        cols = [
            pl.Series("rank", self.out_rank, pl.Int64),
            pl.Series("local_rank", self.out_local, pl.Int64),
            pl.Series("host", self.out_host, pl.String),
            pl.Series("pid", self.out_pid, pl.Int64),
            pl.Series("time", self.out_time, self.ev.schema.get("time", pl.Datetime("us"))),
            pl.Series("attribution", self.out_attr, pl.String),
        ]
        if "target_rank" in self.ev.columns:
            cols.append(pl.Series("target_rank", self.out_trank, self.ev.schema["target_rank"]))
        out = self.ev.with_columns(cols)
        out = out.drop([c for c in out.columns if c.startswith("_")])
        return out, self._topology()

    def _topology(self) -> Topology:
        pid_rank: dict[tuple[str | None, int], int] = {}
        for (h, p), (r, _t, _c) in sorted(self.proc_rank.items(), key=lambda kv: (kv[0][0] or "", kv[0][1])):
            pid_rank[(self._disp(h), p)] = r
        host_ranks: dict[str, set[int]] = defaultdict(set)
        rank_hosts: dict[int, Counter[str]] = defaultdict(Counter)
        for rr, hh in zip(self.out_rank, self.out_host, strict=True):
            if rr is not None and hh is not None:
                host_ranks[hh].add(rr)
                rank_hosts[rr][hh] += 1
        rank_host: dict[int, str] = {}
        for r, c in sorted(rank_hosts.items()):
            if len(c) > 1:
                self.notes.append(f"rank {r} appears on several hosts ({', '.join(sorted(c))})")
            rank_host[r] = c.most_common(1)[0][0]
        # A rank with no line of its own still has a host when the launcher said where it ran
        # (DeepSpeed's global_rank_mapping, torchrun's failure summary).
        for r, facts in sorted(self.rank_host_facts.items()):
            shown = self._disp(facts.most_common(1)[0][0]) if facts else None
            if r not in rank_host and shown is not None:
                rank_host[r] = shown
                host_ranks[shown].add(r)
        ranks = {r for r in self.out_rank if r is not None}
        ws_dis = list(self.ws_disagree)
        # Several worlds of different sizes (an RL trainer and its weight-sync group, vLLM's own
        # world, tensor-parallel subgroups): the job is the largest; every rank seen lies inside it.
        printed = [w for w in self.f_world if w is not None and w > 0]
        world = max([self.world or 0, *printed]) or None
        if world is not None and self.world is not None and world != self.world:
            ws_dis = [d for d in ws_dis if not d.startswith(f"world_size {world} printed")]
            ws_dis.append(
                f"the largest NCCL communicator has {self.world} ranks, but a world of {world} is printed"
            )
        if world is not None and ranks and max(ranks) >= world:
            ws_dis.append(f"rank {max(ranks)} is seen, beyond the world size {world}")
            world = max(ranks) + 1
        elif world is None and ranks:
            self.ws_evidence.append(
                f"no world size printed; ranks up to {max(ranks)} are seen (a lower bound)"
            )
        return Topology(
            world_size=world,
            world_size_evidence=tuple(self.ws_evidence),
            world_size_disagreements=tuple(ws_dis),
            pid_rank=pid_rank,
            host_ranks={h: tuple(sorted(rs)) for h, rs in sorted(host_ranks.items())},
            rank_host=rank_host,
            ip_host={ip: self._disp(h) or h for ip, h in sorted(self.ip_host.items())},
            rank_local_rank=dict(sorted(self.rank_local.items())),
            notes=tuple(dict.fromkeys(self.notes)),
        )


def _with_year(t: datetime, year: int) -> datetime | None:
    try:
        return t.replace(year=year)
    except ValueError:  # 29 February in a non-leap year
        return None


def _median(values: list[datetime]) -> datetime:
    return sorted(values)[len(values) // 2]


def _nearest_year(t: datetime, ref: datetime) -> int | None:
    """The year that puts ``t`` (a placeholder-year time) nearest the reference time."""
    best: tuple[float, int] | None = None
    for y in (ref.year - 1, ref.year, ref.year + 1):
        cand = _with_year(t, y)
        if cand is None:
            continue
        d = abs((cand - ref).total_seconds())
        if best is None or d < best[0]:
            best = (d, y)
    return best[1] if best else None


__all__ = ["INTERNAL_SCHEMA", "PLACEHOLDER_YEAR", "Topology", "internal_values", "resolve"]
