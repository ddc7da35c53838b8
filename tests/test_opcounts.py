"""NCCL's COLL trace (``NCCL_DEBUG_SUBSYS=COLL``) compared call by call across ranks
(``correlate/opcounts.py``), from consoles and per-process NCCL_DEBUG_FILE logs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

import nccllog
from nccllog.model import Incident


@dataclass(frozen=True)
class Proc:
    """One rank's process: where its NCCL lines come from."""

    rank: int
    host: str
    pid: int
    dev: int
    prefix: str = ""  # a launcher prefix (srun --label)

    def head(self, thread: int = 0) -> str:
        return f"{self.prefix}{self.host}:{self.pid}:{self.pid + thread} [{self.dev}] NCCL INFO "

    def comm(self, salt: int = 0) -> str:
        # Per-process heap pointers: different on every rank for the same communicator.
        return f"0x{0x55D0_0000_0000 + self.pid * 0x1_0000 + salt * 0x40 + 0x9F0:x}"


@dataclass
class Comm:
    """A communicator: its members (in communicator rank order), size and commId."""

    members: list[Proc]
    comm_id: str | None
    salt: int = 0
    nranks: int = field(init=False)

    def __post_init__(self) -> None:
        self.nranks = len(self.members)


def procs(n: int, per_node: int = 4, *, srun: bool = False) -> list[Proc]:
    out = []
    for r in range(n):
        node, dev = divmod(r, per_node)
        out.append(
            Proc(
                rank=r,
                host=f"gpu-node-{3 + node}",
                pid=48211 + 37 * r,
                dev=dev,
                prefix=f"{r}: " if srun else "",
            )
        )
    return out


def init_lines(c: Comm) -> list[str]:
    """NCCL 2.20/2.21 init START/COMPLETE lines; 2.14 style (no commId, COMPLETE only) without an id."""
    out = []
    phases = ("Init START", "Init COMPLETE") if c.comm_id else ("Init COMPLETE",)
    for phase in phases:
        for i, p in enumerate(c.members):
            bus = f"{0x18 + 0x11 * p.dev:x}000"
            if c.comm_id:
                out.append(
                    p.head(79)
                    + f"comm {p.comm(c.salt)} rank {i} nranks {c.nranks} cudaDev {p.dev} nvmlDev {p.dev} busId {bus} "
                    f"commId {c.comm_id} - {phase}"
                )
            else:
                out.append(
                    p.head(79)
                    + f"comm {p.comm(c.salt)} rank {i} nranks {c.nranks} cudaDev {p.dev} busId {bus} - {phase}"
                )
    return out


Call = tuple[str, int, int, int, int]  # op, count, datatype, redop, root


def coll(p: Proc, c: Comm, n: int, call: Call) -> str:
    op, count, dtype, redop, root = call
    buf = f"0x7f{p.dev}a4c{n % 256:02x}0000"
    return (
        p.head()
        + f"{op}: opCount {n:x} sendbuff {buf} recvbuff {buf} count {count} datatype {dtype} op {redop} root {root} "
        f"comm {p.comm(c.salt)} [nranks={c.nranks}] stream 0x55d1c39a{p.dev}b70"
    )


def trace(
    c: Comm,
    first: int,
    last: int,
    *,
    calls: dict[tuple[int, int], Call] | None = None,
    stops: dict[int, int] | None = None,
) -> list[str]:
    """Every member's COLL lines for opCounts first..last, interleaved the way a shared console
    mixes them; ``calls`` overrides (rank, opCount), ``stops`` ends a rank's trace early."""
    calls = calls or {}
    stops = stops or {}
    out = []
    for n in range(first, last + 1):
        normal: Call = ("AllReduce", 2106881 if n % 3 else 4352, 7, 0, 0)
        order = c.members[n % len(c.members) :] + c.members[: n % len(c.members)]
        for p in order:
            if n <= stops.get(p.rank, last):
                out.append(coll(p, c, n, calls.get((p.rank, n), normal)))
    return out


def preamble(ps: list[Proc]) -> list[str]:
    lead = ps[0]
    out = [
        lead.head() + "Bootstrap : Using eth0:10.20.3.11<0>",
        lead.head() + "NCCL version 2.21.5+cuda12.4",
    ]
    out += [p.head() + "NCCL_SOCKET_IFNAME set by environment to eth0" for p in ps]
    return out


def analyze(lines: list[str]) -> Incident:
    return nccllog.analyze("\n".join(lines) + "\n")


def mismatches(inc: Incident) -> list[nccllog.Hypothesis]:
    return [h for h in inc.hypotheses if h.category == "collective_mismatch"]


# --------------------------------------------------------------------------- mismatch


def test_broadcast_where_the_others_all_reduce_names_that_rank() -> None:
    ps = procs(4)
    world = Comm(ps, "0x4f2a9c1e7b03d865")
    odd: Call = ("Broadcast", 5056, 7, 0, 0)
    # The ranks go on enqueuing a dozen calls after the odd one before they block: it must
    # survive the reader's sampling, on every rank.
    lines = preamble(ps) + init_lines(world) + trace(world, 0x1, 0x26, calls={(2, 0x1A): odd})
    v = analyze(lines).verdict
    assert (v.category, v.culprit_ranks, v.confidence) == ("collective_mismatch", (2,), "high")
    assert "Rank 2 called Broadcast (count 5056, root 0) at opCount 0x1a" in v.summary
    assert "ranks 0,1,3 called AllReduce (count 2106881)" in v.summary
    texts = [e.text for e in v.evidence]
    assert any("Broadcast: opCount 1a" in t and e.rank == 2 for t, e in zip(texts, v.evidence, strict=True))
    assert any("AllReduce: opCount 1a" in t for t in texts)


@pytest.mark.parametrize(
    ("odd", "said"),
    [
        (("AllReduce", 1048576, 9, 0, 0), "rank 5 called AllReduce (count 1048576)"),
        (("AllReduce", 1048577, 7, 0, 0), "rank 5 called AllReduce (count 1048577, datatype 7 (float32))"),
    ],
)
def test_a_different_count_or_datatype_at_the_same_opcount_is_a_mismatch(odd: Call, said: str) -> None:
    ps = procs(8, srun=True)
    world = Comm(ps, "0x91c3d07a2e5b4f16")
    usual: Call = ("AllReduce", 1048577, 9, 0, 0)
    calls = {(r, n): usual for r in range(8) for n in range(0x300, 0x30A)}
    calls[(5, 0x305)] = odd
    lines = preamble(ps) + init_lines(world) + trace(world, 0x300, 0x309, calls=calls)
    v = analyze(lines).verdict
    assert (v.category, v.culprit_ranks) == ("collective_mismatch", (5,))
    assert said.lower() in v.summary.lower()
    assert "opCount 0x305" in v.summary


def test_mismatch_in_per_process_nccl_debug_files(tmp_path: Path) -> None:
    ps = procs(8)
    world = Comm(ps, "0x0b7e55d2a4c19f38")
    calls = {(r, n): ("Broadcast", 640, 7, 0, 0) for r in range(8) for n in range(0x40, 0x50)}
    calls[(6, 0x47)] = ("Broadcast", 640, 7, 0, 1)
    lines = init_lines(world) + trace(world, 0x40, 0x4F, calls=calls)
    for p in ps:
        own = [ln for ln in lines if ln.startswith(f"{p.host}:{p.pid}:")]
        (tmp_path / f"nccl_{p.host}_{p.pid}.log").write_text("\n".join(own) + "\n")
    v = nccllog.analyze(tmp_path).verdict
    assert (v.category, v.culprit_ranks) == ("collective_mismatch", (6,))
    assert v.summary.startswith("Rank 6 called Broadcast (count 640, root 1) at opCount 0x47")
    assert "root 0" in v.summary


def test_a_tie_names_nobody() -> None:
    ps = procs(2)
    pair = Comm(ps, "0x3c8e0f6a51b2d947")
    lines = init_lines(pair) + trace(pair, 0x10, 0x14, calls={(1, 0x12): ("AllGather", 4352, 7, 0, 0)})
    found = mismatches(analyze(lines))
    assert found and found[0].culprit_ranks == ()
    assert "do not say which side" in found[0].summary


# --------------------------------------------------------------------------- no mismatch


def test_a_rank_three_behind_is_the_straggler() -> None:
    ps = procs(4)
    world = Comm(ps, "0x4f2a9c1e7b03d865")
    lines = preamble(ps) + init_lines(world) + trace(world, 0x1, 0x20, stops={1: 0x1D})
    inc = analyze(lines)
    assert (inc.verdict.category, inc.verdict.culprit_ranks) == ("straggler_hang", (1,))
    assert "#29" in inc.verdict.summary and "#32" in inc.verdict.summary
    assert not mismatches(inc)


def test_ranks_that_agree_to_the_end_show_no_mismatch() -> None:
    ps = procs(4)
    world = Comm(ps, "0x4f2a9c1e7b03d865")
    inc = analyze(preamble(ps) + init_lines(world) + trace(world, 0x1, 0x30))
    assert not mismatches(inc)
    # nothing failed, but these logs just stop (no end of run): unknown, not an all-clear
    assert inc.verdict.category == "unknown"


@pytest.mark.parametrize("comm_ids", [True, False], ids=["commId", "no-commId"])
def test_communicators_of_different_sizes_are_not_compared(comm_ids: bool) -> None:
    ps = procs(4)
    world = Comm(ps, "0x4f2a9c1e7b03d865" if comm_ids else None)
    sub = Comm(ps[:2], "0x6d21f0b89a4c3e57" if comm_ids else None, salt=3)
    # The subgroup's opCounts run over the same numbers with other calls.
    sub_calls = {(r, n): ("AllGather", 8192, 9, 0, 0) for r in (0, 1) for n in range(0x1, 0x11)}
    lines = (
        init_lines(world) + init_lines(sub) + trace(world, 0x1, 0x10) + trace(sub, 0x1, 0x10, calls=sub_calls)
    )
    inc = analyze(lines)
    assert not mismatches(inc)
    # nothing failed, but these logs just stop (no end of run): unknown, not an all-clear
    assert inc.verdict.category == "unknown"


def test_groups_of_one_size_are_told_apart_by_comm_id() -> None:
    # Two 3-rank groups run different calls at the same opCounts; inside the second, rank 4 is off.
    ps = procs(6)
    world = Comm(ps, "0x4f2a9c1e7b03d865")
    left = Comm(ps[:3], "0x1a2b3c4d5e6f7081", salt=5)
    right = Comm(ps[3:], "0x7f6e5d4c3b2a1908", salt=5)
    gather = {(r, n): ("AllGather", 8192, 9, 0, 0) for r in (3, 4, 5) for n in range(0x1, 0x9)}
    gather[(4, 0x6)] = ("AllGather", 4096, 9, 0, 0)
    lines = (
        init_lines(world)
        + init_lines(left)
        + init_lines(right)
        + trace(world, 0x1, 0x8)
        + trace(left, 0x1, 0x8)
        + trace(right, 0x1, 0x8, calls=gather)
    )
    found = mismatches(analyze(lines))
    assert [h.culprit_ranks for h in found] == [(4,)]
    assert "opCount 0x6 of the 3-rank communicator (commId 0x7f6e5d4c3b2a1908)" in found[0].summary


def test_point_to_point_traffic_does_not_align_opcounts() -> None:
    # Pipeline stages on the world communicator: a Send/Recv moves the counters of its two ranks
    # only, so the first and last stages end with half the others' opCount and are not behind.
    ps = procs(5)
    world = Comm(ps, "0x2e9d4a7c1b05f836")
    lines = init_lines(world) + trace(world, 0x1, 0x4)
    counter = {p.rank: 0x5 for p in ps}
    for _micro in range(12):
        for stage in range(4):
            send, recv = ps[stage], ps[stage + 1]
            lines.append(coll(send, world, counter[send.rank], ("Send", 65536, 9, 0, recv.rank)))
            lines.append(coll(recv, world, counter[recv.rank], ("Recv", 65536, 9, 0, send.rank)))
            counter[send.rank] += 1
            counter[recv.rank] += 1
    inc = analyze(lines)
    assert not [h for h in inc.hypotheses if h.category in ("collective_mismatch", "straggler_hang")]
    # nothing failed, but these logs just stop (no end of run): unknown, not an all-clear
    assert inc.verdict.category == "unknown"
