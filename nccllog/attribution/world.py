"""Pass 2, world size: the world communicator, its (host, pid) -> rank, and the printed sizes.

The world is the largest NCCL communicator (``comm … rank R nranks N``); a printed
``world_size`` or nodes × processes per node stands in when no init line is seen. NCCL
Trees/Ring/Channel lines give a process's rank when no init line does (only when no smaller
communicator is seen: these lines carry no comm id).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

import regex

from nccllog.attribution.hosts import HostFacts
from nccllog.attribution.rows import ProcessKey, Rows

# The writing process's own rank in NCCL topology lines: `Trees [0] a/b/c->R->up`,
# `Ring 00 : p -> R -> n`, `Channel 00/0 : R[x] -> p[y] [send] via …` (own rank on the right for
# `[receive]`; P2P/SHM lines are printed by the sender).
_OWN_RANK = regex.compile(
    r"Trees \[[0-9]+\] -?[0-9]+/-?[0-9]+/-?[0-9]+->(?P<tree>[0-9]+)->"
    r"|Ring [0-9]+ : -?[0-9]+ -> (?P<ring>[0-9]+) -> -?[0-9]+$"
    r"|Channel [0-9]+(?:/[0-9]+)? : (?P<a>[0-9]+)\[[^\]]*\] -> (?P<b>[0-9]+)\[[^\]]*\] ?(?P<dir>\[send\]|\[receive\])? ?via "
    r"|Duplicate GPU detected : rank (?P<dup>[0-9]+) and rank",
    regex.ASCII,
)


@dataclass(frozen=True)
class WorldFacts:
    """The world size and what the world communicator's init lines say about processes."""

    world: int | None  # from the largest communicator, else the most printed world_size
    evidence: tuple[str, ...]
    disagreements: tuple[str, ...]
    comm_facts: dict[ProcessKey, dict[int, str]]  # process -> {rank: evidence}
    local_facts: dict[ProcessKey, Counter[int]]  # process -> local ranks seen
    nnodes: Counter[int]  # NCCL nNodes values on world init lines
    multi_dev: dict[ProcessKey, dict[int, tuple[int, str]]]  # process -> {device: (rank, evidence)}
    ring_facts: dict[ProcessKey, Counter[int]]  # process no init line names -> own ranks in ring/tree lines
    printed: list[int | None]  # each row's printed world size (or nodes × nproc_per_node)


def resolve_world(rows: Rows, hosts: HostFacts) -> WorldFacts:
    """World size and the world communicator's (host, pid) -> rank."""
    sizes = Counter(x for i, x in enumerate(rows.nranks) if x is not None and rows.comm_rank[i] is not None)
    world: int | None = max(sizes) if sizes else None
    evidence: list[str] = []
    disagree: list[str] = []
    if world is not None:
        others = sorted(s for s in sizes if s != world)
        evidence.append(
            f"NCCL comm init: largest communicator has {world} ranks"
            + (f" (smaller communicators: {', '.join(map(str, others))})" if others else "")
        )
    comm_facts, local_facts, nnodes, multi_dev = _world_init(rows, hosts, world)
    ring_facts = _ring_ranks(rows, hosts, sizes, multi_dev, comm_facts)
    for i in range(rows.n):
        if rows.target_pid[i] is not None and rows.target_local[i] is not None and rows.signal[i] != "init":
            h = hosts.host_of(rows.target_host[i]) if rows.target_host[i] else hosts.row_host[i]
            local_facts[(h, rows.target_pid[i])][rows.target_local[i]] += 1
    # nodes x processes per node (torchrun command line, verl trainer config) is a world size too
    printed = list(rows.world_size)
    for i in range(rows.n):
        nproc, nn = rows.nproc_per_node[i], rows.nnodes[i]
        if nproc is not None and printed[i] is None and nproc < 2**20:
            nodes = nn if nn is not None and nn < 2**20 else 1
            printed[i] = nodes * nproc
    wf = Counter(x for x in printed if x is not None and x > 0)
    for w, cnt in sorted(wf.items()):
        evidence.append(f"world_size {w} printed on {cnt} line(s)")
    if world is None and wf:
        world = sorted(wf.items(), key=lambda kv: (-kv[1], -kv[0]))[0][0]
    elif world is not None:
        for w in sorted(wf):
            if w != world:
                disagree.append(
                    f"world_size {w} printed, but the largest NCCL communicator has {world} ranks"
                )
    return WorldFacts(
        world,
        tuple(evidence),
        tuple(disagree),
        comm_facts,
        local_facts,
        nnodes,
        multi_dev,
        ring_facts,
        printed,
    )


def _world_init(
    rows: Rows, hosts: HostFacts, world: int | None
) -> tuple[
    dict[ProcessKey, dict[int, str]],
    dict[ProcessKey, Counter[int]],
    Counter[int],
    dict[ProcessKey, dict[int, tuple[int, str]]],
]:
    """What the world communicator's init lines say: rank, local rank and device per process."""
    comm_facts: dict[ProcessKey, dict[int, str]] = defaultdict(dict)
    local_facts: dict[ProcessKey, Counter[int]] = defaultdict(Counter)
    nnodes: Counter[int] = Counter()
    dev_facts: dict[ProcessKey, dict[int, set[int]]] = defaultdict(lambda: defaultdict(set))
    multi_dev: dict[ProcessKey, dict[int, tuple[int, str]]] = {}
    for i in range(rows.n):
        if rows.nranks[i] != world or world is None or rows.comm_rank[i] is None:
            continue
        k = hosts.row_process[i]
        if rows.nnodes[i] is not None:
            nnodes[rows.nnodes[i]] += 1
        if k is None:
            continue
        r = rows.comm_rank[i]
        if r < 0 or r >= world:
            continue
        host = hosts.show(k[0]) or "unknown host"
        comm_facts[k].setdefault(r, f"NCCL comm init: pid {k[1]} on {host} is rank {r} of {world}")
        dev = rows.cuda_dev[i] if rows.cuda_dev[i] is not None else rows.nccl_dev[i]
        if dev is not None:
            dev_facts[k][dev].add(r)
        if rows.target_local[i] is not None:
            local_facts[k][rows.target_local[i]] += 1
    # one process driving several GPUs (ncclCommInitAll, nccl-tests -g N): rank per device
    for k, ranks in list(comm_facts.items()):
        devs = dev_facts.get(k, {})
        if len(ranks) > 1 and devs and all(len(rs) == 1 for rs in devs.values()):
            host = hosts.show(k[0]) or "unknown host"
            multi_dev[k] = {
                d: (
                    next(iter(rs)),
                    f"NCCL comm init: pid {k[1]} on {host} drives several GPUs; device [{d}] is rank "
                    f"{next(iter(rs))} of {world}",
                )
                for d, rs in devs.items()
            }
            del comm_facts[k]
    return comm_facts, local_facts, nnodes, multi_dev


def _ring_ranks(
    rows: Rows,
    hosts: HostFacts,
    sizes: Counter[int],
    multi_dev: dict[ProcessKey, dict[int, tuple[int, str]]],
    named: Mapping[ProcessKey, object],
) -> dict[ProcessKey, Counter[int]]:
    """Own comm rank from NCCL Trees/Ring/Channel lines, for the processes no init line names
    (``named``: the others' ring lines are not read, as nothing would use them)."""
    ring_facts: dict[ProcessKey, Counter[int]] = defaultdict(Counter)
    if len(sizes) > 1:
        return ring_facts
    for i in range(rows.n):
        k = hosts.row_process[i]
        if k is None or k in multi_dev or k in named:
            continue
        r: int | None = None
        if rows.comm_rank[i] is not None and rows.nranks[i] is None:
            r = rows.comm_rank[i]
        elif "nccl" in rows.layers[i] and rows.message[i]:
            m = _OWN_RANK.match(rows.message[i])
            if m:
                own = m.group("tree") or m.group("ring") or m.group("dup") or m.group("a")
                if m.group("dir") == "[receive]":
                    own = m.group("b")
                r = int(own) if own is not None and len(own) < 10 else None
        if r is not None:
            ring_facts[k][r] += 1
    return ring_facts
