"""Line prefixes, file names and timestamps: every layer of formats.md §1 alone and stacked."""

from __future__ import annotations

from datetime import datetime

import pytest

from nccllog.attribution.layers import LineAttrs, clean_text, parse_line
from nccllog.attribution.paths import attrs_from_path
from nccllog.ingest.timestamps import PartialTime, parse_timestamp, parse_uptime

WATCHDOG = (
    "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1024, "
    "NumelOut=1024, Timeout(ms)=600000) ran for 600128 milliseconds before timing out."
)


def _p(line: str) -> LineAttrs:
    a = parse_line(line)
    assert clean_text(line).endswith(a.message) or a.repeat > 1
    return a


# --- c10 / Python logger / rank prefix ----------------------------------------------------------
def test_c10_24_with_rank_and_workncc_prefix() -> None:
    a = _p(f"[rank5]:[E1023 14:02:17.412903117 ProcessGroupNCCL.cpp:632] [Rank 5] {WATCHDOG}")
    assert (a.rank, a.rank_kind, a.level, a.src) == (5, "prefix", "E", "ProcessGroupNCCL.cpp:632")
    assert a.message == f"[Rank 5] {WATCHDOG}"
    assert (a.pg, a.pg_rank) == (None, 5)  # WorkNCCL prefix: a group rank, group unnamed
    # the 9 digits are the wall clock's nanoseconds, kept to the microsecond
    assert a.time == PartialTime(None, 10, 23, 14, 2, 17, 412903, True)


def test_c10_legacy_forms() -> None:
    a = _p(f"[E ProcessGroupNCCL.cpp:474] [Rank 5] {WATCHDOG}")
    assert (a.rank, a.level, a.src, a.pg_rank, a.time) == (None, "E", "ProcessGroupNCCL.cpp:474", 5, None)
    b = _p(f"[rank5]:[E ProcessGroupNCCL.cpp:563] [Rank 5] {WATCHDOG}")
    assert (b.rank, b.message) == (5, f"[Rank 5] {WATCHDOG}")


def test_c10_unpadded_month_and_optional_tid() -> None:
    a = _p("[rank1]:[W307 09:05:01.000000001 socket.cpp:663] [c10d] The server socket has failed")
    assert (a.time.month, a.time.day) == (3, 7)
    assert a.message == "[c10d] The server socket has failed"
    b = _p("[rank2]:[E1122 10:15:27.724333 48211 socket.cpp:1028] [c10d] The client socket has timed out")
    assert (b.rank, b.tid, b.time.microsecond, b.time.subsecond) == (2, 48211, 724333, True)


def test_glog_form_number_is_a_thread_id() -> None:
    a = _p("E1023 14:02:17.412903 12345 ProcessGroupNCCL.cpp:12] boom")
    assert (a.level, a.tid, a.pid, a.rank, a.message) == ("E", 12345, None, None, "boom")
    assert a.time == PartialTime(None, 10, 23, 14, 2, 17, 412903, True)


def test_python_logger_25_pid_and_23_thread_ident() -> None:
    a = _p("[rank3]:E1023 14:02:17.123000 4812 torch/distributed/distributed_c10d.py:12] msg")
    assert (a.rank, a.pid, a.tid, a.layers) == (3, 4812, None, ("rank", "pylog"))
    b = _p("[rank3]:E1023 14:02:17.123000 140183275505472 torch/distributed/distributed_c10d.py:12] msg")
    assert (b.pid, b.tid) == (None, 140183275505472)


def test_torchrun_agent_line_has_pid_but_no_rank() -> None:
    a = _p(
        "W1023 14:02:20.514000 48211 torch/distributed/elastic/multiprocessing/api.py:897] "
        "Sending process 48230 closing signal SIGTERM"
    )
    assert (a.rank, a.pid, a.level) == (None, 48211, "W")
    assert a.message == "Sending process 48230 closing signal SIGTERM"


def test_python_logger_21_and_plain_logging() -> None:
    a = _p("[rank3]:[2025-10-23 14:02:17,123] torch.distributed.elastic.x: [ERROR] boom")
    assert (a.rank, a.level, a.logger, a.message) == (3, "ERROR", "torch.distributed.elastic.x", "boom")
    assert a.time == PartialTime(2025, 10, 23, 14, 2, 17, 123000, True)
    b = _p(
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 (pid: 2694) "
        "of binary: /usr/bin/python"
    )
    assert b.logger == "torch.distributed.elastic.multiprocessing.api"
    assert b.message.startswith("failed (exitcode: 1)")


def test_rank_prefix_with_space_keeps_traceback_indentation() -> None:
    assert _p("[rank0]: Traceback (most recent call last):").message == "Traceback (most recent call last):"
    assert (
        _p('[rank0]:   File "train.py", line 10, in <module>').message
        == '  File "train.py", line 10, in <module>'
    )


# --- PG prefix (read, kept) ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("prefix", "pg", "desc", "pg_rank"),
    [
        ("[PG ID 0 PG GUID 0(default_pg) Rank 3] ", "0", "default_pg", 3),
        ("[PG ID 2 PG GUID 5 Rank 1] ", "5", None, 1),
        ("[PG 0 (default_pg) Rank 3] ", "0", "default_pg", 3),
        ("[PG 1 Rank 0] ", "1", None, 0),
        ("[Rank 5] ", None, None, 5),
    ],
)
def test_pg_prefix_is_read_and_kept(prefix: str, pg: str | None, desc: str | None, pg_rank: int) -> None:
    msg = f"{prefix} failure detected by watchdog at work sequence id: 9"
    a = _p(f"[rank11]:[E1023 14:02:17.412903117 ProcessGroupNCCL.cpp:1896] {msg}")
    assert (a.pg, a.pg_desc, a.pg_rank) == (pg, desc, pg_rank)
    assert a.rank == 11  # the global rank is the [rankN]: prefix, never the PG rank
    assert a.message == msg


# --- NCCL ------------------------------------------------------------------------------------------
def test_nccl_info_header() -> None:
    a = _p("gpu-node-07:48233:48233 [3] NCCL INFO Bootstrap : Using eth0:10.0.0.17<0>")
    assert (a.host, a.pid, a.tid, a.nccl_dev, a.level) == ("gpu-node-07", 48233, 48233, 3, "INFO")
    assert a.rank is None  # [dev] is a CUDA ordinal, not a rank
    assert a.message == "Bootstrap : Using eth0:10.0.0.17<0>"


def test_nccl_warn_forms() -> None:
    a = _p(
        "gpu-node-07:48233:49102 [3] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer "
        "10.0.0.21<40917> with error 12, opcode 0, len 0, vendor err 129 (Recv)"
    )
    assert (a.level, a.src, a.tid) == ("WARN", "transport/net_ib.cc:1295", 49102)
    assert a.message.startswith("NET/IB : Got completion from peer")
    b = _p(
        "[2025-10-23 14:02:17] gpu-node-07:48233:49102 [3] misc/socket.cc:58 (socketProgress) NCCL WARN "
        "socketProgress: Connection closed by remote peer 10.0.0.21<56033>"
    )
    assert (b.func, b.src, b.time) == (
        "socketProgress",
        "misc/socket.cc:58",
        PartialTime(2025, 10, 23, 14, 2, 17, 0, False),
    )
    assert b.message == "socketProgress: Connection closed by remote peer 10.0.0.21<56033>"


def test_nccl_call_trace_and_crlf() -> None:
    a = _p("1eb576079025:21239:21239 NCCL CALL ncclGetUniqueId(0xf4bc1499541ae03)\r\n")
    assert (a.host, a.pid, a.level, a.nccl_dev, a.message) == (
        "1eb576079025",
        21239,
        "CALL",
        None,
        "ncclGetUniqueId(0xf4bc1499541ae03)",
    )
    b = _p("gpu-node-07:48233:48233 [3] 1234.567890 ncclProxyProgress:120 NCCL TRACE progress")
    assert (b.level, b.message) == ("TRACE", "progress")


def test_nccl_229_global_rank_on_init_line() -> None:
    a = _p(
        "gpu-node-07:48233:48233 [3] NCCL INFO [Rank 11] ncclCommInitRankConfig comm 0x5599c2a41f60 rank 3 "
        "nranks 16 cudaDev 3 nvmlDev 3 busId 5d000 commId 0x7e3a5b2c9d104f21 - Init START"
    )
    assert (a.rank, a.rank_kind, a.pg_rank) == (11, "nccl", None)


# --- launcher layers ---------------------------------------------------------------------------------
def test_fully_stacked_example_of_formats_md() -> None:
    a = _p(
        "1: [default3]:[rank11]:[E1023 14:02:17.412903117 ProcessGroupNCCL.cpp:1896] [PG ID 0 PG GUID "
        "0(default_pg) Rank 11]  failure detected by watchdog at work sequence id: 4812 PG status: last "
        "enqueued work: 4813, last completed work: 4811"
    )
    assert a.layers == ("srun", "tee", "rank", "c10")
    assert (a.srun_task, a.local_rank, a.rank, a.pg, a.pg_rank) == (1, 3, 11, "0", 11)
    assert a.message.startswith("[PG ID 0 PG GUID 0(default_pg) Rank 11]  failure detected")


@pytest.mark.parametrize(
    ("label", "task"), [("3: ", 3), ("03: ", 3), (" 3: ", 3), ("15: ", 15), ("P1  3: ", 3)]
)
def test_srun_labels(label: str, task: int) -> None:
    a = _p(f"{label}[rank{task}]:[E1023 14:02:17.412903117 socket.cpp:1028] x")
    assert (a.srun_task, a.rank, a.message) == (task, task, "x")


def test_torchrun_tee_any_role_no_space() -> None:
    a = _p("[default3]:hello world")
    assert (a.local_rank, a.tee_role, a.message, a.rank) == (3, "default", "hello world", None)
    b = _p("[trainer12]:[rank44]: Traceback (most recent call last):")
    assert (b.local_rank, b.tee_role, b.rank) == (12, "trainer", 44)
    c = _p("[default1]:Fatal Python error: Segmentation fault")
    assert c.message == "Fatal Python error: Segmentation fault"


@pytest.mark.parametrize(
    "host", ["10.0.0.12", "gpu-node-07", "trn12", "node-3.cluster.local", "1eb576079025"]
)
def test_pdsh_hosts(host: str) -> None:
    a = _p(f"{host}: [rank9]:[E1023 14:02:17.412903117 ProcessGroupNCCL.cpp:632] [Rank 9] {WATCHDOG}")
    assert (a.host, a.rank, a.layers[0]) == (host, 9, "pdsh")


@pytest.mark.parametrize(
    "line",
    [
        "Traceback (most recent call last):",
        "ERROR: something failed",
        "Warning: deprecated",
        'File "x.py", line 3: oops',
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
        "python3: can't open file 'train.py': [Errno 2] No such file or directory",
        "srun: error: gpu-node-07: task 3: Exited with exit code 1",
        "error: [Errno 2] No such file",
        "step-100: loss 0.1",
        "2025-10-23: started",
        "usage: train.py [-h]",
        "  host      : gpu-node-07.cluster.local",
    ],
)
def test_pdsh_false_positives(line: str) -> None:
    a = _p(line)
    assert a.host is None and "pdsh" not in a.layers
    assert a.message == line


def test_pdsh_plain_word_only_before_a_known_prefix() -> None:
    assert _p("worker: [rank3]:x").host == "worker"
    assert _p("worker: hello").host is None


def test_ray_prefixes_ansi_and_dedup() -> None:
    a = _p(
        f"\x1b[36m(WorkerDict pid=48233, ip=10.0.0.12)\x1b[0m [rank3]:[E1023 14:02:17.412903117 "
        f"ProcessGroupNCCL.cpp:632] [Rank 3] {WATCHDOG}"
    )
    assert (a.ray_actor, a.pid, a.ip, a.rank, a.repeat) == ("WorkerDict", 48233, "10.0.0.12", 3, 1)
    b = parse_line(
        "(WorkerDict pid=48236, ip=10.0.0.12) [rank6]:[E1023 14:02:17.413305881 ProcessGroupNCCL.cpp:2168] "
        "[PG ID 0 PG GUID 0(default_pg) Rank 6]  failure detected by watchdog at work sequence id: 311 PG status: "
        "last enqueued work: 312, last completed work: 310\x1b[32m [repeated 7x across cluster]\x1b[0m"
    )
    assert b.repeat == 8
    assert b.message.endswith("last completed work: 310")


def test_ray_first_time_dedup_notice() -> None:
    a = parse_line(
        "(RayWorkerWrapper pid=48512, ip=10.0.0.13) INFO worker ready [repeated 3x across cluster] (Ray "
        "deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to disable log deduplication, or see "
        "https://docs.ray.io/en/master/ray-observability/user-guides/configure-logging.html#log-deduplication "
        "for more options.)"
    )
    assert (a.repeat, a.message) == (4, "INFO worker ready")


def test_ray_nested_and_system_prefixes() -> None:
    a = _p("(WorkerDict pid=48211, ip=10.0.0.12) (EngineCore_DP0 pid=48340) (RayWorkerWrapper pid=48512) hi")
    assert (a.pid, a.ip, a.ray_actor, a.layers) == (48512, "10.0.0.12", "RayWorkerWrapper", ("ray",) * 3)
    assert _p("(pid=4812) x").pid == 4812
    b = _p("(raylet, ip=10.0.0.12) A worker died or was killed while executing a task")
    assert (b.pid, b.ip, b.message) == (
        None,
        "10.0.0.12",
        "A worker died or was killed while executing a task",
    )
    assert _p("(autoscaler +1m3s) Tip: use `ray status`").message == "Tip: use `ray status`"


def test_other_escape_sequences_are_neutralised() -> None:
    a = _p(
        "\x1b]0;title\x07\x1b[2K\x1b[1A[rank2]:[E1023 14:02:17.412903117 x.cpp:1] \x1b]8;;http://e\x1b\\link\x1b]8;;\x1b\\"
    )
    assert (a.rank, a.message) == (2, "link")


# --- kernel layers ----------------------------------------------------------------------------------
def test_journald_dmesg_forms() -> None:
    a = _p(
        "Oct 23 14:02:17 gpu-node-07 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    )
    assert (a.host, a.time, a.message[:10]) == (
        "gpu-node-07",
        PartialTime(None, 10, 23, 14, 2, 17, 0, False),
        "NVRM: Xid ",
    )
    b = _p("[ 8123.456789] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.")
    assert (b.uptime, b.time, b.message[:4]) == (8123.456789, None, "NVRM")
    c = _p("[Thu Oct 23 14:02:17 2025] NVRM: Xid (PCI:0000:3b:00): 48, pid=4812, name=python, Ch 00000010")
    assert c.time == PartialTime(2025, 10, 23, 14, 2, 17, 0, False)
    d = _p("Mar  7 09:05:01 node3 python3[4812]: hello")
    assert (d.host, d.pid, d.time.day, d.message) == ("node3", 4812, 7, "hello")


def test_deepspeed_logger_and_log_dist() -> None:
    a = _p(
        "[2025-10-23 14:02:20,715] [ERROR] [launch.py:325:sigkill_handler] ['/opt/conda/envs/train/bin/python', "
        "'-u', 'train.py', '--local_rank=1'] exits with return code = -6"
    )
    assert (a.level, a.src, a.func, a.rank) == ("ERROR", "launch.py:325", "sigkill_handler", None)
    assert a.message.startswith("['/opt/conda")
    b = _p("10.0.0.12: [2025-10-23 14:02:20,715] [INFO] [logging.py:96:log_dist] [Rank 3] step=10, skipped=0")
    assert (b.host, b.rank, b.rank_kind, b.pg_rank) == ("10.0.0.12", 3, "log_dist", None)
    assert b.message == "[Rank 3] step=10, skipped=0"


def test_application_rank_prefixes() -> None:
    a = _p("Rank 0: RuntimeError: CUDA out of memory. Tried to allocate 1024.00 MiB.")
    assert (a.rank, a.rank_kind, a.message[:8]) == (0, "app", "Rank 0: ")
    b = _p(
        "INFO:torch.distributed.distributed_c10d:Rank 3: Completed store-based barrier for key:"
        "store_based_barrier_key:1 with 8 nodes."
    )
    assert (b.rank, b.rank_kind) == (3, "app")
    assert _p("[rank: 1] Seed set to 42").rank == 1
    assert _p("Ranks 0: x").rank is None
    c = _p("[rank2]:Rank 0: sent")  # the direct prefix wins over the application text
    assert (c.rank, c.rank_kind) == (2, "prefix")


def test_plain_lines_pass_through() -> None:
    for line in [
        "",
        "hello",
        '  File "x", line 1',
        "[0]:",
        "NCCL version 2.20.5+cuda12.4",
        "\t - [3] Timeout",
    ]:
        a = _p(line)
        assert a.message == line and a.layers == () and a.rank is None


def test_huge_numbers_become_null() -> None:
    a = _p("[rank99999999999999999999]: x")
    assert (a.rank, a.message) == (None, "x")
    b = _p("host:99999999999999999999:1 [0] NCCL INFO x")
    assert b.pid is None


# --- file names ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("path", "rank", "local", "host", "pid", "attempt"),
    [
        ("logs/rank_3.log", 3, None, None, None, None),
        ("rank3.txt", 3, None, None, None, None),
        ("rank-3.out", 3, None, None, None, None),
        ("worker_3.log", 3, None, None, None, None),
        ("out/log_rank_3", 3, None, None, None, None),
        ("rank_3/stderr.log", 3, None, None, None, None),
        ("job/node0_rank3/stdout.log", 3, None, None, None, None),
        ("fixtures/ts-eval-rank0-silent-broadcast/logs/launch.log", None, None, None, None, None),
        ("runs/local_rank_2/out.txt", None, 2, None, None, None),
        ("node_rank_1.log", None, None, None, None, None),
        ("rank_0-7.log", None, None, None, None, None),
        ("local_rank_2.log", None, 2, None, None, None),
        ("/tmp/torchelastic_x/none_ab/attempt_0/3/stderr.log", None, 3, None, None, 0),
        ("run/attempt_1/0/error.json", None, 0, None, None, 1),
        ("run/attempt_2/filtered_stdout.log", None, None, None, None, 2),
        ("runs/x/nccl_logs_1eb576079025_21239.txt", None, None, "1eb576079025", 21239, None),
        ("nccl_gpu-node-07.48233.log", None, None, "gpu-node-07", 48233, None),
        ("nccl.node3.4812", None, None, "node3", 4812, None),
        ("nccl_logs/node-3.4812.log", None, None, "node-3", 4812, None),
        # a folder further up names the checkout or the job, not how NCCL named the file
        ("/home/u/nccllog/fixtures/x/logs/stderr.88213", None, None, None, None, None),
        ("nccl-runs/job7/logs/node-3.4812.log", None, None, None, None, None),
        ("train.log.1", None, None, None, None, None),
        ("core.12345", None, None, None, None, None),
        ("dmesg_gpu-node-07.log", None, None, "gpu-node-07", None, None),
        ("host=node-3/train.log", None, None, "node-3", None, None),
        ("logs/node-3/train.log", None, None, None, None, None),
    ],
)
def test_file_names(
    path: str, rank: int | None, local: int | None, host: str | None, pid: int | None, attempt: int | None
) -> None:
    fa = attrs_from_path(path)
    assert (fa.rank, fa.local_rank, fa.host, fa.pid, fa.attempt) == (rank, local, host, pid, attempt)
    assert bool(fa.evidence) == any(x is not None for x in (rank, local, host, pid, attempt))


def test_year_from_path() -> None:
    assert attrs_from_path("phase2_runs/oom_trial_1_0_2_20260323_005000/stderr.log").year == 2026
    assert attrs_from_path("run_2025-10-23/slurm-1234.out").year == 2025
    assert attrs_from_path("run_20251399/x.log").year is None


# --- timestamps ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("1023 14:02:17.412903117", PartialTime(None, 10, 23, 14, 2, 17, 412903, True)),
        ("E307 09:05:01.000000001", PartialTime(None, 3, 7, 9, 5, 1, 0, True)),
        ("1023 14:02:17.412903", PartialTime(None, 10, 23, 14, 2, 17, 412903, True)),
        ("2025-10-23 14:02:17,123", PartialTime(2025, 10, 23, 14, 2, 17, 123000, True)),
        ("[2025-10-23 14:02:17]", PartialTime(2025, 10, 23, 14, 2, 17, 0, False)),
        ("2025-10-23T14:02:17.123456789Z", PartialTime(2025, 10, 23, 14, 2, 17, 123456, True)),
        ("2025-10-23T14:02:17+02:00", PartialTime(2025, 10, 23, 14, 2, 17, 0, False, 120)),  # 12:02:17 UTC
        ("2025-10-23_14:02:20", PartialTime(2025, 10, 23, 14, 2, 20, 0, False)),
        ("Oct 23 14:02:17", PartialTime(None, 10, 23, 14, 2, 17, 0, False)),
        ("Mar  7 14:02:17", PartialTime(None, 3, 7, 14, 2, 17, 0, False)),
        ("Thu Oct 23 14:02:17 2025", PartialTime(2025, 10, 23, 14, 2, 17, 0, False)),
        ("2025/10/23 14:02:17.5", PartialTime(2025, 10, 23, 14, 2, 17, 500000, True)),
    ],
)
def test_timestamp_forms(text: str, want: PartialTime) -> None:
    assert parse_timestamp(text) == want


@pytest.mark.parametrize(
    "text",
    ["", "hello", "[  123.456789]", "1323 14:02:17.412903117", "2025-02-30 10:00:00", "0230 10:00:00.000000"],
)
def test_timestamp_rejects(text: str) -> None:
    assert parse_timestamp(text) is None


def test_uptime_is_kept_apart() -> None:
    assert parse_uptime("[  123.456789]") == pytest.approx(123.456789)
    assert parse_uptime("[Thu Oct 23 14:02:17 2025]") is None


def test_partial_time_completion() -> None:
    t = PartialTime(None, 2, 29, 1, 2, 3)
    assert t.complete() is None
    assert t.complete(2024) == datetime(2024, 2, 29, 1, 2, 3)
    assert t.complete(2025) is None
    assert t.placeholder() == datetime(2000, 2, 29, 1, 2, 3)
