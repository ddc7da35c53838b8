"""Saved ncclras text output (NCCL 2.24.3+): its per-rank lines are matched, mapped to global ranks
through the NCCL init lines of the same process, and a rank behind or ahead is named."""

from __future__ import annotations

from pathlib import Path

from nccllog.pipeline import analyze

REPORT = """\
NCCL version 2.26.2 compiled with CUDA 12.4
CUDA runtime version 12040, driver version 12080

Job summary
===========

  Nodes  Processes         GPUs  Processes     GPUs
(total)   per node  per process    (total)  (total)
      2          4            1          8        8

Gathering data about the RAS network (timeout 5s)... obtained a result in 0.004s
 Collected data about 16 unidirectional connections

Gathering data about the NCCL communicators (timeout 5s)... (0.010s)
=============

Warnings
========

#0-0 (9e1b2c3d4e5f6071) MISMATCH
  Communicator ranks have different AllReduce operation counts
  7 ranks have launched up to operation {majority}
  Rank 5 has launched up to operation {mine} -- GPU 1 managed by process 48231 on node gpu-node-08

"""


def init_lines() -> str:
    out = []
    for r in range(8):
        host, pid = f"gpu-node-0{7 + r // 4}", 48226 + r
        out.append(
            f"{host}:{pid}:{pid} [{r % 4}] NCCL INFO comm 0x55{r}9c2a41f60 rank {r} nranks 8 cudaDev {r % 4} "
            f"nvmlDev {r % 4} busId 1{r % 4}000 commId 0x9e1b2c3d4e5f6071 - Init COMPLETE\n"
        )
    return "".join(out)


def run(tmp_path: Path, majority: int, mine: int) -> tuple[str, tuple[int, ...]]:
    (tmp_path / "ncclras.txt").write_text(REPORT.format(majority=majority, mine=mine))
    (tmp_path / "nccl.log").write_text(init_lines())
    inc = analyze([tmp_path])
    row = inc.events.filter(inc.events["pattern"] == "nccl.ras_client_rank_ops").row(0, named=True)
    assert (row["target_pid"], row["target_host"], row["target_rank"], row["comm_rank"]) == (
        48231,
        "gpu-node-08",
        5,
        5,
    )
    return inc.verdict.category, inc.verdict.culprit_ranks


def test_rank_behind_is_the_straggler(tmp_path: Path) -> None:
    assert run(tmp_path, majority=1818, mine=1817) == ("straggler_hang", (5,))


def test_rank_ahead_issued_an_extra_operation(tmp_path: Path) -> None:
    assert run(tmp_path, majority=1818, mine=1819) == ("collective_mismatch", (5,))


def test_without_init_lines_no_global_rank(tmp_path: Path) -> None:
    (tmp_path / "ncclras.txt").write_text(REPORT.format(majority=1818, mine=1817))
    inc = analyze([tmp_path / "ncclras.txt"])
    row = inc.events.filter(inc.events["pattern"] == "nccl.ras_client_rank_ops").row(0, named=True)
    assert row["target_rank"] is None and row["target_pid"] == 48231
    assert inc.verdict.culprit_ranks == ()
