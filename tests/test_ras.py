"""Saved ncclras text output (NCCL 2.24.3+): its per-rank lines are matched, mapped to global ranks
through the NCCL init lines of the same process, and a rank behind or ahead is named."""

from __future__ import annotations

import json
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


def json_report(counts: dict[int, int], async_error: dict[int, int] | None = None, dead: int = 0) -> str:
    """``ncclras -f json`` as rasDumpCommsToJSON writes it (NCCL 2.28.7+)."""
    funcs = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce", "SendRecv", "Send", "Recv")
    ranks = []
    for r, n in counts.items():
        ranks.append(
            {
                "rank": r,
                "host": f"gpu-node-0{7 + r // 4}",
                "pid": 48226 + r,
                "cuda_dev": r % 4,
                "nvml_dev": r % 4,
                "status": {
                    "init_state": 0,
                    "async_error": (async_error or {}).get(r, 0),
                    "finalize_called": False,
                    "destroy_flag": False,
                    "abort_flag": False,
                },
                "collective_counts": {f: (n if f == "AllReduce" else 0) for f in funcs},
            }
        )
    missing = [
        {
            "rank": 8 + i,
            "host": "gpu-node-09",
            "pid": 50000 + i,
            "cuda_dev": i,
            "nvml_dev": i,
            "status": {"unresponsive": True, "considered_dead": True},
        }
        for i in range(dead)
    ]
    doc = {
        "nccl_version": "2.28.7",
        "cuda_runtime_version": 12080,
        "cuda_driver_version": 12080,
        "timestamp": "2025-11-25 22:09:34",
        "communicators_count": 1,
        "communicators": [
            {
                "hash": "0x9e1b2c3d4e5f6071",
                "secondary_hash": "0x1a2b:0x3c4d",
                "size": len(counts) + dead,
                "ranks_count": len(counts),
                "missing_ranks_count": dead,
                "ranks": ranks,
                "missing_ranks": missing,
            }
        ],
        "ras": {"collection_time_sec": 0.012, "timeouts_count": 0},
    }
    return json.dumps(doc, indent=2)


def test_json_report_behind(tmp_path: Path) -> None:
    counts = dict.fromkeys(range(8), 1818) | {5: 1817}
    (tmp_path / "ncclras.json").write_text(json_report(counts, async_error={3: 6}, dead=2))
    (tmp_path / "nccl.log").write_text(init_lines())
    inc = analyze([tmp_path])
    by = {
        p: inc.events.filter(inc.events["pattern"] == p)
        for p in ("nccl.ras_client_rank_ops", "nccl.ras_client_rank_error", "nccl.ras_client_dead")
    }
    assert by["nccl.ras_client_rank_ops"]["target_rank"].to_list() == [5]
    assert by["nccl.ras_client_rank_error"].row(0, named=True)["error"] == "Remote process error"
    assert by["nccl.ras_client_rank_error"]["target_rank"].to_list() == [3]
    assert by["nccl.ras_client_dead"]["count"].to_list() == [2]
    assert (inc.verdict.category, inc.verdict.culprit_ranks) == ("straggler_hang", (5,))


def test_json_report_all_agree_names_nobody(tmp_path: Path) -> None:
    (tmp_path / "ncclras.json").write_text(json_report(dict.fromkeys(range(8), 1818)))
    inc = analyze([tmp_path / "ncclras.json"])
    assert inc.events.filter(inc.events["pattern"] == "nccl.ras_client_rank_ops").height == 0
