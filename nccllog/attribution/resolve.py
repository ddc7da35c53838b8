"""Dataset-level attribution: give every event its global rank, local rank, host, pid and time.

Runs after pattern matching over the events table (``model.EVENT_BASE_COLUMNS`` + pattern
fields + the matcher's internal ``_`` columns, see ``columns.INTERNAL_SCHEMA``) and returns the table
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
3. the application prefix ``Rank N: `` (see ``attribution.layers``);
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
   or launcher lines, nor for a line whose own pid no evidence names; every rank any line
   claims for a process counts, so a host whose one process drives several GPUs has several).

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

The passes run in this order, each a pure function returning frozen facts: ``hosts`` (display
names, address map, each row's process), ``world`` (world size, the world communicator),
``processes`` ((host, pid) -> rank), ``units`` (files and worker folders), ``nodes`` (Slurm
tasks, local -> global maps), ``assign`` (each row), ``years`` (missing years).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

import polars as pl

from nccllog.attribution.assign import Assignment, Evidence, assign
from nccllog.attribution.columns import with_internal
from nccllog.attribution.hosts import resolve_hosts
from nccllog.attribution.nodes import resolve_nodes
from nccllog.attribution.processes import ProcessFacts, resolve_processes
from nccllog.attribution.rows import Rows
from nccllog.attribution.units import resolve_units
from nccllog.attribution.world import WorldFacts, resolve_world
from nccllog.attribution.years import resolve_years


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
    ev = with_internal(events)
    rows = Rows.of(ev)
    hosts = resolve_hosts(rows)
    world = resolve_world(rows, hosts)
    procs = resolve_processes(rows, hosts, world)
    units = resolve_units(rows, hosts, procs)
    nodes = resolve_nodes(rows, hosts, world, procs, units)
    assignment = assign(Evidence(rows, hosts, world, procs, units, nodes))
    years = resolve_years(rows, assignment.host, file_mtimes or {})
    notes = [*hosts.notes, *procs.notes, *units.notes, *nodes.notes, *years.notes]
    cols = [
        pl.Series("rank", assignment.rank, pl.Int64),
        pl.Series("local_rank", assignment.local_rank, pl.Int64),
        pl.Series("host", assignment.host, pl.String),
        pl.Series("pid", assignment.pid, pl.Int64),
        pl.Series("time", years.time, ev.schema.get("time", pl.Datetime("us"))),
        pl.Series("attribution", assignment.attribution, pl.String),
    ]
    if "target_rank" in ev.columns:
        cols.append(pl.Series("target_rank", assignment.target_rank, ev.schema["target_rank"]))
    out = ev.with_columns(cols)
    out = out.drop([c for c in out.columns if c.startswith("_")])
    return out, topology(world, procs, nodes.rank_local, assignment, hosts.ip_host, notes)


def topology(
    world: WorldFacts,
    procs: ProcessFacts,
    rank_local: dict[int, int],
    assignment: Assignment,
    ip_host: dict[str, str],
    notes: list[str],
) -> Topology:
    """The data set's topology from the passes' facts and the rows' assignment."""
    show = procs.display.show
    notes = list(notes)
    pid_rank: dict[tuple[str | None, int], int] = {}
    for (h, p), (r, _t, _c) in sorted(procs.process_rank.items(), key=lambda kv: (kv[0][0] or "", kv[0][1])):
        pid_rank[(show(h), p)] = r
    host_ranks: dict[str, set[int]] = defaultdict(set)
    rank_hosts: dict[int, Counter[str]] = defaultdict(Counter)
    # pairs counted in C first (a row each), in the order they first appear: ties of
    # most_common below go to the host seen first, as when counting row by row
    for (rr, hh), count in Counter(zip(assignment.rank, assignment.host, strict=True)).items():
        if rr is not None and hh is not None:
            host_ranks[hh].add(rr)
            rank_hosts[rr][hh] += count
    rank_host: dict[int, str] = {}
    for r, c in sorted(rank_hosts.items()):
        if len(c) > 1:
            notes.append(f"rank {r} appears on several hosts ({', '.join(sorted(c))})")
        rank_host[r] = c.most_common(1)[0][0]
    # A rank with no line of its own still has a host when the launcher said where it ran
    # (DeepSpeed's global_rank_mapping, torchrun's failure summary).
    for r, facts in sorted(procs.rank_host_facts.items()):
        shown = show(facts.most_common(1)[0][0]) if facts else None
        if r not in rank_host and shown is not None:
            rank_host[r] = shown
            host_ranks[shown].add(r)
    ranks = {r for r in assignment.rank if r is not None}
    evidence = list(world.evidence)
    ws_dis = list(world.disagreements)
    # Several worlds of different sizes (an RL trainer and its weight-sync group, vLLM's own
    # world, tensor-parallel subgroups): the job is the largest; every rank seen lies inside it.
    printed = [w for w in world.printed if w is not None and w > 0]
    comm_world = world.world
    size = max([comm_world or 0, *printed]) or None
    if size is not None and comm_world is not None and size != comm_world:
        ws_dis = [d for d in ws_dis if not d.startswith(f"world_size {size} printed")]
        ws_dis.append(
            f"the largest NCCL communicator has {comm_world} ranks, but a world of {size} is printed"
        )
    if size is not None and ranks and max(ranks) >= size:
        ws_dis.append(f"rank {max(ranks)} is seen, beyond the world size {size}")
        size = max(ranks) + 1
    elif size is None and ranks:
        evidence.append(f"no world size printed; ranks up to {max(ranks)} are seen (a lower bound)")
    return Topology(
        world_size=size,
        world_size_evidence=tuple(evidence),
        world_size_disagreements=tuple(ws_dis),
        pid_rank=pid_rank,
        host_ranks={h: tuple(sorted(rs)) for h, rs in sorted(host_ranks.items())},
        rank_host=rank_host,
        ip_host={ip: show(h) or h for ip, h in sorted(ip_host.items())},
        rank_local_rank=dict(sorted(rank_local.items())),
        notes=tuple(dict.fromkeys(notes)),
    )
