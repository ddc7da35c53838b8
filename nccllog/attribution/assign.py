"""Pass 6, assignment: each row's rank, local rank, host, pid, target rank and attribution text.

The evidence order (strongest first) is the one ``resolve``'s docstring lists; a disagreeing
weaker word is recorded in the attribution text. ``rank`` is always the rank of the process
that *wrote* the line: a launcher or Ray line about one worker keeps ``rank`` null and gets
``target_rank`` from its ``target_pid`` / ``target_local_rank``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from nccllog.attribution.hosts import HostFacts
from nccllog.attribution.nodes import NodeFacts, node_shown, row_node
from nccllog.attribution.processes import ProcessFacts
from nccllog.attribution.rows import ProcessKey, Rows
from nccllog.attribution.units import UnitFacts
from nccllog.attribution.world import WorldFacts


@dataclass(frozen=True)
class Evidence:
    """Every earlier pass's facts, as the assignment reads them."""

    rows: Rows
    hosts: HostFacts
    world: WorldFacts
    procs: ProcessFacts
    units: UnitFacts
    nodes: NodeFacts

    def show(self, key: str | None) -> str | None:
        """How a host key is shown (with every spelling learned by the passes)."""
        return self.procs.display.show(key)

    def node(self, i: int) -> str | None:
        """Row i's node (see ``nodes.row_node``)."""
        return row_node(self.rows, self.hosts, self.units, self.nodes.tasks_are, self.nodes.task_host, i)


@dataclass(frozen=True)
class Assignment:
    """The output columns, one entry per row."""

    rank: list[int | None]
    local_rank: list[int | None]
    host: list[str | None]
    pid: list[int | None]
    attribution: list[str]
    target_rank: list[int | None]


def assign(ev: Evidence) -> Assignment:
    """Give every row its writer's rank, local rank, host and pid, with the reason in words."""
    rows, units, nodes = ev.rows, ev.units, ev.nodes
    n = rows.n
    out_rank: list[int | None] = [None] * n
    out_local: list[int | None] = [None] * n
    out_host: list[str | None] = [None] * n
    out_pid: list[int | None] = [None] * n
    out_attr: list[str] = [""] * n
    out_trank: list[int | None] = list(rows.target_rank)
    only_default = _only_default_group(rows)
    host_rank = _host_ranks(ev)
    for i in range(n):
        unit = rows.unit[i]
        key = ev.hosts.row_process[i]
        if key is None and unit in units.process:
            key = units.process[unit]
        hkey = ev.hosts.row_host[i]
        if hkey is None and key is not None:
            hkey = key[0]
        rank, why, conflicts = _own_rank(ev, i, key, hkey, only_default, host_rank)
        target = _target(ev, i, hkey)
        if target is not None and rows.target_rank[i] is None:
            out_trank[i] = target[0]
        world = ev.world.world
        if rank is not None and world is not None and rank >= world:
            conflicts.append(f"rank {rank} is outside the world size {world}")
        out_rank[i] = rank
        if hkey is None and rank is not None:
            hkey = _rank_host_key(ev, rank)
        if hkey is None and rows.srun[i] is not None and nodes.tasks_are == "nodes":
            hkey = nodes.task_host.get(rows.srun[i])
        if hkey is None and unit in units.host and not units.mixed.get(unit):
            hkey = units.host[unit]
        out_host[i] = ev.show(hkey)
        out_pid[i] = rows.pid[i] if rows.pid[i] is not None else (key[1] if key is not None else None)
        out_local[i] = _local_rank(ev, i, key, rank)
        if rank is None:
            why = _reason(ev, i, key)
        elif conflicts:
            why = f"{why}; conflicting evidence: {'; '.join(conflicts)}"
        if target is not None and rows.target_rank[i] is None:
            why = f"{why}; the line is about {target[1]}"
        out_attr[i] = why
    _terminate_what(rows, ev.hosts, out_rank, out_host, out_attr)
    return Assignment(out_rank, out_local, out_host, out_pid, out_attr, out_trank)


def _host_ranks(ev: Evidence) -> dict[str, set[int]]:
    host_rank: dict[str, set[int]] = defaultdict(set)
    for (h, _p), (r, _t, _c) in ev.procs.process_rank.items():
        if h is not None:
            host_rank[h].add(r)
    for (h, _p), ranks in ev.procs.claimed.items():
        if h is not None:
            host_rank[h].update(ranks)
    for k, devs in ev.world.multi_dev.items():
        if k[0] is not None:
            host_rank[k[0]].update(r for r, _t in devs.values())
    return host_rank


def _local_rank(ev: Evidence, i: int, key: ProcessKey | None, rank: int | None) -> int | None:
    lr = ev.rows.local_rank[i]
    if lr is None:
        lr = ev.units.local_rank.get(ev.rows.unit[i])
    local_facts = ev.world.local_facts
    if lr is None and key is not None and key in local_facts and len(local_facts[key]) == 1:
        lr = next(iter(local_facts[key]))
    if lr is None and rank is not None:
        lr = ev.nodes.rank_local.get(rank)
    return lr


def _terminate_what(
    rows: Rows, hosts: HostFacts, out_rank: list[int | None], out_host: list[str | None], out_attr: list[str]
) -> None:
    """libstdc++ prints `terminate called after throwing …` and `  what():  …` together from one
    process: the first takes the rank of the second when only the second names it."""
    by_unit: dict[str, dict[int, int]] = defaultdict(dict)
    for i in range(rows.n):
        by_unit[rows.unit[i]][rows.line[i]] = i
    hk = hosts.row_host
    for i in range(rows.n):
        msg = rows.message[i] or ""
        if out_rank[i] is not None or not msg.startswith("terminate called after throwing"):
            continue
        j = by_unit[rows.unit[i]].get(rows.line[i] + 1)
        if j is None or out_rank[j] is None or not (rows.message[j] or "").lstrip().startswith("what():"):
            continue
        if (hk[i], rows.srun[i], rows.local_rank[i]) != (hk[j], rows.srun[j], rows.local_rank[j]):
            continue  # another node's or task's output interleaved between them
        out_rank[i] = out_rank[j]
        out_host[i] = out_host[i] or out_host[j]
        out_attr[i] = (
            f"the what() line right after it (line {rows.line[j]}) is rank {out_rank[j]}: "
            "libstdc++ prints both from one process"
        )


def _own_rank(
    ev: Evidence,
    i: int,
    key: ProcessKey | None,
    hkey: str | None,
    only_default: bool,
    host_rank: dict[str, set[int]],
) -> tuple[int | None, str, list[str]]:
    """The rank of the process that wrote row i, by the evidence order of ``resolve``'s docstring."""
    rows, units = ev.rows, ev.units
    unit = rows.unit[i]
    conflicts: list[str] = []
    pr = ev.procs.lookup(key) if key is not None else None
    lrank, direct_how = rows.line_rank(i)
    if lrank is not None:
        if pr is not None and pr[0] != lrank:
            conflicts.append(f"{pr[1]} says rank {pr[0]}")
        elif pr is not None:
            conflicts.extend(pr[2])
        return lrank, direct_how, conflicts
    multi_dev = ev.world.multi_dev
    if key is not None and key in multi_dev:
        dev = rows.nccl_dev[i]
        if dev is not None and dev in multi_dev[key]:
            r, text = multi_dev[key][dev]
            return r, text, conflicts
        return None, "", conflicts
    app = rows.rank[i]  # only the application prefix is left
    if pr is not None:
        why = pr[1] if ev.hosts.row_process[i] is not None else f"{pr[1]} (one process's output: {unit})"
        conflicts.extend(pr[2])
        if app is not None and app != pr[0]:
            conflicts.append(f"application prefix says rank {app}")
        return pr[0], why, conflicts
    if app is not None:
        return app, rows.direct_text(i), conflicts
    if unit in units.rank:
        return units.rank[unit][0], units.rank[unit][1], conflicts
    rank, why = _via_local(ev, i)
    if rank is None:
        rank, why = _weak_rank(ev, i, key, hkey, only_default, host_rank)
    return rank, why, conflicts


def _weak_rank(
    ev: Evidence,
    i: int,
    key: ProcessKey | None,
    hkey: str | None,
    only_default: bool,
    host_rank: dict[str, set[int]],
) -> tuple[int | None, str]:
    """The weakest evidence, in order: the srun task, the unnamed WorkNCCL rank, the host's only rank."""
    rows, nodes = ev.rows, ev.nodes
    t = rows.srun[i]
    if t is not None and nodes.tasks_are in ("ranks", "processes"):
        if t in nodes.task_rank:
            r = nodes.task_rank[t]
            return r, f"srun task {t} (one task per rank; its other lines are rank {r})"
        if nodes.tasks_are == "ranks":
            return t, f"srun task {t} (one task per rank)"
    pgr = rows.pg_rank[i]
    if pgr is not None and rows.pg[i] is None and only_default:
        return pgr, f"WorkNCCL [Rank {pgr}], taken as the default group: no other process group is seen"
    if (
        key is None  # a pid of its own that no evidence names is another process
        and hkey is not None
        and len(host_rank.get(hkey, ())) == 1
        and not rows.not_a_worker(i)
    ):
        r = next(iter(host_rank[hkey]))
        return r, f"the only rank seen on {ev.show(hkey)} is {r}"
    return None, ""


def _via_local(ev: Evidence, i: int) -> tuple[int | None, str]:
    rows = ev.rows
    lr = rows.local_rank[i]
    how = f"torchrun tee [{lr}]:" if lr is not None else ""
    if lr is None:
        lr = ev.units.local_rank.get(rows.unit[i])
        how = f"torchrun log dir (local rank {lr})" if lr is not None else ""
    if lr is None and i in ev.units.spawn_block:
        lr, header = ev.units.spawn_block[i]
        how = f"mp.spawn re-raises the error of process {lr} (line {header}: -- Process {lr} terminated …):"
    if lr is None:
        return None, ""
    node = ev.node(i)
    if node is not None:
        c = ev.nodes.node_local.get((node, lr))
        if c:
            r = c.most_common(1)[0][0]
            text = ev.nodes.node_local_text.get((node, lr, r), "")
            return r, f"{how} local rank {lr} on {node_shown(ev.procs, node)} is rank {r} ({text})"
    if ev.nodes.single_node:
        return lr, f"{how} local rank {lr} = global rank (single-node job)"
    return None, ""


def _rank_host_key(ev: Evidence, rank: int) -> str | None:
    hosts = {k[0] for k, (r, _t, _c) in ev.procs.process_rank.items() if r == rank and k[0] is not None}
    hosts |= set(ev.procs.rank_host_facts.get(rank, ()))
    return next(iter(hosts)) if len(hosts) == 1 else None


def _only_default_group(rows: Rows) -> bool:
    for i in range(rows.n):
        if rows.pg[i] is not None and rows.pg[i] != "0" and rows.pg_desc[i] != "default_pg":
            return False
    sizes = {x for x in rows.nranks if x is not None}
    return len(sizes) <= 1


def _target(ev: Evidence, i: int, hkey: str | None) -> tuple[int, str] | None:
    """The rank a line talks about: its target_rank, or target_pid / target_local_rank mapped."""
    rows = ev.rows
    if rows.target_rank[i] is not None:
        return rows.target_rank[i], f"rank {rows.target_rank[i]}"
    p = rows.target_pid[i]
    if p is not None:
        h = ev.hosts.host_of(rows.target_host[i]) if rows.target_host[i] else hkey
        pr = ev.procs.lookup((h, p))
        if pr is None and h is not None:
            pr = ev.procs.lookup((None, p))
        if pr is not None:
            return pr[0], f"target pid {p} is rank {pr[0]} ({pr[1]})"
    lr = rows.target_local[i]
    if lr is not None and hkey is not None and rows.signal[i] != "init":
        c = ev.nodes.node_local.get((hkey, lr))
        if c:
            r = c.most_common(1)[0][0]
            text = ev.nodes.node_local_text.get((hkey, lr, r), "")
            return r, f"target local rank {lr} on {ev.show(hkey)} is rank {r} ({text})"
    return None


def _reason(ev: Evidence, i: int, key: ProcessKey | None) -> str:
    """Why row i has no rank, in words."""
    rows, units = ev.rows, ev.units
    lay = set(rows.layers[i])
    if rows.pg_rank[i] is not None:
        if rows.pg[i] is not None:
            return (
                f"no global rank: [PG {rows.pg[i]} Rank {rows.pg_rank[i]}] is a rank inside process group "
                f"{rows.pg[i]}"
            )
        return f"no global rank: [Rank {rows.pg_rank[i]}] is a process-group rank and other groups exist"
    if lay & {"syslog", "dmesg"}:
        return "no rank evidence: kernel/system log line (host level)"
    if "ray" in lay and rows.pid[i] is None:
        return "no rank evidence: Ray system line (raylet/autoscaler) without a worker pid"
    if rows.not_a_worker(i):
        where = rows.src[i] or rows.logger[i] or "launcher"
        return f"no rank evidence: launcher line ({where}) from the parent process, not a worker"
    if key is not None and key in ev.world.multi_dev:
        ranks = sorted(r for r, _t in ev.world.multi_dev[key].values())
        return (
            f"no rank evidence: pid {key[1]} drives several GPUs (ranks {', '.join(map(str, ranks))}) "
            "and the line names no device"
        )
    if key is not None:
        return (
            f"no rank evidence: pid {key[1]} on {ev.show(key[0]) or 'an unknown host'} appears in no NCCL "
            "comm init or rank-prefixed line"
        )
    if rows.local_rank[i] is not None or rows.unit[i] in units.local_rank:
        lr = rows.local_rank[i] if rows.local_rank[i] is not None else units.local_rank[rows.unit[i]]
        node = ev.node(i)
        where = node_shown(ev.procs, node) if node else "an unknown node"
        return f"no rank evidence: torchrun local rank {lr} on {where}, and no local-to-global map (multi-node job)"
    if rows.srun[i] is not None:
        if ev.nodes.tasks_are == "nodes":
            return f"no rank evidence: srun task {rows.srun[i]} runs several ranks (tasks are nodes)"
        return f"no rank evidence: srun task {rows.srun[i]}, unknown whether tasks are ranks or nodes"
    if units.mixed.get(rows.unit[i]):
        return "no rank evidence: driver line without worker prefix in a file that mixes several ranks"
    return "no rank evidence: the line has no worker prefix, and its file says nothing about the rank"
