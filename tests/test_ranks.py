"""Dataset-level rank resolution (attribution.resolve) on small event tables built like the matcher does."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

import polars as pl

from nccllog.attribution import INTERNAL_SCHEMA, internal_values, resolve
from nccllog.attribution.layers import parse_line
from nccllog.attribution.paths import attrs_from_path
from nccllog.ingest.timestamps import PLACEHOLDER_YEAR
from nccllog.model import EVENT_BASE_COLUMNS

FIELDS: dict[str, Any] = {
    "comm_rank": pl.Int64,
    "nranks": pl.Int64,
    "comm_id": pl.String,
    "ip": pl.String,
    "nnodes": pl.Int64,
    "target_rank": pl.Int64,
    "target_local_rank": pl.Int64,
    "target_pid": pl.Int64,
    "target_host": pl.String,
    "world_size": pl.Int64,
}


def events(*rows: tuple[str, str] | tuple[str, str, dict[str, Any]]) -> pl.DataFrame:
    """Rows of (source, line text[, {signal, fields…}]) -> an events table as the matcher builds it."""
    schema = {**EVENT_BASE_COLUMNS, **FIELDS, **INTERNAL_SCHEMA}
    cols: dict[str, list[Any]] = {c: [] for c in schema}
    line_no: Counter[str] = Counter()
    for row in rows:
        src, text = row[0], row[1]
        extra: dict[str, Any] = dict(row[2]) if len(row) > 2 else {}  # type: ignore[misc]
        line_no[src] += 1
        a = parse_line(text)
        rec: dict[str, Any] = {
            "source": src,
            "line": extra.pop("line", line_no[src]),
            "text": text,
            "message": a.message,
            "pattern": extra.pop("pattern", "test.pattern"),
            "signal": extra.pop("signal", "info"),
            "category": None,
            "severity": "info",
            "rank": a.rank,
            "local_rank": a.local_rank,
            "pg": a.pg,
            "pg_rank": a.pg_rank,
            "host": a.host,
            "pid": a.pid,
            "time": a.time.placeholder() if a.time else None,
            "repeat": a.repeat,
            "attribution": None,
            **internal_values(a, attrs_from_path(src)),
        }
        rec.update(extra)
        for c in schema:
            cols[c].append(rec.get(c))
    return pl.DataFrame(cols, schema=schema)


def init(
    host: str, pid: int, comm_rank: int, nranks: int, dev: int = 0, comm_id: str = "0xabc"
) -> tuple[str, dict[str, Any]]:
    text = (
        f"{host}:{pid}:{pid + 100} [{dev}] NCCL INFO comm 0x55aa rank {comm_rank} nranks {nranks} cudaDev {dev} "
        f"nvmlDev {dev} busId 4f000 commId {comm_id} - Init START"
    )
    return text, {"signal": "init", "comm_rank": comm_rank, "nranks": nranks, "comm_id": comm_id}


def by_text(df: pl.DataFrame, needle: str) -> dict[str, Any]:
    hits = df.filter(pl.col("text").str.contains(needle, literal=True))
    assert hits.height >= 1, needle
    return hits.row(0, named=True)


# --- the GF-Bench layout ------------------------------------------------------------------------------
RUN = "phase2_runs/oom_trial_1_0_2_20260323_005000"


def gf_bench() -> pl.DataFrame:
    t0, f0 = init("1eb576079025", 21239, 0, 2)
    t1, f1 = init("1eb576079025", 21240, 1, 2, dev=1)
    return events(
        (
            f"{RUN}/nccl_logs_1eb576079025_21239.txt",
            "1eb576079025:21239:21239 [0] NCCL INFO Bootstrap : Using eth0:172.18.0.2<0>",
            {"signal": "bootstrap", "ip": "172.18.0.2"},
        ),
        (f"{RUN}/nccl_logs_1eb576079025_21239.txt", t0, f0),
        (
            f"{RUN}/nccl_logs_1eb576079025_21239.txt",
            "1eb576079025:21239:21239 [0] NCCL INFO AllReduce: opCount 3 sendbuff 0x1 recvbuff 0x1 count 10 datatype 7 op 0 root 0 comm 0x55aa [nranks=2] stream 0x1",
        ),
        (f"{RUN}/nccl_logs_1eb576079025_21240.txt", t1, f1),
        (
            f"{RUN}/nccl_logs_1eb576079025_21240.txt",
            "1eb576079025:21240:21240 [1] NCCL INFO AllReduce: opCount 3 sendbuff 0x1",
        ),
        (f"{RUN}/stdout.log", "PyTorch version: 2.4.1+cu124"),
        (f"{RUN}/stdout.log", "Rank 0: RuntimeError: CUDA out of memory. Tried to allocate 1024.00 MiB."),
        (f"{RUN}/stdout.log", "Rank 1: ==== Iteration 3/20 ===="),
        (
            f"{RUN}/stderr.log",
            "W0323 00:50:13.943000 132053640053376 torch/multiprocessing/spawn.py:146] Terminating process 21240 via signal SIGTERM",
            {"signal": "process_exit", "target_pid": 21240},
        ),
    )


def test_gf_bench_both_ranks_and_target_pid() -> None:
    df, topo = resolve(gf_bench())
    assert not [c for c in df.columns if c.startswith("_")]
    r0 = by_text(df, "AllReduce: opCount 3 sendbuff 0x1 recvbuff")
    assert (r0["rank"], r0["host"], r0["pid"]) == (0, "1eb576079025", 21239)
    assert r0["attribution"] == "NCCL comm init: pid 21239 on 1eb576079025 is rank 0 of 2"
    r1 = by_text(df, "21240:21240 [1] NCCL INFO AllReduce")
    assert r1["rank"] == 1
    assert by_text(df, "Rank 0: RuntimeError")["rank"] == 0
    assert "application prefix" in by_text(df, "Rank 0: RuntimeError")["attribution"]
    assert by_text(df, "Rank 1: ====")["rank"] == 1
    head = by_text(df, "PyTorch version")
    assert head["rank"] is None and head["attribution"].startswith("no rank evidence")
    term = by_text(df, "Terminating process 21240")
    assert term["target_rank"] == 1  # the rank the line is about
    assert term["rank"] is None  # the writer is the mp.spawn parent, not a rank
    assert term["attribution"].startswith(
        "no rank evidence: launcher line (torch/multiprocessing/spawn.py:146)"
    )
    assert "the line is about target pid 21240 is rank 1" in term["attribution"]
    assert term["pid"] is None  # the number on that line is a thread ident, not the parent's pid
    assert term["time"] == datetime(2026, 3, 23, 0, 50, 13, 943000)  # year from the run folder's date
    assert topo.world_size == 2
    assert topo.pid_rank == {("1eb576079025", 21239): 0, ("1eb576079025", 21240): 1}
    assert topo.ip_host == {"172.18.0.2": "1eb576079025"}
    assert topo.host_ranks == {"1eb576079025": (0, 1)}


def test_launcher_line_without_target_keeps_a_reason() -> None:
    df, _ = resolve(
        events(
            (
                "stderr.log",
                "W0323 00:50:13.943000 132053640053376 torch/multiprocessing/spawn.py:146] Terminating process 99 via signal SIGTERM",
                {"target_pid": 99},
            )
        )
    )
    row = df.row(0, named=True)
    assert row["rank"] is None and row["target_rank"] is None
    assert row["attribution"] == (
        "no rank evidence: launcher line (torch/multiprocessing/spawn.py:146) from the parent process, not a worker"
    )


# --- pid maps -------------------------------------------------------------------------------------------
def test_python_logger_pid_teaches_the_process() -> None:
    df, topo = resolve(
        events(
            (
                "console.log",
                "[rank3]:W1023 14:02:17.123000 4812 torch/distributed/distributed_c10d.py:12] hello",
            ),
            (
                "console.log",
                "[rank2]:W1023 14:02:17.123000 4811 torch/distributed/distributed_c10d.py:12] hello",
            ),
            (
                "console.log",
                "node-a:4812:4900 [3] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1> with error 12",
            ),
        )
    )
    warn = by_text(df, "NCCL WARN")
    assert warn["rank"] == 3
    assert warn["attribution"] == "prefix [rank3]: on a line of pid 4812"
    assert topo.pid_rank == {(None, 4811): 2, ("node-a", 4812): 3}


def test_world_communicator_is_the_largest() -> None:
    t_sub, f_sub = init("node-a", 700, 0, 4, comm_id="0x1")  # a subgroup: comm rank 0 of 4
    t_w, f_w = init("node-a", 700, 5, 8, comm_id="0x2")
    df, topo = resolve(
        events(
            ("n.log", t_sub, f_sub),
            ("n.log", t_w, f_w),
            ("n.log", "node-a:700:701 [5] NCCL INFO Channel 00/0 : 5[5] -> 6[6] via P2P/CUMEM/read"),
        )
    )
    assert by_text(df, "Channel 00/0")["rank"] == 5
    assert topo.world_size == 8
    assert "largest communicator has 8 ranks" in topo.world_size_evidence[0]


def test_conflicting_evidence_prefers_the_prefix_and_says_so() -> None:
    t, f = init("node-a", 700, 4, 8)
    df, topo = resolve(
        events(
            ("n.log", t, f),
            ("n.log", "[rank3]:W1023 14:02:17.123000 700 torch/distributed/x.py:1] odd"),
        )
    )
    row = by_text(df, "odd")
    assert row["rank"] == 3
    assert row["attribution"] == (
        "prefix [rank3]:; conflicting evidence: NCCL comm init: pid 700 on node-a is rank 4 of 8"
    )
    assert any("disagreeing" in n for n in topo.notes)


def test_ray_pid_and_ip_through_bootstrap_lines() -> None:
    t, f = init("gpu-b", 48233, 11, 16, dev=3)
    df, topo = resolve(
        events(
            (
                "driver.log",
                "(WorkerDict pid=48233, ip=10.0.0.12) gpu-b:48233:48233 [3] NCCL INFO Bootstrap : Using eth0:10.0.0.12<0>",
                {"signal": "bootstrap", "ip": "10.0.0.12"},
            ),
            ("driver.log", f"(WorkerDict pid=48233, ip=10.0.0.12) {t}", f),
            ("driver.log", "(WorkerDict pid=48233, ip=10.0.0.12) Traceback (most recent call last):"),
            ("driver.log", "(WorkerDict pid=48240, ip=10.0.0.12) Traceback (most recent call last):"),
            ("driver.log", "(raylet, ip=10.0.0.12) A worker died or was killed while executing a task"),
        )
    )
    tb = df.filter(pl.col("text").str.contains("pid=48233") & pl.col("text").str.contains("Traceback"))
    assert tb.row(0, named=True)["rank"] == 11 and tb.row(0, named=True)["host"] == "gpu-b"
    other = by_text(df, "pid=48240")
    assert other["rank"] is None and other["host"] == "gpu-b"
    assert "pid 48240 on gpu-b" in other["attribution"]
    raylet = by_text(df, "(raylet")
    assert raylet["rank"] is None and raylet["host"] == "gpu-b"
    assert topo.ip_host == {"10.0.0.12": "gpu-b"}


# --- files -----------------------------------------------------------------------------------------------
def test_file_name_rank_and_its_refutation() -> None:
    df, topo = resolve(
        events(
            ("logs/rank_3.log", "Traceback (most recent call last):"),
            ("logs/rank_0.log", "[rank0]:[E1023 14:02:17.412903117 x.cpp:1] a"),
            ("logs/rank_0.log", "[rank1]:[E1023 14:02:17.412903117 x.cpp:1] b"),
            ("logs/rank_0.log", "plain line"),
        )
    )
    row = by_text(df, "Traceback")
    assert (row["rank"], row["attribution"]) == (3, "file name (file name rank_3.log)")
    plain = by_text(df, "plain line")
    assert plain["rank"] is None
    assert any("rank_0.log: the file name suggests rank 0" in n for n in topo.notes)


def test_single_process_file_inherits_its_pid_rank() -> None:
    t, f = init("node-a", 700, 6, 8)
    df, _ = resolve(
        events(
            ("nccl_debug/node-a.700.log", t, f),
            ("nccl_debug/node-a.700.log", "some line without any prefix"),
        )
    )
    row = by_text(df, "without any prefix")
    assert (row["rank"], row["host"], row["pid"]) == (6, "node-a", 700)


def test_torchrun_log_dir_single_node() -> None:
    t, f = init("node-a", 700, 3, 4, dev=3)
    df, _ = resolve(
        events(
            ("run/none_x/attempt_0/3/stderr.log", "RuntimeError: boom"),
            ("run/none_x/attempt_0/2/stderr.log", "RuntimeError: boom2"),
            ("run/other.log", t, f),
            (
                "run/other.log",
                "node-a:700:700 [3] NCCL INFO comm 0x55aa rank 3 nRanks 4 nNodes 1 localRanks 4 localRank 3 MNNVL 0",
                {"signal": "init", "comm_rank": 3, "nranks": 4, "nnodes": 1, "target_local_rank": 3},
            ),
        )
    )
    assert by_text(df, "boom2")["rank"] == 2
    assert "single-node job" in by_text(df, "boom2")["attribution"]
    assert by_text(df, "boom2")["local_rank"] == 2


# --- torchrun tee / srun ----------------------------------------------------------------------------------
def test_tee_local_rank_learned_per_node() -> None:
    df, _ = resolve(
        events(
            ("slurm-1.out", "0: node-a:900:900 [3] NCCL INFO cudaDriverVersion 12040"),
            ("slurm-1.out", "0: [default3]:[rank3]:[E1023 14:02:17.412903117 x.cpp:1] a"),
            ("slurm-1.out", "0: [default3]:Traceback (most recent call last):"),
            ("slurm-1.out", "1: [default3]:[rank11]:[E1023 14:02:17.412903117 x.cpp:1] b"),
            ("slurm-1.out", "1: [default3]:Fatal Python error: Segmentation fault"),
            ("slurm-1.out", "1: [default5]:Fatal Python error: Aborted"),
        )
    )
    tb = by_text(df, "0: [default3]:Traceback")
    assert tb["rank"] == 3 and "local rank 3 on node-a is rank 3" in tb["attribution"]
    seg = by_text(df, "Segmentation fault")
    assert seg["rank"] == 11 and "srun task 1" in seg["attribution"]
    ab = by_text(df, "Aborted")
    assert ab["rank"] is None and "local rank 5" in ab["attribution"]


def test_srun_tasks_are_ranks_when_consistent() -> None:
    df, _ = resolve(
        events(
            ("slurm-2.out", "0: [rank0]:[E1023 14:02:17.412903117 x.cpp:1] a"),
            ("slurm-2.out", "1: [rank1]:[E1023 14:02:17.412903117 x.cpp:1] b"),
            ("slurm-2.out", "2: RuntimeError: boom"),
            ("slurm-2.out", "1: loss 0.3"),
        )
    )
    assert by_text(df, "2: RuntimeError")["rank"] == 2
    assert by_text(df, "2: RuntimeError")["attribution"] == "srun task 2 (one task per rank)"
    assert by_text(df, "1: loss")["rank"] == 1


def test_srun_tasks_are_nodes_when_a_task_shows_several_ranks() -> None:
    df, topo = resolve(
        events(
            ("slurm-3.out", "0: [rank0]:[E1023 14:02:17.412903117 x.cpp:1] a"),
            ("slurm-3.out", "0: [rank1]:[E1023 14:02:17.412903117 x.cpp:1] b"),
            ("slurm-3.out", "1: [rank2]:[E1023 14:02:17.412903117 x.cpp:1] c"),
            ("slurm-3.out", "1: node-b:55:55 [0] NCCL INFO cudaDriverVersion 12040"),
            ("slurm-3.out", "1: RuntimeError: boom"),
        )
    )
    row = by_text(df, "1: RuntimeError")
    assert row["rank"] is None and row["host"] == "node-b"
    assert row["attribution"] == "no rank evidence: srun task 1 runs several ranks (tasks are nodes)"
    assert any("srun tasks are nodes" in n for n in topo.notes)


# --- process groups -----------------------------------------------------------------------------------------
def test_pg_rank_is_not_a_global_rank() -> None:
    df, _ = resolve(
        events(
            (
                "a.log",
                "[E1023 14:02:17.412903117 ProcessGroupNCCL.cpp:1] [PG 1 Rank 0] Exception (either an error or timeout) detected by watchdog at work: 6, last enqueued NCCL work: 6, last completed NCCL work: 5.",
            ),
            (
                "a.log",
                "[E1023 14:02:17.412903117 ProcessGroupNCCL.cpp:1] [PG 0 (default_pg) Rank 3] Exception x",
            ),
            ("a.log", "[E ProcessGroupNCCL.cpp:474] [Rank 5] Watchdog caught collective operation timeout"),
        )
    )
    sub = by_text(df, "[PG 1 Rank 0]")
    assert sub["rank"] is None and sub["pg"] == "1" and sub["pg_rank"] == 0
    assert "rank inside process group 1" in sub["attribution"]
    assert by_text(df, "default_pg")["rank"] == 3
    work = by_text(df, "[Rank 5]")
    assert work["rank"] is None and "other groups exist" in work["attribution"]


def test_workncc_rank_assumed_default_when_no_other_group() -> None:
    df, _ = resolve(
        events(
            ("a.log", "[E ProcessGroupNCCL.cpp:474] [Rank 5] Watchdog caught collective operation timeout")
        )
    )
    row = df.row(0, named=True)
    assert row["rank"] == 5 and row["pg_rank"] == 5
    assert "taken as the default group" in row["attribution"]


# --- torchrun ChildFailedError ----------------------------------------------------------------------------------
def test_childfailed_block_teaches_pid_host_and_local_rank() -> None:
    rc = {"signal": "root_cause"}
    df, topo = resolve(
        events(
            (
                "launcher.log",
                "  host      : gpu-node-07.cluster.local",
                {**rc, "target_host": "gpu-node-07.cluster.local"},
            ),
            (
                "launcher.log",
                "  rank      : 3 (local_rank: 3)",
                {**rc, "target_rank": 3, "target_local_rank": 3},
            ),
            ("launcher.log", "  exitcode  : -6 (pid: 48233)", {**rc, "target_pid": 48233}),
            (
                "other.log",
                "gpu-node-07:48233:48240 [3] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed",
            ),
            ("other.log", "gpu-node-07:48299:48299 [2] NCCL INFO something"),
        )
    )
    assert by_text(df, "NCCL WARN")["rank"] == 3
    assert "ChildFailedError" in by_text(df, "NCCL WARN")["attribution"]
    assert by_text(df, "48299")["rank"] is None
    assert topo.pid_rank[("gpu-node-07", 48233)] == 3


# --- time ------------------------------------------------------------------------------------------------------
def test_year_from_same_file_then_host_then_dataset() -> None:
    df, topo = resolve(
        events(
            ("a.log", "[2025-10-23 14:02:17] node-a:1:1 [0] misc/socket.cc:50 NCCL WARN x"),
            ("a.log", "[rank0]:[E1023 14:05:00.000000001 x.cpp:1] same file"),
            ("b.log", "node-a:1:1 [0] NCCL INFO y"),
            ("c.log", "[rank1]:[E1023 14:06:00.000000001 x.cpp:1] dataset"),
        )
    )
    assert by_text(df, "same file")["time"] == datetime(2025, 10, 23, 14, 5, 0)
    assert by_text(df, "dataset")["time"] == datetime(2025, 10, 23, 14, 6, 0)
    assert not topo.notes


def test_year_rolls_over_new_year() -> None:
    df, _ = resolve(
        events(
            ("a.log", "[2025-12-31 23:59:50] node-a:1:1 [0] misc/socket.cc:50 NCCL WARN x"),
            ("a.log", "[rank0]:[E101 00:00:10.000000001 x.cpp:1] after midnight"),
        )
    )
    assert by_text(df, "after midnight")["time"] == datetime(2026, 1, 1, 0, 0, 10)


def test_no_year_anywhere_keeps_the_placeholder_year_with_a_note() -> None:
    df, topo = resolve(events(("a.log", "[rank0]:[E1023 14:05:00.000000001 x.cpp:1] lonely")))
    assert df.row(0, named=True)["time"] == datetime(PLACEHOLDER_YEAR, 10, 23, 14, 5, 0)
    assert any("without a year" in n for n in topo.notes)


def test_feb_29_in_a_non_leap_year_is_dropped() -> None:
    df, _ = resolve(events(("run_20250301/a.log", "[rank0]:[E229 10:00:00.000000001 x.cpp:1] leap")))
    assert df.row(0, named=True)["time"] is None


# --- world size and shape ---------------------------------------------------------------------------------------------
def test_world_size_disagreement_is_recorded() -> None:
    t, f = init("node-a", 7, 0, 16)
    _, topo = resolve(
        events(("a.log", t, f), ("a.log", "init_process_group rank: 0, world_size: 8", {"world_size": 8}))
    )
    assert topo.world_size == 16
    assert topo.world_size_disagreements == (
        "world_size 8 printed, but the largest NCCL communicator has 16 ranks",
    )


def test_empty_table() -> None:
    df, topo = resolve(events())
    assert df.height == 0 and "attribution" in df.columns and topo.world_size is None
    assert not [c for c in df.columns if c.startswith("_")]


def test_missing_optional_columns_are_derived() -> None:
    full = gf_bench()
    slim = full.drop(
        [
            c
            for c in full.columns
            if c
            in (
                "_layers",
                "_rank_kind",
                "_src",
                "_logger",
                "_pg_desc",
                "_file_year",
                "_file_attempt",
                "_file_single",
            )
        ]
    )
    a, _ = resolve(full)
    b, _ = resolve(slim)
    assert a.equals(b)


# --- more evidence kinds -----------------------------------------------------------------------------
def test_single_process_driving_several_gpus_maps_ranks_by_device() -> None:
    rows = []
    for d in range(4):
        t, f = init("sxm-7", 61022, d, 4, dev=d, comm_id="0x5b8e")
        rows.append(("nccl_sxm-7_61022.log", t, {**f, "cuda_dev": d}))
    rows.append(
        ("nccl_sxm-7_61022.log", "sxm-7:61022:61050 [3] misc/socket.cc:49 NCCL WARN socketProgress: closed")
    )
    rows.append(("nccl_sxm-7_61022.log", "sxm-7:61022:61022 NCCL CALL ncclCommInitAll(0x1)"))
    df, _ = resolve(events(*rows))
    warn = by_text(df, "NCCL WARN")
    assert warn["rank"] == 3 and "drives several GPUs; device [3] is rank 3 of 4" in warn["attribution"]
    call = by_text(df, "NCCL CALL")
    assert call["rank"] is None and "drives several GPUs (ranks 0, 1, 2, 3)" in call["attribution"]


def test_ring_and_tree_lines_name_the_process_rank_without_init_lines() -> None:
    df, topo = resolve(
        events(
            ("n.log", "dgx-2:8838:8991 [7] NCCL INFO Trees [0] -1/-1/-1->15->14 [1] -1/-1/-1->15->14"),
            (
                "n.log",
                "dgx-2:8838:9108 [7] NCCL INFO Channel 01/0 : 15[bd000] -> 0[7000] [send] via NET/Socket/1",
            ),
            (
                "n.log",
                "dgx-2:8839:9108 [0] NCCL INFO Channel 01/0 : 15[bd000] -> 8[7000] [receive] via NET/Socket/1",
            ),
            ("n.log", "dgx-2:8838:9108 [7] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect failed"),
        )
    )
    assert by_text(df, "NCCL WARN")["rank"] == 15
    assert by_text(df, "NCCL WARN")["attribution"] == "NCCL ring/tree lines: pid 8838 on dgx-2 is rank 15"
    assert by_text(df, "[receive]")["rank"] == 8
    assert topo.pid_rank[("dgx-2", 8838)] == 15


def test_named_process_tables_teach_pids() -> None:
    df, _ = resolve(
        events(
            (
                "driver.log",
                "(TorchTrainer pid=31882) - (ip=10.13.40.12, pid=18204) world_rank=4, local_rank=0, node_rank=1",
            ),
            (
                "driver.log",
                "(RayTrainWorker pid=18204, ip=10.13.40.12) hpc-3:18204:18204 [0] NCCL INFO Bootstrap : Using ib0:10.13.40.12<0>",
            ),
            (
                "driver.log",
                "(RayTrainWorker pid=18204, ip=10.13.40.12) hpc-3:18204:18260 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: x",
            ),
            ("tests.out", "#   Rank  1 Pid  14403 on  ws-a6k device  1 [0x1b] NVIDIA RTX A6000"),
            ("tests.out", " .. ws-a6k pid 14403: Test failure common.cu:364"),
        )
    )
    assert by_text(df, "NCCL WARN")["rank"] == 4
    row = by_text(df, "Test failure")
    assert (row["rank"], row["host"], row["pid"]) == (1, "ws-a6k", 14403)


def test_mp_spawn_reraise_block_belongs_to_the_failed_process() -> None:
    t0, f0 = init("box", 100, 0, 2)
    df, _ = resolve(
        events(
            ("nccl_logs_box_100.txt", t0, f0),
            (
                "nccl_logs_box_100.txt",
                "box:100:100 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0",
                {"signal": "init", "comm_rank": 0, "nranks": 2, "nnodes": 1, "target_local_rank": 0},
            ),
            (
                "stdout.log",
                "-- Process 1 terminated with the following error:",
                {"target_local_rank": 1, "signal": "process_exit"},
            ),
            ("stdout.log", "Traceback (most recent call last):"),
            ("stdout.log", '  File "x.py", line 1, in <module>'),
            ("stdout.log", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1024.00 MiB."),
            ("stdout.log", "Total elapsed time: 18.80 seconds"),
        )
    )
    oom = by_text(df, "OutOfMemoryError")
    assert oom["rank"] == 1 and "mp.spawn re-raises the error of process 1" in oom["attribution"]
    assert by_text(df, "Total elapsed")["rank"] is None


def test_exception_text_and_progress_bar_tails() -> None:
    df, _ = resolve(
        events(
            (
                "a.log",
                "RuntimeError: NCCL communicator was aborted on rank 3.  Original reason for failure was: [Rank 3] Watchdog caught collective operation timeout",
            ),
            (
                "a.log",
                "  what():  [PG 0 (default_pg) Rank 9] Process group watchdog thread terminated with exception",
            ),
            (
                "b.log",
                " 10%|█         | 312/2976 [33:12<4:43:33,  6.39s/it][rank5]: Traceback (most recent call last):",
            ),
        )
    )
    assert by_text(df, "was aborted on rank 3")["rank"] == 3  # the only group seen is the default one
    assert by_text(df, "what():")["rank"] == 9
    assert by_text(df, "[rank5]: Traceback")["rank"] == 5


def test_srun_tasks_without_any_rank_evidence() -> None:
    df, topo = resolve(
        events(
            ("slurm-9.out", " 5: | gn102 | SLURM_PROCID=5 SLURM_LOCALID=1"),
            ("slurm-9.out", " 7: | gn102 | SLURM_PROCID=7 SLURM_LOCALID=3"),
            ("slurm-9.out", "srun: error: gn103: tasks 8-11: Terminated"),
        )
    )
    assert by_text(df, "SLURM_PROCID=5")["rank"] == 5
    assert by_text(df, "srun: error")["rank"] is None
    assert any("srun tasks taken as ranks" in n for n in topo.notes)


def test_a_host_with_one_rank_gives_it_to_host_only_lines() -> None:
    t, f = init("roce-n19", 27715, 1, 2)
    df, _ = resolve(
        events(
            ("nccl_roce-n19_27715.log", t, f),
            ("all_reduce_perf.out", "roce-n19: Test NCCL failure common.cu:283 'unhandled system error'"),
            (
                "all_reduce_perf.out",
                "Oct 23 14:02:17 roce-n19 kernel: NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
            ),
        )
    )
    assert by_text(df, "Test NCCL failure")["rank"] == 1
    assert by_text(df, "Test NCCL failure")["attribution"] == "the only rank seen on roce-n19 is 1"
    xid = by_text(df, "NVRM")
    assert xid["rank"] is None and xid["host"] == "roce-n19"
