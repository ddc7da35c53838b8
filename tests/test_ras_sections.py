"""Saved ncclras output beyond the per-rank count lines: the DEAD and INCOMPLETE sections of the
text report, the members of a group of ranks, and monitor-mode events (text and JSON, NCCL 2.29+),
each joined to a global rank through the NCCL init lines of the same process.

Formats from NCCL's ``src/ras/client_support.cc`` (``rasClientRunComms``, ``rasClientsNotifyEvent``)
and ``src/ras/peers.cc`` (``rasPeerInfoToString``); values are made up.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from nccllog.cli import main
from nccllog.ingest import ras
from nccllog.ingest.sources import Source
from nccllog.pipeline import analyze

HEAD = """\
NCCL version 2.26.2 compiled with CUDA 12.4
CUDA runtime version 12040, driver version 12080

Job summary
===========

  Nodes  Processes         GPUs  Processes     GPUs
(total)   per node  per process    (total)  (total)
      2          4            1          8        8

Communicators... (2.05s)
=============

Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors
    #  in group  per comm  per node  per comm  in group
    0         1         2       3-4         8         8   RUNNING  INCOMPLETE

"""
DEAD = """\
Errors
======

DEAD
  1 job process is considered dead (unreachable via the RAS network)
  Process 48232 on node gpu-node-08 managing GPU 2

#0-0 (9e1b2c3d4e5f6071) INCOMPLETE
  Missing communicator data from 1 rank
  Rank 6 -- GPU 2 managed by process 48232 on node gpu-node-08

"""
UNRESPONSIVE = """\
Errors
======

INCOMPLETE
  Missing communicator data from 1 job process
  Process 48229 on node gpu-node-07 managing GPU 3

"""
GROUPS = """\
Warnings
========

#0-0 (9e1b2c3d4e5f6071) MISMATCH
  Communicator ranks have different AllReduce operation counts
  6 ranks have launched up to operation 1818
  2 ranks have launched up to operation 1817
  Rank 1 -- GPU 1 managed by process 48227 on node gpu-node-07
  Rank 6 -- GPU 2 managed by process 48232 on node gpu-node-08

"""
ERRORS = """\
Errors
======

#0-0 (9e1b2c3d4e5f6071) ERROR
  Asynchronous errors on 2 ranks
  2 ranks reported Remote process error
  Rank 2 -- GPU 2 managed by process 48228 on node gpu-node-07
  Rank 5 -- GPU 1 managed by process 48231 on node gpu-node-08

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


def run(tmp_path: Path, name: str, report: str) -> tuple[object, object]:
    (tmp_path / name).write_text(report)
    (tmp_path / "nccl.log").write_text(init_lines())
    inc = analyze([tmp_path])
    return inc, inc.events


def rows(ev: object, pattern: str) -> list[dict[str, object]]:
    return ev.filter(ev["pattern"] == pattern).sort("line").to_dicts()  # type: ignore[attr-defined,no-any-return]


def test_section_lines_stand_alone_at_their_line_numbers() -> None:
    report = HEAD + DEAD + GROUPS + ERRORS
    assert ras.looks_like_text(report.encode()[:4096])
    out = (ras.text_to_text(Source(name="r.txt"), report.encode()).data or b"").decode()
    before, after = report.split("\n"), out.split("\n")
    assert len(before) == len(after)
    changed = [a.strip() for b, a in zip(before, after, strict=True) if a != b]
    assert changed == [
        "DEAD: Process 48232 on node gpu-node-08 managing GPU 2",
        "INCOMPLETE: Rank 6 -- GPU 2 managed by process 48232 on node gpu-node-08",
        "Rank 1 has launched up to operation 1817 -- GPU 1 managed by process 48227 on node gpu-node-07",
        "Rank 6 has launched up to operation 1817 -- GPU 2 managed by process 48232 on node gpu-node-08",
        "Rank 2 reported Remote process error -- GPU 2 managed by process 48228 on node gpu-node-07",
        "Rank 5 reported Remote process error -- GPU 1 managed by process 48231 on node gpu-node-08",
    ]


def test_dead_process_names_its_rank(tmp_path: Path) -> None:
    inc, ev = run(tmp_path, "ncclras.txt", HEAD + DEAD)
    (dead,) = rows(ev, "nccl.ras_process_dead")
    assert (dead["target_pid"], dead["target_host"], dead["cuda_dev"], dead["target_rank"]) == (
        48232,
        "gpu-node-08",
        2,
        6,
    )
    (missing,) = rows(ev, "nccl.ras_process_incomplete")
    assert (missing["comm_rank"], missing["target_rank"]) == (6, 6)
    v = inc.verdict  # type: ignore[attr-defined]
    assert (v.category, v.culprit_ranks) == ("straggler_hang", (6,))
    assert "declared dead" in v.summary


def test_unresponsive_process_names_its_rank(tmp_path: Path) -> None:
    inc, ev = run(tmp_path, "ncclras.txt", HEAD + UNRESPONSIVE)
    (row,) = rows(ev, "nccl.ras_process_incomplete")
    assert (row["target_pid"], row["target_rank"]) == (48229, 3)
    v = inc.verdict  # type: ignore[attr-defined]
    assert (v.category, v.culprit_ranks) == ("straggler_hang", (3,))


def test_every_member_of_a_group_behind_is_named(tmp_path: Path) -> None:
    """Two ranks behind: the client lists them under their group's count, not one by one."""
    inc, ev = run(tmp_path, "ncclras.txt", HEAD + GROUPS)
    assert [r["target_rank"] for r in rows(ev, "nccl.ras_client_rank_ops")] == [1, 6]
    v = inc.verdict  # type: ignore[attr-defined]
    assert (v.category, v.culprit_ranks) == ("straggler_hang", (1, 6))


def test_asynchronous_errors_of_a_group_are_keyed_to_ranks(tmp_path: Path) -> None:
    _inc, ev = run(tmp_path, "ncclras.txt", HEAD + ERRORS)
    got = [(r["error"], r["target_rank"]) for r in rows(ev, "nccl.ras_client_rank_error")]
    assert got == [("Remote process error", 2), ("Remote process error", 5)]


# The client prints "<peer> <details>": a trailing space when the details are empty.
MONITOR_TEXT = (
    "[2025-12-19 13:06:53] PEER_NEW: Process 48232 on node gpu-node-08 managing GPU 2 \n"
    "[2025-12-19 13:07:07] PEER_DEAD: Process 48232 on node gpu-node-08 managing GPU 2 \n"
)


def monitor_json() -> str:
    """Monitor mode with ``-f json``: one pretty-printed object per event, back to back."""
    events = [
        ("LIFECYCLE", "PEER_NEW", {"host": "gpu-node-08", "pid": 48232, "cuda_devs": [2], "nvml_devs": [2]}),
        ("TRACE", "PEER_CONNECTING", {"addr": "10.0.0.18<43811>"}),
        ("LIFECYCLE", "PEER_DEAD", {"host": "gpu-node-08", "pid": 48232, "cuda_devs": [2], "nvml_devs": [2]}),
    ]
    return "".join(
        json.dumps(
            {"timestamp": f"2025-12-19 13:07:0{i}", "group": g, "event": e, "peer": p, "details": ""},
            indent=2,
        )
        + "\n"
        for i, (g, e, p) in enumerate(events)
    )


@pytest.mark.parametrize("form", ["text", "json"])
def test_monitor_peer_dead_names_its_rank(tmp_path: Path, form: str) -> None:
    inc, ev = run(tmp_path, "ncclras-monitor.log", MONITOR_TEXT if form == "text" else monitor_json())
    (dead,) = rows(ev, "nccl.ras_process_dead")
    assert (dead["target_pid"], dead["target_rank"]) == (48232, 6)
    assert "PEER_DEAD: Process 48232 on node gpu-node-08 managing GPU 2" in str(dead["text"])
    v = inc.verdict  # type: ignore[attr-defined]
    assert (v.category, v.culprit_ranks) == ("straggler_hang", (6,))


def test_monitor_json_lines_as_the_client_prints_them() -> None:
    data = monitor_json().encode()
    assert ras.looks_like(data[:4096])
    out = ras.to_text(Source(name="m.json"), data)
    assert out is not None
    assert (out.data or b"").decode().splitlines() == [
        "[2025-12-19 13:07:00] PEER_NEW: Process 48232 on node gpu-node-08 managing GPU 2",
        "[2025-12-19 13:07:01] PEER_CONNECTING: 10.0.0.18<43811>",
        "[2025-12-19 13:07:02] PEER_DEAD: Process 48232 on node gpu-node-08 managing GPU 2",
    ]
    two = {"timestamp": "t", "group": "LIFECYCLE", "event": "PEER_DEAD", "details": ""}
    two["peer"] = {"host": "h", "pid": 7, "cuda_devs": [0, 1], "nvml_devs": [2, 3]}  # type: ignore[assignment]
    line = (ras.to_text(Source(name="m"), json.dumps(two).encode()) or Source(name="")).data
    assert line == b"[t] PEER_DEAD: Process 7 on node h managing GPUs 0,1 (NVML 2,3)\n"


@pytest.mark.parametrize(
    "data",
    [
        b'{"timestamp": "t", "group": "LIFECYCLE", "event": "PEER_DEAD", "peer": {"pid": '
        + b"9" * 5000
        + b"}}",
        b'{"timestamp": "t", "group": "x", "event": "PEER_DEAD", "details": '
        + b"[" * 100_000
        + b"]" * 100_000
        + b"}",
        b'{"nccl_version": "2.28.7", "communicators": [{"ranks": [{"rank": 1e999}]}]}',
        b'{"nccl_version": "2.28.7", "communicators": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    ],
)
def test_hostile_ras_json_is_read_as_text_not_fatal(tmp_path: Path, data: bytes) -> None:
    (tmp_path / "ras.json").write_bytes(data)
    (tmp_path / "nccl.log").write_text(init_lines())
    res = CliRunner().invoke(main, ["analyze", str(tmp_path)], catch_exceptions=False)
    assert res.exit_code == 0, res.output


def test_a_cause_in_the_logs_outranks_the_dead_process(tmp_path: Path) -> None:
    """RAS says rank 6's process is gone, not why; its own OOM says why."""
    (tmp_path / "rank6.log").write_text(
        "[rank6]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    )
    inc, _ev = run(tmp_path, "ncclras.txt", HEAD + DEAD)
    v = inc.verdict  # type: ignore[attr-defined]
    assert (v.category, v.culprit_ranks) == ("oom", (6,))


def test_json_report_names_dead_and_missing_processes(tmp_path: Path) -> None:
    """``missing_ranks`` of the JSON report: dead ones under DEAD, the others INCOMPLETE, each keyed
    by host and pid like the text form."""
    from test_ras import json_report

    doc = json.loads(json_report(dict.fromkeys([0, 1, 2, 3, 4, 5], 1818)))
    comm = doc["communicators"][0]
    comm["missing_ranks"] = [
        {
            "rank": r,
            "host": "gpu-node-08",
            "pid": 48226 + r,
            "cuda_dev": r % 4,
            "nvml_dev": r % 4,
            "status": s,
        }
        for r, s in (
            (6, {"unresponsive": True, "considered_dead": True}),
            (7, {"unresponsive": True, "considered_dead": False}),
        )
    ]
    inc, ev = run(tmp_path, "ncclras.json", json.dumps(doc))
    assert [r["target_rank"] for r in rows(ev, "nccl.ras_process_dead")] == [6]
    assert [(r["comm_rank"], r["target_rank"]) for r in rows(ev, "nccl.ras_process_incomplete")] == [(7, 7)]
    assert rows(ev, "nccl.ras_client_dead")[0]["count"] == 1
    v = inc.verdict  # type: ignore[attr-defined]
    assert (v.category, v.culprit_ranks) == ("straggler_hang", (6,))
