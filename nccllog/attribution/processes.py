"""Pass 3, processes: (host, pid) -> rank from every line that names a process's rank.

Strongest kind first: the line's own rank prefix (and the default group's rank), the world
communicator's init line, the torchrun ChildFailedError block or any line naming a rank and its
pid together, NCCL ring/tree lines, the file name, the application prefix. Also the node-level
(node, local rank) -> rank facts of ChildFailedError blocks and DeepSpeed's global_rank_mapping.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import regex

from nccllog.attribution.hosts import DisplayNames, HostFacts
from nccllog.attribution.rows import APP_KINDS, ProcessKey, Rows, is_ip
from nccllog.attribution.world import WorldFacts

# Lines that name a process's rank and pid together (read when no pattern gave target fields):
# Ray Train's worker table and the nccl-tests device table.
_NAMED_PROC = regex.compile(
    r".*?\(ip=(?P<ip>[0-9A-Fa-f.:]+), pid=(?P<pid>[0-9]+)\) world_rank=(?P<rank>[0-9]+), local_rank=(?P<local>[0-9]+)"
    r"|#\s+Rank\s+(?P<rank2>[0-9]+)(?:\s+Group\s+[0-9]+)?\s+Pid\s+(?P<pid2>[0-9]+)\s+on\s+(?P<host2>\S+)\s+device\s",
    regex.ASCII,
)
# DeepSpeed's global_rank_mapping: `'host': [8, 9, …]` entries (the launcher's authoritative map).
_RANK_MAP_ENTRY = regex.compile(r"""['"](?P<host>[^'"]+)['"]\s*:\s*\[(?P<ranks>[0-9,\s]*)\]""", regex.ASCII)

# (rank, evidence, disagreeing evidence)
RankFact = tuple[int, str, list[str]]


class RankEvidence:
    """Rank facts about one process, with their evidence, strongest kind first."""

    ORDER = ("direct", "comm", "childfailed", "ring", "file", "app")

    def __init__(self) -> None:
        self.by_kind: dict[str, Counter[int]] = defaultdict(Counter)
        self.text: dict[tuple[str, int], str] = {}

    def add(self, kind: str, rank: int, text: str) -> None:
        """Record one line's word on the rank."""
        self.by_kind[kind][rank] += 1
        self.text.setdefault((kind, rank), text)

    def best(self) -> RankFact | None:
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


@dataclass(frozen=True)
class ProcessFacts:
    """Each process's rank, and what launchers say about (node, local rank) and rank -> host."""

    process_rank: dict[ProcessKey, RankFact]
    pid_only: dict[int, ProcessKey]  # a pid that one known process has, whatever its host
    node_local: dict[tuple[str, int], Counter[int]]  # (node, local rank) -> ranks
    node_local_text: dict[tuple[str, int, int], str]
    rank_host_facts: dict[int, Counter[str]]
    display: DisplayNames  # the hosts' display names, with the launchers' spellings added
    notes: tuple[str, ...]
    # every rank some line claims for a process: one process may drive several GPUs (nccl-tests -g)
    claimed: dict[ProcessKey, frozenset[int]] = field(default_factory=dict)

    def lookup(self, key: ProcessKey) -> RankFact | None:
        """A process's rank; a pid known on one host only also answers for its address or no host."""
        pr = self.process_rank.get(key)
        if pr is not None:
            return pr
        h, p = key
        other = self.pid_only.get(p)
        if other is not None and (h is None or other[0] is None or is_ip(h) or is_ip(other[0] or "")):
            return self.process_rank[other]
        return None


class _Collect:
    """The facts being gathered by this pass (local to ``resolve_processes``)."""

    def __init__(self, hosts: HostFacts) -> None:
        self.hosts = hosts
        self.display = hosts.display.copy()
        self.proc: dict[ProcessKey, RankEvidence] = defaultdict(RankEvidence)
        self.node_local: dict[tuple[str, int], Counter[int]] = defaultdict(Counter)
        self.node_local_text: dict[tuple[str, int, int], str] = {}
        self.rank_host_facts: dict[int, Counter[str]] = defaultdict(Counter)


def resolve_processes(rows: Rows, hosts: HostFacts, world: WorldFacts) -> ProcessFacts:
    """(host, pid) -> rank from direct prefixes, world comm init, ChildFailedError blocks, files."""
    acc = _Collect(hosts)
    proc = acc.proc
    for i in range(rows.n):
        k = hosts.row_process[i]
        if k is not None and rows.rank[i] is None and rows.pg_rank[i] is not None and rows.default_pg(i):
            # the default group's rank is the global rank (`what(): [PG 0 (default_pg) Rank 0]`)
            proc[k].add(
                "direct",
                rows.pg_rank[i],
                f"rank {rows.pg_rank[i]} in the default process group on a line of pid {k[1]}",
            )
        if k is None or rows.rank[i] is None:
            continue
        kind = rows.rank_kind[i] or "prefix"
        if kind in APP_KINDS:
            proc[k].add("app", rows.rank[i], f"{rows.direct_text(i)} of pid {k[1]}")
        else:
            proc[k].add("direct", rows.rank[i], rows.direct_text(i, k))
    for k, ranks in world.comm_facts.items():
        for r, text in ranks.items():
            proc[k].add("comm", r, text)
    for k, counts in world.ring_facts.items():
        if len(counts) == 1 and k not in world.comm_facts:
            r = next(iter(counts))
            proc[k].add(
                "ring",
                r,
                f"NCCL ring/tree lines: pid {k[1]} on {acc.display.show(k[0]) or 'unknown host'} is rank {r}",
            )
    _named_processes(rows, acc)
    _rank_maps(rows, acc)
    _child_failed(rows, acc)
    for i in range(rows.n):
        if (
            rows.file_rank[i] is not None
            and rows.file_pid[i] is not None
            and hosts.row_process[i] is not None
        ):
            k = (hosts.host_of(rows.file_host[i]), rows.file_pid[i])
            proc[k].add("file", rows.file_rank[i], f"file name ({rows.file_evidence[i]})")
    process_rank: dict[ProcessKey, RankFact] = {}
    notes: list[str] = []
    for k, facts in proc.items():
        b = facts.best()
        if b:
            process_rank[k] = b
            if b[2]:
                notes.append(
                    f"pid {k[1]} on {acc.display.show(k[0]) or 'unknown host'}: {b[1]}; disagreeing: {'; '.join(b[2])}"
                )
    by_pid: dict[int, set[ProcessKey]] = defaultdict(set)
    for k in process_rank:
        by_pid[k[1]].add(k)
    pid_only = {p: next(iter(ks)) for p, ks in by_pid.items() if len(ks) == 1}
    return ProcessFacts(
        process_rank,
        pid_only,
        acc.node_local,
        acc.node_local_text,
        acc.rank_host_facts,
        acc.display,
        tuple(notes),
        {k: frozenset(r for c in facts.by_kind.values() for r in c) for k, facts in proc.items()},
    )


def _named_processes(rows: Rows, acc: _Collect) -> None:
    """Any line naming a rank and its pid together (target_rank + target_pid, worker tables)."""
    for i in range(rows.n):
        r, p = rows.target_rank[i], rows.target_pid[i]
        h = acc.hosts.host_of(rows.target_host[i]) if rows.target_host[i] else acc.hosts.row_host[i]
        lr = rows.target_local[i]
        msg = rows.message[i]
        if (r is None or p is None) and msg and ("pid=" in msg or " Pid " in msg):
            m = _NAMED_PROC.match(msg)
            if m:
                r = int(m.group("rank") or m.group("rank2"))
                p = int(m.group("pid") or m.group("pid2"))
                h = acc.hosts.host_of(m.group("ip") or m.group("host2"))
                lr = int(m.group("local")) if m.group("local") else None
        if r is not None and p is not None and rows.signal[i] != "init" and r < 2**31 and p < 2**31:
            shown = f" on {acc.display.show(h)}" if h else ""
            text = f"{rows.source[i]}:{rows.line[i]} names pid {p}{shown} as rank {r}"
            acc.proc[(h, p)].add("childfailed", r, text)
            if lr is not None and h is not None:
                acc.node_local[(h, lr)][r] += 1
                acc.node_local_text.setdefault((h, lr, r), text)


def _rank_maps(rows: Rows, acc: _Collect) -> None:
    """DeepSpeed ``global_rank_mapping``: the i-th rank listed for a host is its local rank i."""
    for i in range(rows.n):
        text = rows.rank_map[i]
        if not text:
            continue
        for m in _RANK_MAP_ENTRY.finditer(text):
            h = acc.hosts.host_of(m.group("host"))
            if h is None:
                continue
            acc.display.learn(m.group("host"), False)
            ranks = [int(x) for x in m.group("ranks").replace(",", " ").split() if len(x) < 10]
            for lr, r in enumerate(ranks):
                acc.rank_host_facts[r][h] += 1
                acc.node_local[(h, lr)][r] += 1
                acc.node_local_text.setdefault(
                    (h, lr, r),
                    f"DeepSpeed global_rank_mapping: local rank {lr} on {acc.display.show(h)} is rank {r}",
                )


def _child_failed(rows: Rows, acc: _Collect) -> None:
    """torchrun ChildFailedError: `rank : R (local_rank: L)` + nearby `host :` and `exitcode … (pid: P)`."""
    picked = [
        i
        for i in range(rows.n)
        if rows.signal[i] == "root_cause" or rows.target_host[i] is not None or rows.target_pid[i] is not None
    ]
    by_src: dict[str, list[int]] = defaultdict(list)
    for i in picked:
        by_src[rows.source[i]].append(i)
    for idx in by_src.values():
        idx.sort(key=lambda j: rows.line[j])
        lines = [rows.line[j] for j in idx]
        for j in idx:
            if rows.signal[j] != "root_cause" or rows.target_rank[j] is None:
                continue
            r, lr = rows.target_rank[j], rows.target_local[j]
            host = pid = None
            lo = bisect_left(lines, rows.line[j] - 3)
            hi = bisect_right(lines, rows.line[j] + 3)
            for o in idx[lo:hi]:
                d = rows.line[o] - rows.line[j]
                if rows.target_host[o] is not None and -3 <= d < 0 and rows.signal[o] == "root_cause":
                    host = acc.hosts.host_of(rows.target_host[o])
                    acc.display.learn(rows.target_host[o], False)
                if rows.target_pid[o] is not None and 0 < d <= 3 and rows.signal[o] == "root_cause":
                    pid = rows.target_pid[o]
            hd = acc.display.show(host) or "unknown host"
            if host is not None:
                acc.rank_host_facts[r][host] += 1
                if lr is not None:
                    acc.node_local[(host, lr)][r] += 1
                    acc.node_local_text.setdefault(
                        (host, lr, r), f"torchrun ChildFailedError: rank {r} is local rank {lr} on {hd}"
                    )
            if pid is not None:
                acc.proc[(host, pid)].add(
                    "childfailed", r, f"torchrun ChildFailedError: pid {pid} on {hd} is rank {r}"
                )
