"""Pass 5, nodes: whether Slurm tasks are ranks or nodes, and the (node, local rank) -> rank map.

A task with several ranks, several pids, tee prefixes or launcher lines makes tasks nodes
(which then give host evidence); every task whose lines show exactly its own id as the rank
makes tasks ranks. Local ranks map to global ranks per node, from lines with both, NCCL
``localRank`` lines, launcher blocks, or local == global when the job has a single node.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from nccllog.attribution.hosts import HostFacts
from nccllog.attribution.processes import ProcessFacts
from nccllog.attribution.rows import Rows
from nccllog.attribution.units import UnitFacts
from nccllog.attribution.world import WorldFacts


@dataclass(frozen=True)
class NodeFacts:
    """Slurm tasks and the node-level local -> global rank map."""

    tasks_are: str | None  # "ranks", "processes", "nodes" or None (no tasks)
    task_rank: dict[int, int]
    task_host: dict[int, str]
    node_local: dict[tuple[str, int], Counter[int]]  # (node, local rank) -> ranks
    node_local_text: dict[tuple[str, int, int], str]
    single_node: bool
    rank_local: dict[int, int]  # rank -> its one local rank
    notes: tuple[str, ...]


def row_rank(rows: Rows, hosts: HostFacts, procs: ProcessFacts, i: int) -> int | None:
    """Row i's rank from the line itself or its process, if either says."""
    r, _how = rows.line_rank(i)
    if r is not None:
        return r
    k = hosts.row_process[i]
    if k is not None:
        pr = procs.lookup(k)
        if pr is not None:
            return pr[0]
    return None


def row_node(
    rows: Rows, hosts: HostFacts, units: UnitFacts, tasks_are: str | None, task_host: dict[int, str], i: int
) -> str | None:
    """Row i's node: its host, its srun task (when tasks are nodes), its unit's host, or its file."""
    if hosts.row_host[i] is not None:
        return hosts.row_host[i]
    unit = rows.unit[i]
    t = rows.srun[i]
    if t is not None and tasks_are == "nodes":
        return task_host.get(t, f"srun task {t}")
    if unit in units.host:
        return units.host[unit]
    return f"file {rows.source[i]}"


def node_shown(procs: ProcessFacts, node: str) -> str:
    """How a node is shown: a host's display name, or the task/file that stands for it."""
    return node if node.startswith(("srun task ", "file ")) else (procs.display.show(node) or node)


def resolve_nodes(
    rows: Rows, hosts: HostFacts, world: WorldFacts, procs: ProcessFacts, units: UnitFacts
) -> NodeFacts:
    """Slurm tasks: ranks or nodes; node-level local -> global maps."""
    tasks_are, task_rank, task_host, notes = _tasks(rows, hosts, procs, world.world)
    node_local: dict[tuple[str, int], Counter[int]] = defaultdict(Counter)
    for nk, c in procs.node_local.items():
        node_local[nk] = Counter(c)
    node_local_text = dict(procs.node_local_text)
    for k, (r, _text, _c) in procs.process_rank.items():
        for lr in world.local_facts.get(k, ()):
            if k[0] is not None:
                node_local[(k[0], lr)][r] += 1
                node_local_text.setdefault(
                    (k[0], lr, r),
                    f"NCCL localRank {lr} of pid {k[1]} on {procs.display.show(k[0])} (rank {r})",
                )
    for i in range(rows.n):
        if (
            rows.signal[i] == "root_cause"
            and rows.target_rank[i] is not None
            and rows.target_local[i] is not None
        ):
            # torchrun's failure summary (`rank : 1 (local_rank: 1)`) lists its own node's workers:
            # on that node's console, local rank L is global rank R.
            node = row_node(rows, hosts, units, tasks_are, task_host, i)
            if node is not None:
                tr, tl = rows.target_rank[i], rows.target_local[i]
                node_local[(node, tl)][tr] += 1
                node_local_text.setdefault(
                    (node, tl, tr),
                    f"torchrun's failure summary on {node_shown(procs, node)}: rank {tr} (local_rank: {tl})",
                )
        lr = rows.local_rank[i]
        if lr is None:
            continue
        rr = row_rank(rows, hosts, procs, i)
        node = row_node(rows, hosts, units, tasks_are, task_host, i)
        if rr is not None and node is not None:
            node_local[(node, lr)][rr] += 1
            node_local_text.setdefault(
                (node, lr, rr), f"lines with both [{lr}] tee and rank {rr} on {node_shown(procs, node)}"
            )
    # single node: NCCL says nNodes 1, or one node holds local rank world-1 (so all ranks)
    if world.nnodes:
        single_node = set(world.nnodes) == {1}
    else:
        top_local = max((x for x in rows.local_rank if x is not None), default=None)
        if top_local is None:
            top_local = max(units.local_rank.values(), default=None)
        single_node = (
            world.world is not None
            and top_local is not None
            and top_local == world.world - 1
            and tasks_are != "nodes"
        )
    rank_local: dict[int, int] = {}
    rl: dict[int, Counter[int]] = defaultdict(Counter)
    for (_node, lr), c in node_local.items():
        for r in c:
            rl[r][lr] += 1
    for r, c in rl.items():
        if len(c) == 1:
            rank_local[r] = next(iter(c))
    return NodeFacts(
        tasks_are, task_rank, task_host, node_local, node_local_text, single_node, rank_local, notes
    )


def _tasks(
    rows: Rows, hosts: HostFacts, procs: ProcessFacts, world: int | None
) -> tuple[str | None, dict[int, int], dict[int, str], tuple[str, ...]]:
    """Whether srun tasks are ranks, processes or nodes; each task's rank and host."""
    task_ranks: dict[int, Counter[int]] = defaultdict(Counter)
    task_pids: dict[int, set[int]] = defaultdict(set)
    task_hosts: dict[int, set[str]] = defaultdict(set)
    task_tee: set[int] = set()
    for i in range(rows.n):
        t = rows.srun[i]
        if t is None:
            continue
        r = row_rank(rows, hosts, procs, i)
        if r is not None:
            task_ranks[t][r] += 1
        if rows.pid[i] is not None:
            task_pids[t].add(rows.pid[i])
        hi = hosts.row_host[i]
        if hi is not None:
            task_hosts[t].add(hi)
        if "tee" in rows.layers[i] or rows.not_a_worker(i):
            task_tee.add(t)
    tasks = {t for t in rows.srun if t is not None}
    tasks_are: str | None = None
    task_rank: dict[int, int] = {}
    task_host = {t: next(iter(h)) for t, h in task_hosts.items() if len(h) == 1}
    notes: list[str] = []
    if tasks:
        multi = [
            t
            for t in tasks
            if len(task_ranks.get(t, ())) > 1 or len(task_pids.get(t, ())) > 1 or t in task_tee
        ]
        if multi:
            tasks_are = "nodes"
            notes.append(
                f"srun tasks are nodes, not ranks (task {min(multi)} shows several ranks or processes, "
                "torchrun prefixes or launcher lines)"
            )
        else:
            task_rank = {t: c.most_common(1)[0][0] for t, c in task_ranks.items() if c}
            if task_rank and all(r == t for t, r in task_rank.items()):
                tasks_are = "ranks"
            elif task_rank:
                tasks_are = "processes"
            elif len(tasks) >= 2:
                tasks_are = "ranks"
                notes.append(
                    f"srun tasks taken as ranks: {len(tasks)} tasks, none showing several processes, "
                    "torchrun prefixes or launcher lines"
                    + (f" (world size {world})" if world is not None else "")
                )
    return tasks_are, task_rank, task_host, tuple(notes)
