"""Pass 4, units: is a file (or a torchrun worker folder) one process's output, and whose.

Also the spawn blocks: the traceback torch.multiprocessing.spawn re-raises after
``-- Process N terminated with the following error:`` belongs to process N (a local rank).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

import regex

from nccllog.attribution.hosts import HostFacts
from nccllog.attribution.layers import LAUNCHER_LAYERS
from nccllog.attribution.processes import ProcessFacts
from nccllog.attribution.rows import ProcessKey, Rows

_SPAWN_BLOCK = regex.compile(r"-- Process (?P<n>[0-9]+) terminated with the following error:", regex.ASCII)
_EXC_LINE = regex.compile(
    r"(?:[A-Za-z_][A-Za-z0-9_]*\.)*[A-Za-z_][A-Za-z0-9_]*(?:Error|Exception|Interrupt)\b", regex.ASCII
)


@dataclass(frozen=True)
class UnitFacts:
    """Per unit (a file, or a torchrun worker folder): whose output it is."""

    rank: dict[str, tuple[int, str]]  # unit -> (rank, evidence), for one process's output
    process: dict[str, ProcessKey]  # unit -> its one process
    host: dict[str, str]  # unit -> its one host key
    mixed: dict[str, bool]  # unit -> shows several processes or ranks
    local_rank: dict[str, int]  # unit -> its local rank (torchrun log dir)
    spawn_block: dict[int, tuple[int, int]]  # row -> (process number, header line)
    notes: tuple[str, ...]


@dataclass
class _Maps:
    """The per-unit maps of ``UnitFacts`` while they are being filled."""

    rank: dict[str, tuple[int, str]] = field(default_factory=dict)
    process: dict[str, ProcessKey] = field(default_factory=dict)
    host: dict[str, str] = field(default_factory=dict)
    mixed: dict[str, bool] = field(default_factory=dict)
    local_rank: dict[str, int] = field(default_factory=dict)


def resolve_units(rows: Rows, hosts: HostFacts, procs: ProcessFacts) -> UnitFacts:
    """Per unit: is it one process's output, and whose; plus mp.spawn's re-raised blocks."""
    by_unit: dict[str, list[int]] = defaultdict(list)
    for i in range(rows.n):
        by_unit[rows.unit[i]].append(i)
    acc = _Maps()
    notes: list[str] = []
    for unit, idx in by_unit.items():
        _unit(rows, hosts, procs, unit, idx, acc, notes)
    return UnitFacts(
        acc.rank, acc.process, acc.host, acc.mixed, acc.local_rank, _spawn_blocks(rows), tuple(notes)
    )


def _unit(
    rows: Rows, hosts: HostFacts, procs: ProcessFacts, unit: str, idx: list[int], acc: _Maps, notes: list[str]
) -> None:
    """Whose output one unit is: fills ``acc``'s maps (its notes go to ``notes``)."""
    i0 = idx[0]
    keys = {hosts.row_process[i] for i in idx if hosts.row_process[i] is not None and rows.pid[i] is not None}
    direct: Counter[int] = Counter()
    how: dict[int, str] = {}
    for i in idx:
        r, text = rows.line_rank(i)
        if r is not None:
            direct[r] += 1
            how.setdefault(r, text)
    seen_hosts: set[str] = {h for h in (hosts.row_host[i] for i in idx) if h is not None}
    if len(seen_hosts) == 1:
        acc.host[unit] = next(iter(seen_hosts))
    launcher_layers = any(LAUNCHER_LAYERS.intersection(rows.layers[i]) for i in idx)
    single = bool(rows.file_single[i0]) or (len(keys) == 1 and len(direct) <= 1 and not launcher_layers)
    if len(keys) > 1 or len(direct) > 1:
        single = False
    any_ranks = {rows.rank[i] for i in idx if rows.rank[i] is not None}
    acc.mixed[unit] = len(keys) > 1 or len(any_ranks | set(direct)) > 1
    if not single:
        if rows.file_rank[i0] is not None and set(direct) - {rows.file_rank[i0]}:
            notes.append(
                f"{unit}: the file name suggests rank {rows.file_rank[i0]} but its lines show rank(s) "
                f"{', '.join(map(str, sorted(direct)))}; the name is not used as a rank"
            )
        return
    if rows.file_local[i0] is not None:
        acc.local_rank[unit] = rows.file_local[i0]
    key: ProcessKey | None = next(iter(keys)) if keys else None
    if key is None and rows.file_pid[i0] is not None:
        key = (hosts.host_of(rows.file_host[i0]), rows.file_pid[i0])
    if key is not None:
        acc.process[unit] = key
    _unit_rank(rows, procs, unit, i0, key, direct, how, acc, notes)


def _unit_rank(
    rows: Rows,
    procs: ProcessFacts,
    unit: str,
    i0: int,
    key: ProcessKey | None,
    direct: Counter[int],
    how: dict[int, str],
    acc: _Maps,
    notes: list[str],
) -> None:
    """A one-process unit's rank: its lines' own rank, else its process's, else its file name's."""
    cands: list[tuple[int, str]] = []
    if direct:
        r = direct.most_common(1)[0][0]
        cands.append((r, f"one process's output ({unit}): its other lines say rank {r} ({how[r]})"))
    if key is not None:
        pr = procs.lookup(key)
        if pr is not None:
            cands.append((pr[0], pr[1]))
    if rows.file_rank[i0] is not None:
        cands.append((rows.file_rank[i0], f"file name ({rows.file_evidence[i0]})"))
    if cands:
        acc.rank[unit] = cands[0]
        for r, text in cands[1:]:
            if r != cands[0][0]:
                notes.append(f"{unit}: {cands[0][1]} (rank {cands[0][0]}), but {text} says rank {r}")


def _spawn_blocks(rows: Rows) -> dict[int, tuple[int, int]]:
    """Rows of the traceback that torch.multiprocessing.spawn re-raises after
    `-- Process N terminated with the following error:` belong to process N (a local rank)."""
    spawn_block: dict[int, tuple[int, int]] = {}
    by_src: dict[str, list[int]] = defaultdict(list)
    for i in range(rows.n):
        by_src[rows.source[i]].append(i)
    for idx in by_src.values():
        if not any("terminated with the following error" in (rows.message[i] or "") for i in idx):
            continue
        idx.sort(key=lambda j: rows.line[j])
        open_block: tuple[int, int] | None = None
        for i in idx:
            msg = rows.message[i] or ""
            m = _SPAWN_BLOCK.match(msg)
            if m and len(m.group("n")) < 10:
                open_block = (int(m.group("n")), rows.line[i])
                continue
            if open_block is None:
                continue
            if rows.line[i] - open_block[1] > 400 or rows.layers[i]:
                open_block = None
                continue
            if not msg or msg.startswith(("Traceback", " ")):
                spawn_block[i] = open_block
            elif _EXC_LINE.match(msg):
                spawn_block[i] = open_block
                open_block = None
            else:
                open_block = None
    return spawn_block
