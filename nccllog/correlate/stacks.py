"""Stack dumps of a hung job (py-spy, faulthandler): which process is somewhere else.

When a job hangs, people dump the Python stacks of its processes (``py-spy dump --pid``, or
faulthandler on a signal) and post them. In a hang on one collective, every healthy rank's stack
ends in that collective (``all_reduce``, ``barrier``, ``wait`` under ``torch/distributed``), and the
rank they wait for is elsewhere: in its data loader, saving a checkpoint, in a different collective.
This module rebuilds each dumped process from the pattern rows (process header, thread headers,
frames, in line order within their file), names its rank where the logs allow, and proposes the
minority that is not where the others are. What counts as "in a collective" is data
(``stacks.toml``).
"""

from __future__ import annotations

import tomllib
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import polars as pl
import regex

from nccllog.correlate import wording as w
from nccllog.correlate.rules.base import Context, Draft, evidence

PROCESS = "pyspy.process"
THREADS = ("pyspy.thread", "python.faulthandler_thread")
FRAMES = ("pyspy.frame", "python.faulthandler_frame")
LOCAL_RANK = regex.compile(r"--local[_-]rank[= ](\d{1,5})\b|\bLOCAL_RANK=(\d{1,5})\b")


@dataclass(frozen=True)
class Vocabulary:
    """What ``stacks.toml`` says."""

    functions: frozenset[str]
    files: tuple[str, ...]
    generic: frozenset[str]
    max_gap_lines: int
    score: float
    score_all_dumped: float
    score_other_collective: float


@cache
def vocabulary() -> Vocabulary:
    """The collective vocabulary and scores, read once."""
    raw = tomllib.loads(resources.files("nccllog.correlate").joinpath("stacks.toml").read_text("utf-8"))
    return Vocabulary(
        functions=frozenset(raw["functions"]),
        files=tuple(raw["files"]),
        generic=frozenset(raw["generic"]),
        max_gap_lines=int(raw["max_gap_lines"]),
        score=float(raw["score"]),
        score_all_dumped=float(raw["score_all_dumped"]),
        score_other_collective=float(raw["score_other_collective"]),
    )


@dataclass
class Thread:
    """One thread of a dump: its header row and its frames, innermost first."""

    header: dict[str, Any]
    frames: list[dict[str, Any]] = field(default_factory=list)

    @property
    def main(self) -> bool:
        """The thread that runs the training loop (or the one faulthandler was signalled in)."""
        return (
            self.header.get("thread_name") == "MainThread"
            or self.header.get("thread_state") == "Current thread"
        )

    def collective(self, vocab: Vocabulary) -> dict[str, Any] | None:
        """The frame that calls the collective this thread waits in (a bare ``wait`` or
        ``synchronize`` only when no collective is named), if any."""
        found = [
            f
            for f in self.frames
            if str(f.get("frame_func") or "") in vocab.functions
            and any(p in str(f.get("frame_file") or "") for p in vocab.files)
        ]
        named = [f for f in found if str(f.get("frame_func")) not in vocab.generic]
        return (named or found)[0] if found else None


@dataclass
class Process:
    """One dumped process."""

    source: str
    header: dict[str, Any] | None
    threads: list[Thread] = field(default_factory=list)
    rank: int | None = None
    last_line: int = 0

    def main_thread(self) -> Thread | None:
        """The main thread, else the first one with frames."""
        with_frames = [t for t in self.threads if t.frames]
        return next((t for t in with_frames if t.main), with_frames[0] if with_frames else None)

    def waiting_in(self, vocab: Vocabulary) -> dict[str, Any] | None:
        """The collective frame this process waits in (any thread), or None."""
        return next((f for t in self.threads if (f := t.collective(vocab)) is not None), None)

    def rows(self) -> list[dict[str, Any]]:
        """Every row of the dump."""
        out = [self.header] if self.header else []
        for t in self.threads:
            out.extend([t.header, *t.frames])
        return out


def processes(ev: pl.DataFrame, vocab: Vocabulary) -> list[Process]:
    """The dumped processes, rebuilt from the rows in line order within each file."""
    if "frame_func" not in ev.columns:
        return []
    rows = ev.filter(pl.col("pattern").is_in([PROCESS, *THREADS, *FRAMES])).sort("source", "line")
    out: list[Process] = []
    current: dict[tuple[str, int | None], Process] = {}
    for r in rows.to_dicts():
        src, line, pat = str(r["source"]), int(r["line"] or 0), r["pattern"]
        key = (src, r.get("rank"))
        proc = current.get(key)
        if proc is not None and line - proc.last_line > vocab.max_gap_lines:
            del current[key]
            proc = None
        if pat == PROCESS:
            proc = Process(src, r, last_line=line)
            out.append(proc)
            current[key] = proc
        elif pat in THREADS:
            if proc is None or (proc.header is None and _starts_another(proc, r)):
                proc = Process(src, None, last_line=line)
                out.append(proc)
                current[key] = proc
            proc.threads.append(Thread(r))
            proc.last_line = line
        elif proc is not None and proc.threads:
            proc.threads[-1].frames.append(r)
            proc.last_line = line
    return [p for p in out if p.threads]


def _starts_another(proc: Process, thread: dict[str, Any]) -> bool:
    """Without a process header (faulthandler, a pasted excerpt), a thread seen twice or a second
    signalled thread begins the next process's dump."""
    seen = {t.header.get("thread_id") for t in proc.threads}
    current = any(t.header.get("thread_state") == "Current thread" for t in proc.threads)
    return thread.get("thread_id") in seen or (current and thread.get("thread_state") == "Current thread")


def _rank_of(ctx: Context, p: Process) -> int | None:
    """The global rank of a dump: its lines' rank, the pid of a known rank, or the local rank in its
    command line on a one-host job."""
    ranks = Counter(int(r["rank"]) for r in p.rows() if r.get("rank") is not None)
    if ranks:
        return ranks.most_common(1)[0][0]
    pid = p.header.get("dump_pid") if p.header else None
    host = p.header.get("host") if p.header else None
    if pid is not None:
        owners = [
            s.rank for s in ctx.states.values() if pid in s.pids and (host is None or s.host in (None, host))
        ]
        if len(owners) == 1:
            return owners[0]
    cmd = str(p.header.get("cmdline") or "") if p.header else ""
    m = LOCAL_RANK.search(cmd)
    hosts = {s.host for s in ctx.states.values() if s.host}
    if m and len(hosts) <= 1:
        return int(m.group(1) or m.group(2))
    return None


def _site(f: dict[str, Any] | None) -> str:
    if not f:
        return "code of its own (no frame in torch.distributed, data loading or autograd)"
    where = (
        f"{f.get('frame_file')}:{f['frame_line']}" if f.get("frame_line") is not None else f.get("frame_file")
    )
    return f"`{f.get('frame_func')}` ({where})"


def _who(p: Process) -> str:
    if p.rank is not None:
        return w.ranks_phrase([p.rank])
    pid = p.header.get("dump_pid") if p.header else None
    return f"process {pid}" if pid is not None else f"the process dumped in {p.source}"


def rule(ctx: Context) -> list[Draft]:
    """The minority of dumped processes that is not where the others are, when there is one."""
    vocab = vocabulary()
    procs = processes(ctx.ev, vocab)
    if len(procs) < 2:
        return []
    for p in procs:
        p.rank = _rank_of(ctx, p)
    where = [(p, p.waiting_in(vocab)) for p in procs]
    waiting = [(p, f) for p, f in where if f is not None]
    elsewhere = [p for p, f in where if f is None]
    if waiting and elsewhere and len(elsewhere) < len(waiting):
        return [_elsewhere(ctx, vocab, elsewhere, waiting)]
    if waiting and not elsewhere:
        return _other_collective(ctx, vocab, waiting)
    return []


def _all_dumped(ctx: Context, procs: list[Process]) -> bool:
    ranks = {p.rank for p in procs}
    return ctx.world_known and bool(ctx.world) and ranks >= set(ctx.world)


def _elsewhere(
    ctx: Context, vocab: Vocabulary, elsewhere: list[Process], waiting: list[tuple[Process, dict[str, Any]]]
) -> Draft:
    culprits = tuple(sorted({p.rank for p in elsewhere if p.rank is not None}))
    named = len(culprits) == len(elsewhere)
    d = Draft(category="straggler_hang", culprits=culprits if named else (), kind="stacks")
    everyone = [p for p, _ in waiting] + elsewhere
    d.score = vocab.score_all_dumped if named and _all_dumped(ctx, everyone) else vocab.score
    if not named:
        d.score -= 0.15
    lead = elsewhere[0]
    main = lead.main_thread()
    top = main.frames[0] if main else None
    common = Counter(str(f.get("frame_func")) for _, f in waiting).most_common(1)[0][0]
    example = next(f for _, f in waiting if str(f.get("frame_func")) == common)
    waiters = [p for p, _ in waiting]
    others = (
        w.ranks_phrase([p.rank for p in waiters if p.rank is not None])
        if all(p.rank is not None for p in waiters)
        else w.plural(len(waiters), "other process")
    )
    who = ", ".join(_who(p) for p in elsewhere)
    d.summary = (
        f"The stack dumps show {who} in {_site(top)}, outside any collective, while {others} wait in "
        f"{_site(example)}: the others wait for {'it' if len(elsewhere) == 1 else 'them'}."
    )
    d.rules_in.append(
        f"{len(everyone)} processes' stacks were dumped; {len(waiting)} wait in a collective and "
        f"{len(elsewhere)} {'is' if len(elsewhere) == 1 else 'are'} elsewhere."
    )
    if not named:
        d.rules_out.append(
            "The dump outside the collective could not be tied to a rank (no rank prefix, pid or local rank)."
        )
    d.evidence = [evidence(r, "stack outside any collective") for r in _rows(lead, top)]
    d.evidence += [evidence(r, "waits in a collective") for r in _rows(waiting[0][0], waiting[0][1])]
    d.remediation.append(
        f"Look at what {who} was doing at {_site(top)}: a data loader, I/O, a checkpoint save or a "
        "rank-dependent branch that the other ranks do not run; make it finish (or run on every rank) "
        "before the next collective."
    )
    return d


def _other_collective(
    ctx: Context, vocab: Vocabulary, waiting: list[tuple[Process, dict[str, Any]]]
) -> list[Draft]:
    kinds = Counter(str(f.get("frame_func")) for _, f in waiting)
    if len(kinds) < 2:
        return []
    common, n = kinds.most_common(1)[0]
    odd = [(p, f) for p, f in waiting if str(f.get("frame_func")) != common]
    if len(odd) >= n:
        return []
    culprits = tuple(sorted({p.rank for p, _ in odd if p.rank is not None}))
    d = Draft(
        category="collective_mismatch", culprits=culprits if len(culprits) == len(odd) else (), kind="stacks"
    )
    d.score = vocab.score_other_collective
    example = next(f for _, f in waiting if str(f.get("frame_func")) == common)
    who = ", ".join(_who(p) for p, _ in odd)
    d.summary = (
        f"The stack dumps show {who} waiting in {_site(odd[0][1])} while {w.plural(n, 'other process')} "
        f"wait in {_site(example)}: they called different collectives."
    )
    d.rules_in.append(f"{len(waiting)} processes' stacks wait in collectives, not all the same one.")
    d.evidence = [evidence(r, "a different collective") for r in _rows(odd[0][0], odd[0][1])]
    d.evidence += [evidence(r, "the collective the others wait in") for r in _rows(waiting[0][0], example)]
    d.remediation.append(
        "Make every rank issue the same collectives in the same order: look for a rank-dependent branch "
        "around the call sites named above."
    )
    return [d]


def _rows(p: Process, frame: dict[str, Any] | None) -> list[dict[str, Any]]:
    head = [p.header] if p.header else []
    return head + ([frame] if frame else [])
