"""The correlation engine, one case of the diagnosis issue at a time, on synthetic events."""

from __future__ import annotations

import time

import polars as pl
import pytest
from correlate_events import Log

from nccllog.attribution import Topology
from nccllog.correlate import wording
from nccllog.correlate.network import pci_bus, strip_port
from nccllog.model import CONFIDENCES


def at_least(conf: str, level: str) -> bool:
    return CONFIDENCES.index(conf) >= CONFIDENCES.index(level)


def world(log: Log, n: int, *, host: str = "node-a") -> Log:
    for r in range(n):
        log.init(r, n, host=host, bus=f"{(r + 1) * 16:x}000", dev=r)
    return log


# --------------------------------------------------------------------------- hangs


def test_n_minus_1_timeouts_name_the_silent_rank() -> None:
    log = world(Log(), 8)
    for r in (0, 2, 3, 4, 5, 6, 7):
        log.timeout(r, 1580, at=600 + r * 0.01)
    inc = log.diagnose()
    v = inc.verdict
    assert (v.category, v.culprit_ranks) == ("straggler_hang", (1,))
    assert (
        v.summary
        == "Rank 1 never reached ALLREDUCE #1580 of the default group; ranks 0,2-7 waited 600 s for it."
    )
    assert at_least(v.confidence, "high")
    row = inc.collectives[0]
    assert (row.seq, row.silent, row.reporters) == (1580, (1,), (0, 2, 3, 4, 5, 6, 7))
    info = {r.rank: r for r in inc.ranks}
    assert info[1].status == "silent" and info[0].timed_out_seq == 1580
    # The alternative reading is there, scored lower, and explained.
    alt = [h for h in inc.hypotheses if h.category == "config_timeout_too_short"]
    assert alt and alt[0].score < v.score and alt[0].rules_out


def test_silent_rank_without_any_log_lowers_confidence() -> None:
    log = Log()
    for r in range(8):
        if r != 5:
            log.init(r, 8, host="node-a")
            log.timeout(r, 12)
    v = log.diagnose().verdict
    assert (v.category, v.culprit_ranks) == ("straggler_hang", (5,))
    assert "no log found" in v.summary
    assert v.confidence != "high"


def test_last_enqueued_skew_names_the_rank_that_never_enqueued() -> None:
    log = world(Log(), 4)
    for r in range(3):
        log.timeout(r, 100, at=600)
        log.status(r, 100, 100, 99)
    # every rank times out: rank 3 in another group, where it is stuck; its default-group work is behind
    log.timeout(3, 40, pg="3", at=600)
    log.status(3, 40, 40, 39, pg="3")
    log.add("work_status", rank=3, at=600.2, last_enqueued=95, last_completed=95, pg="0")
    v = log.diagnose().verdict
    assert (v.category, v.culprit_ranks) == ("straggler_hang", (3,))
    assert any("#95" in x for x in v.rules_in)
    assert any("process group 3" in x for x in v.rules_in)


def test_enqueued_but_stuck_is_an_ordering_mismatch() -> None:
    log = world(Log(), 4)
    for r in range(4):
        log.timeout(r, 347, op="_ALLGATHER_BASE", timeout_ms=1800000, elapsed_ms=1800100)
        log.status(r, 347, 347 if r == 0 else 627, 346)
    v = log.diagnose().verdict
    assert (v.category, v.culprit_ranks) == ("collective_mismatch", (0,))
    assert "#627" in v.summary


def test_size_mismatch_names_the_odd_one_out() -> None:
    log = world(Log(), 4)
    for r in range(4):
        log.timeout(r, 312, numel=2048 if r != 2 else 1024)
    v = log.diagnose().verdict
    assert (v.category, v.culprit_ranks) == ("collective_mismatch", (2,))
    assert "1024 elements" in v.summary and "2048 elements" in v.summary


def test_op_mismatch_names_the_odd_one_out() -> None:
    log = world(Log(), 4)
    for r in range(4):
        log.timeout(r, 80078, op="BROADCAST" if r == 3 else "ALLREDUCE", numel=5056 if r == 3 else 2106881)
    v = log.diagnose().verdict
    assert (v.category, v.culprit_ranks) == ("collective_mismatch", (3,))
    assert "BROADCAST" in v.summary and "ALLREDUCE" in v.summary


def test_seq_skew_without_majority_names_nobody() -> None:
    log = world(Log(), 2)
    log.timeout(0, 315, op="ALLREDUCE", numel=1)
    log.timeout(1, 313, op="_ALLGATHER_BASE", numel=262668288)
    v = log.diagnose().verdict
    assert (v.category, v.culprit_ranks) == ("collective_mismatch", ())
    assert "#313" in v.summary and "#315" in v.summary


def test_receivers_one_behind_in_a_broadcast_are_no_diverged_stream() -> None:
    # DDP's start: the root's broadcast completes once its data is sent, so it waits in the next
    # collective while the receivers still wait for that data; no rank is the odd one.
    log = world(Log(), 8)
    log.timeout(0, 2, op="ALLREDUCE", numel=1)
    for r in range(1, 8):
        log.timeout(r, 1, op="BROADCAST", numel=4096)
    inc = log.diagnose()
    v = inc.verdict
    assert (v.category, v.culprit_ranks) == ("straggler_hang", ())
    assert v.confidence == "low"
    assert "BROADCAST #1" in v.summary
    assert all(h.category != "collective_mismatch" for h in inc.hypotheses)


@pytest.mark.parametrize(
    ("behind_op", "gap"),
    [("ALLREDUCE", 1), ("BROADCAST", 2)],
)
def test_a_skew_not_explained_by_a_one_sided_collective_stays_a_divergence(behind_op: str, gap: int) -> None:
    log = world(Log(), 8)
    log.timeout(0, 1 + gap, op="ALLREDUCE", numel=1)
    for r in range(1, 8):
        log.timeout(r, 1, op=behind_op, numel=4096)
    v = log.diagnose().verdict
    assert (v.category, v.culprit_ranks) == ("collective_mismatch", (0,))


def test_an_all_gathers_sizes_bound_the_world_seen_only_in_part() -> None:
    # Five ranks of a bigger job left lines; an all-gather's output holds 16 members' inputs.
    log = Log()
    for r in (3, 4, 6, 7, 8):
        log.timeout(r, 731, op="_ALLGATHER_BASE", numel_in=5120, numel_out=81920)
    inc = log.diagnose()
    assert inc.world_size == 16
    assert inc.verdict.culprit_ranks == ()


def test_a_report_that_lost_its_sizes_neither_agrees_nor_disagrees() -> None:
    # Lines cut before NumelIn (a wrapped paste) carry the op only: no size mismatch with the
    # one report that kept its sizes.
    log = world(Log(), 4)
    log.timeout(0, 90, op="_ALLGATHER_BASE", numel_in=5120, numel_out=20480)
    for r in (1, 2):
        log.timeout(r, 90, op="_ALLGATHER_BASE", numel_in=None, numel_out=None)
    inc = log.diagnose()
    assert all(h.category != "collective_mismatch" for h in inc.hypotheses)
    assert inc.verdict.culprit_ranks == (3,)


@pytest.mark.parametrize(
    ("op", "seq", "named"),
    [("BROADCAST", 1, ()), ("BROADCAST", 40, (0,)), ("ALLREDUCE", 1, (0,))],
)
def test_a_silent_rank_at_a_first_one_sided_collective_is_not_named(
    op: str, seq: int, named: tuple[int, ...]
) -> None:
    # Rank 0 may be the broadcast's root that sent and moved on; before any collective completed
    # the path between the GPUs is as likely as a late rank. Later, or in an all-reduce, it is late.
    log = world(Log(), 2)
    log.timeout(1, seq, op=op, numel=1)
    v = log.diagnose().verdict
    assert (v.category, v.culprit_ranks) == ("straggler_hang", named)


def test_lone_reporter_with_silent_peers_unlogged_is_unknown() -> None:
    log = Log()
    log.init(0, 4)
    log.timeout(0, 3, numel=1, timeout_ms=1800000, elapsed_ms=1800668)
    inc = log.diagnose()
    v = inc.verdict
    assert v.category == "unknown" and v.culprit_ranks == ()
    cats = {h.category for h in inc.hypotheses}
    assert {"straggler_hang", "collective_mismatch"} <= cats
    assert any("TORCH_NCCL_DESYNC_DEBUG" in c for c in v.collect_next_time)


def test_the_lone_reporter_is_the_culprit() -> None:
    log = world(Log(), 4)
    log.timeout(0, 1201, op="BARRIER", numel=1, at=700)
    for r in (1, 2, 3):
        log.add("progress", rank=r, at=650, step=500)  # the others went on (and finished)
    v = log.diagnose().verdict
    assert (v.category, v.culprit_ranks) == ("collective_mismatch", (0,))
    assert v.summary.startswith("Only rank 0 timed out")


def test_subgroup_timeout_shorter_than_the_jobs() -> None:
    log = world(Log(), 4)
    log.add(
        "init",
        rank=0,
        at=1,
        timeout_ms=7200000,
        pg="0",
        text="ProcessGroupNCCL initialization options: TIMEOUT(ms): 7200000",
    )
    for r in (1, 2, 3):
        log.timeout(r, 50, pg="3", timeout_ms=600000, elapsed_ms=600020, at=900)
        log.status(r, 50, 50, 49, pg="3", at=900.1)
    log.add("progress", rank=0, at=1400, step=9)
    inc = log.diagnose()
    v = inc.verdict
    # who was late is unknown (the group's membership is not in the logs), but the group ran with
    # a shorter timeout than the job's: the wait outlasted only the group's limit
    assert (v.category, v.culprit_ranks) == ("config_timeout_too_short", ())
    assert "process group 3" in v.summary.lower() and "2 h" in v.summary
    assert "7200000" in " ".join(v.rules_in)
    hang = [h for h in inc.hypotheses if h.category == "straggler_hang"]
    assert hang and "shorter than the job's 2 h" in hang[0].summary


def test_config_vs_straggler_follows_whether_the_rank_kept_working() -> None:
    def run(alive: bool) -> tuple[str, list[str]]:
        log = world(Log(), 4)
        log.add("progress", rank=0, at=-5, step=99, message="Saving checkpoint. This may take some time.")
        for r in (1, 2, 3):
            log.timeout(r, 9387, numel=1, at=600)
        if alive:
            log.add(
                "progress", rank=0, at=300, step=100, message="Getting full model state dict took 109.51 secs"
            )
        inc = log.diagnose()
        cats = [h.category for h in inc.hypotheses]
        return inc.verdict.category, cats

    got, cats = run(alive=True)
    assert got == "config_timeout_too_short" and "straggler_hang" in cats
    got, cats = run(alive=False)
    assert got == "straggler_hang" and "config_timeout_too_short" in cats


def _two_hosts(log: Log) -> Log:
    """Ranks 0-3 on node-a, 4-7 on node-b."""
    for r in range(8):
        log.init(r, 8, host="node-a" if r < 4 else "node-b")
    return log


def _wait(log: Log, ranks: tuple[int, ...]) -> Log:
    """These ranks time out at a 1-element all-reduce; their lines go to one shared console."""
    for r in ranks:
        log.timeout(r, 2, numel=1, timeout_ms=1800000, elapsed_ms=1800400, source="console.log")
    return log


def _bar(log: Log, host: str, step: int, elapsed: float) -> Log:
    """An untagged tqdm bar behind a pdsh host prefix."""
    return log.add(
        "progress",
        rank=None,
        host=host,
        source="console.log",
        step=step,
        total_steps=1000,
        elapsed_s=elapsed,
        message=f"Running tokenizer on dataset: {step // 10}%| | {step}/1000 [{elapsed}<]",
    )


def test_untagged_progress_belongs_to_the_one_rank_of_its_host_not_waiting() -> None:
    log = _two_hosts(Log())
    _bar(log, "node-a", 1000, 1385.0)  # node-a's main process finished before the timeouts
    _wait(log, (1, 2, 3, 5, 6, 7))
    _bar(log, "node-b", 470, 1809.0)  # node-b's was still going
    inc = log.diagnose()
    v = inc.verdict
    assert (v.category, v.culprit_ranks) == ("config_timeout_too_short", (4,))
    assert any("only rank 4 can have printed it" in x for x in v.rules_in)
    assert any(x.startswith("Rank 0 finished its step before the timeout") for x in v.rules_in)
    alt = [h for h in inc.hypotheses if h.category == "straggler_hang"]
    assert alt and alt[0].culprit_ranks == (0, 4)


def test_untagged_progress_is_nobodys_when_two_ranks_could_have_printed_it() -> None:
    log = _wait(_two_hosts(Log()), (0, 1, 2, 3, 6, 7))
    _bar(log, "node-b", 470, 1809.0)
    v = log.diagnose().verdict
    assert v.category == "straggler_hang" and v.culprit_ranks == (4, 5)


def test_an_untagged_training_bar_is_not_a_rank_local_phase() -> None:
    # Rank 0's epoch bar (untagged, hours long) stops when rank 0 goes to wait for the hung rank 4:
    # read by elimination it would make rank 4 look busy. A training loop is no rank-local phase.
    log = _two_hosts(Log())
    log.add(
        "progress",
        rank=None,
        host="node-b",
        source="console.log",
        step=4512,
        total_steps=9000,
        elapsed_s=7384.0,
        message="Epoch 3:  50%|█████     | 4512/9000 [2:03:04<2:04:11, 1.66s/it, loss=1.82]",
    )
    inc = _wait(log, (0, 1, 2, 3, 5, 6, 7)).diagnose()
    assert (inc.verdict.category, inc.verdict.culprit_ranks) == ("straggler_hang", (4,))


def test_a_finished_untagged_bar_before_the_wait_says_nothing() -> None:
    # Every rank printed such a bar before it went to wait: it may be any rank's.
    log = _two_hosts(Log())
    _bar(log, "node-a", 1000, 157.0)
    inc = _wait(log, (1, 2, 3, 4, 5, 6, 7)).diagnose()
    assert (inc.verdict.category, inc.verdict.culprit_ranks) == ("straggler_hang", (0,))
    assert not any("can have printed it" in x for h in inc.hypotheses for x in h.rules_in)


def test_all_ranks_waiting_names_nobody_and_says_what_to_collect() -> None:
    log = world(Log(), 4)
    for r in range(4):
        log.timeout(r, 10)
    v = log.diagnose().verdict
    assert (v.category, v.culprit_ranks) == ("straggler_hang", ())
    assert v.confidence == "low"
    assert any("TORCH_NCCL_TRACE_BUFFER_SIZE" in c for c in v.collect_next_time)
    assert any("NCCL_DEBUG_FILE" in c for c in v.collect_next_time)


def test_ray_dedup_lowers_confidence() -> None:
    log = world(Log(), 8)
    for r in (0, 2, 3, 4, 5, 6, 7):
        log.timeout(r, 44)
    plain = log.diagnose().verdict
    log.add("nccl_warn", rank=3, repeat=4, severity="warning", text="a warning [repeated 3x across cluster]")
    folded = log.diagnose().verdict
    assert plain.culprit_ranks == folded.culprit_ranks == (1,)
    assert CONFIDENCES.index(folded.confidence) < CONFIDENCES.index(plain.confidence)


def test_folded_timeout_line_may_hide_the_silent_rank() -> None:
    log = world(Log(), 8)
    for r in (0, 2, 3, 4, 5, 6):
        log.timeout(r, 44)
    log.rows[-1]["repeat"] = 2  # rank 6's line stands for one more rank, 1 or 7
    v = log.diagnose().verdict
    assert v.culprit_ranks != (1,) and v.culprit_ranks != (7,)


def test_unattributed_rethrow_does_not_count_as_another_rank() -> None:
    log = world(Log(), 4)
    for r in (1, 2, 3):
        log.timeout(r, 7)
        log.timeout(None, 7, source=f"rank{r}.log", pg="0", pg_rank=r)  # type: ignore[arg-type]
    v = log.diagnose().verdict
    assert v.culprit_ranks == (0,)


def test_heartbeat_stuck_on_one_rank() -> None:
    log = world(Log(), 16)
    log.add("heartbeat", rank=10, at=480, seconds=480.0)
    v = log.diagnose().verdict
    assert (v.category, v.culprit_ranks) == ("straggler_hang", (10,))


# --------------------------------------------------------------------------- fail-stop


def test_first_failure_is_the_cause_and_timeouts_the_cascade() -> None:
    log = world(Log(), 8)
    log.add("oom", rank=5, at=10, size="7.83 GiB", gpu=5, category="oom")
    for r in range(8):
        if r != 5:
            log.timeout(r, 79514, op="_ALLGATHER_BASE", at=612)
    log.add("process_exit", rank=None, at=613, target_rank=2, exitcode=-6, source="launcher.log")
    inc = log.diagnose()
    v = inc.verdict
    assert (v.category, v.culprit_ranks) == ("oom", (5,))
    assert "ranks 0-4,6,7" in v.summary
    assert at_least(v.confidence, "high")
    assert any(h.category == "straggler_hang" and h.culprit_ranks == (5,) for h in inc.hypotheses)


def test_torchrun_root_cause_is_evidence_not_truth() -> None:
    log = world(Log(), 8)
    log.add(
        "cuda_error", rank=6, at=10, error="an illegal memory access was encountered", category="cuda_error"
    )
    for r in (0, 1, 2, 3, 4, 5, 7):
        log.timeout(r, 900, at=611)
    src = "torchrun_node0.log"
    log.add("root_cause", rank=None, source=src, line=40, message="Root Cause (first observed failure):")
    log.add(
        "root_cause", rank=None, source=src, line=43, target_rank=2, message="  rank      : 2 (local_rank: 2)"
    )
    log.add(
        "root_cause", rank=None, source=src, line=44, target_rank=2, exitcode=-6, message="  exitcode  : -6"
    )
    v = log.diagnose().verdict
    assert (v.category, v.culprit_ranks) == ("cuda_error", (6,))
    assert any("names rank 2 (exit code -6)" in x and "not where it began" in x for x in v.rules_out)


def test_failure_after_the_timeouts_is_not_the_cause() -> None:
    log = world(Log(), 4)
    for r in (1, 2, 3):
        log.timeout(r, 5, at=600)
    log.add(
        "cuda_error", rank=0, at=900, error="an illegal memory access was encountered", category="cuda_error"
    )
    v = log.diagnose().verdict
    assert (v.category, v.culprit_ranks) == ("straggler_hang", (0,))


def test_unprefixed_oom_is_placed_by_its_gpu() -> None:
    log = world(Log(), 2, host="box")
    log.add("oom", rank=None, source="stdout.log", gpu=1, category="oom", host=None)
    v = log.diagnose().verdict
    assert (v.category, v.culprit_ranks) == ("oom", (1,))


def test_same_failure_on_every_rank_names_no_rank() -> None:
    log = world(Log(), 2)
    for r in (0, 1):
        log.add(
            "cuda_error",
            rank=r,
            at=5,
            error="an illegal memory access was encountered",
            category="cuda_error",
        )
    v = log.diagnose().verdict
    assert (v.category, v.culprit_ranks) == ("cuda_error", ())


def test_xid_is_placed_on_the_rank_by_pci_bus() -> None:
    log = world(Log(), 8, host="hgx-07")
    log.add(
        "xid",
        rank=None,
        host=None,
        source="dmesg.txt",
        xid=79,
        pci="0000:30:00",
        at=5,
        category="gpu_hardware_xid",
    )
    for r in range(8):
        if r != 2:
            log.timeout(r, 11, at=600)
    v = log.diagnose().verdict
    assert (v.category, v.culprit_ranks, v.culprit_hosts) == ("gpu_hardware_xid", (2,), ("hgx-07",))


def test_duplicate_gpu_names_both_ranks() -> None:
    log = world(Log(), 16)
    log.add("duplicate_gpu", rank=9, target_rank=9, other_rank=1, category="init_failure", severity="error")
    v = log.diagnose().verdict
    assert (v.category, v.culprit_ranks) == ("init_failure", (1, 9))


# --------------------------------------------------------------------------- network


def _two_node_world(log: Log) -> Log:
    for r in range(16):
        host = "gpu-01" if r < 8 else "gpu-02"
        log.init(r, 32, host=host)
    for r in range(16, 32):
        log.init(r, 32, host="gpu-bad")
    log.add("bootstrap", rank=16, host="gpu-bad", ip="10.0.0.21", iface="ib0")
    log.add("bootstrap", rank=0, host="gpu-01", ip="10.0.0.11", iface="ib0")
    log.add("bootstrap", rank=8, host="gpu-02", ip="10.0.0.12", iface="ib0")
    return log


def test_ib_errors_from_many_ranks_point_at_one_host() -> None:
    log = _two_node_world(Log())
    for r in (1, 5, 9, 13):
        host = "gpu-01" if r < 8 else "gpu-02"
        log.add(
            "network_ib",
            rank=r,
            host=host,
            at=30,
            peer_addr="10.0.0.21",
            peer="10.0.0.21<4001>",
            ib_status=12,
            vendor_err=129,
        )
    log.add("network_ib", rank=20, host="gpu-bad", at=31, peer_addr="10.0.0.11", ib_status=12, vendor_err=129)
    for r in range(8):
        log.timeout(r, 3, at=630)
    v = log.diagnose().verdict
    assert v.category == "network_ib"
    assert v.culprit_hosts == ("gpu-bad",)
    assert v.culprit_ranks == tuple(range(16, 32))
    assert "IB error 12, vendor err 129" in v.summary


def test_port_errors_on_own_adapter_name_the_hosts_not_ranks() -> None:
    log = _two_node_world(Log())
    for r in range(8, 16):
        log.add("network_ib", rank=r, host="gpu-02", at=20, error="port error", hca="mlx5_1")
    v = log.diagnose().verdict
    assert (v.category, v.culprit_ranks, v.culprit_hosts) == ("network_ib", (), ("gpu-02",))


def test_port_errors_on_every_host_name_no_host() -> None:
    # Every machine's adapter failing alike is the fabric they share, not one NIC.
    log = Log()
    for r in range(16):
        log.init(r, 16, host="gpu-02" if r >= 8 else "gpu-01")
    for r in range(16):
        log.add(
            "network_ib",
            rank=r,
            host="gpu-02" if r >= 8 else "gpu-01",
            at=20,
            error="port error",
            hca="mlx5_1",
        )
    v = log.diagnose().verdict
    assert (v.category, v.culprit_ranks, v.culprit_hosts) == ("network_ib", (), ())
    assert "every host" in v.summary


def test_a_cuda_error_after_the_process_own_network_fault_follows_from_it() -> None:
    # One process: its proxy's IB completion error, then an illegal memory access in the same
    # file; the network fault is the cause.
    log = Log()
    for host, rank in (("node-x", 0), ("node-y", 4)):
        log.add(
            "network_ib",
            rank=rank,
            host=host,
            pid=4100 + rank,
            ib_status=12,
            vendor_err=129,
            source=f"{host}.log",
        )
    log.add(
        "cuda_error",
        rank=4,
        host="node-y",
        pid=4104,
        source="node-y.log",
        error="an illegal memory access was encountered",
        category="cuda_error",
    )
    v = log.diagnose().verdict
    assert v.category == "network_ib"


def test_network_errors_after_a_peer_crash_are_the_cascade() -> None:
    log = _two_node_world(Log())
    log.add("crash_signal", rank=20, host="gpu-bad", at=10, signal_name="SIGSEGV", category="segfault_crash")
    for r in (1, 9):
        host = "gpu-01" if r < 8 else "gpu-02"
        log.add(
            "network_socket",
            rank=r,
            host=host,
            at=11,
            peer_addr="10.0.0.21",
            error="Connection closed by remote peer",
        )
    v = log.diagnose().verdict
    assert (v.category, v.culprit_ranks) == ("segfault_crash", (20,))


def test_intra_node_socket_errors_are_a_p2p_problem() -> None:
    log = world(Log(), 8, host="sxm-07")
    log.add("env_setting", rank=0, env_var="NCCL_P2P_LEVEL", env_value="LOC")
    log.add(
        "network_socket",
        rank=3,
        host="sxm-07",
        peer_addr="sxm-07.cluster",
        error="Connection closed by remote peer",
    )
    v = log.diagnose().verdict
    assert v.category == "p2p_topology"
    assert "NCCL_P2P_LEVEL=LOC" in v.summary


# --------------------------------------------------------------------------- no watchdog


def test_progress_skew_without_watchdog_names_the_slow_rank() -> None:
    log = world(Log(), 2)
    for n in range(1, 17):
        log.add("progress", rank=0, op_count=n, nranks=2)
        log.add("progress", rank=1, op_count=n, nranks=2)
    log.add("progress", rank=1, op_count=17, nranks=2)
    v = log.diagnose().verdict
    assert (v.category, v.culprit_ranks) == ("straggler_hang", (0,))


def test_stall_on_every_worker_is_not_a_rank_problem() -> None:
    log = world(Log(), 4)
    for minute in range(5):
        for r in (1, 2, 3):
            log.add("stall", rank=r, at=60.0 * minute, seconds=60.0)
    v = log.diagnose().verdict
    assert v.culprit_ranks == ()
    assert "outside the ranks" in v.summary


def test_progress_that_just_stops_is_unknown() -> None:
    log = world(Log(), 2)
    for n in range(1, 11):
        for r in (0, 1):
            log.add("progress", rank=r, op_count=n, nranks=2)
    assert log.diagnose().verdict.category == "unknown"


def test_clean_run_is_no_failure() -> None:
    log = world(Log(), 2)
    for n in range(1, 11):
        for r in (0, 1):
            log.add("progress", rank=r, op_count=n, nranks=2)
    for r in (0, 1):  # the run's own end: no_failure needs positive evidence
        log.add("completion", rank=r)
    inc = log.diagnose()
    assert inc.verdict.category == "no_failure"
    assert inc.verdict.confidence == "high"
    assert inc.world_size == 2 and inc.ranks_missing == ()


def test_errors_no_rule_places_are_unknown() -> None:
    log = world(Log(), 2)
    log.add("info", rank=0, severity="error", text="something odd")
    v = log.diagnose().verdict
    assert v.category == "unknown"
    assert v.collect_next_time


# --------------------------------------------------------------------------- timeline


def test_host_clock_offsets_from_simultaneous_timeouts() -> None:
    log = Log()
    for r in range(8):
        log.init(r, 8, host="a" if r < 4 else "b")
    for seq, base in ((10, 600.0), (11, 1300.0)):
        for r in range(8):
            skew = 0.0 if r < 4 else -42.0  # host b's clock is 42 s behind
            log.timeout(r, seq, host="a" if r < 4 else "b", at=base + skew + r * 0.01)
    inc = log.diagnose()
    assert inc.host_offsets["a"] == 0.0
    assert inc.host_offsets["b"] == pytest.approx(42.0, abs=0.2)
    timed = [e for e in inc.timeline if e.time is not None]
    assert [e.time for e in timed] == sorted(e.time for e in timed)


def test_untimestamped_lines_keep_their_file_order() -> None:
    log = world(Log(), 2)
    log.add("nccl_warn", rank=0, source="r0.log", at=None, severity="warning", text="first")
    log.add("nccl_warn", rank=0, source="r0.log", at=None, severity="warning", text="second")
    inc = log.diagnose()
    texts = [e.text for e in inc.timeline if e.source == "r0.log"]
    assert texts == ["first", "second"]


# --------------------------------------------------------------------------- wording, places, scale


def test_wording() -> None:
    assert wording.rank_list([0, 2, 3, 4, 5, 6, 7]) == "0,2-7"
    assert wording.rank_list([1, 2, 5]) == "1,2,5"
    assert wording.rank_list([]) == ""
    # the one format, with the reports' parameters (view.rank_ranges)
    assert wording.rank_list([5, 0, 1, 2, 7, 8], sep=", ", pairs=False) == "0-2, 5, 7-8"
    assert wording.rank_list(range(0, 20, 2), limit=3) == "0,2,4,…"
    assert wording.rank_list([1, 2, 5, 9, 10, 11], limit=2) == "1,2,5,…"
    assert wording.rank_list([1, 2, 5, 9], sep=", ", limit=1) == "1, 2, …"
    assert wording.ranks_phrase([3], capital=True) == "Rank 3"
    assert wording.seconds(600000) == "600 s"
    assert wording.seconds(1800000) == "30 min"
    assert wording.seconds(7200000) == "2 h"
    assert wording.pg_name("0") == "the default group"


def test_addresses() -> None:
    assert strip_port("10.0.0.21<40917>") == "10.0.0.21"
    assert strip_port("[fe80::1]:29500") == "fe80::1"
    assert pci_bus("0000:3b:00") == pci_bus("3b000") == pci_bus("0000:3b:00.0") == 0x3B


def test_topology_world_size_wins() -> None:
    log = world(Log(), 2)
    inc = log.diagnose(Topology(world_size=4))
    assert inc.world_size == 4 and inc.ranks_missing == (2, 3)


@pytest.mark.parametrize("ranks", [16384])
def test_scale_16k_ranks(ranks: int) -> None:
    n = ranks
    silent = 4711
    schema_rows = {
        "rank": list(range(n)) * 3,
        "signal": ["init"] * n + ["progress"] * n + ["collective_timeout"] * n,
    }
    base = Log()
    base.init(0, n)
    frame = base.frame()
    big = pl.DataFrame(schema_rows).with_columns(
        source=pl.format("rank{}.log", pl.col("rank")),
        line=pl.int_range(pl.len()),
        text=pl.lit("x"),
        message=pl.lit("x"),
        pattern=pl.lit("test"),
        severity=pl.when(pl.col("signal") == "collective_timeout")
        .then(pl.lit("error"))
        .otherwise(pl.lit("info")),
        host=pl.format("node{}", pl.col("rank") // 8),
        nranks=pl.lit(n),
        comm_rank=pl.col("rank"),
        phase=pl.lit("Init COMPLETE"),
        op_count=pl.lit(5),
        seq=pl.lit(88),
        op=pl.lit("ALLREDUCE"),
        numel_in=pl.lit(1),
        numel_out=pl.lit(1),
        timeout_ms=pl.lit(600000),
        elapsed_ms=pl.lit(600010),
    )
    big = big.filter(~((pl.col("rank") == silent) & (pl.col("signal") == "collective_timeout")))
    events = pl.concat(
        [
            frame,
            big.select(
                [
                    pl.col(c).cast(frame.schema[c])
                    if c in big.columns
                    else pl.lit(None, frame.schema[c]).alias(c)
                    for c in frame.columns
                ]
            ),
        ]
    )
    from correlate_events import library

    from nccllog.correlate.diagnose import diagnose
    from nccllog.model import Coverage

    start = time.perf_counter()
    inc = diagnose(
        events,
        Topology(),
        coverage=Coverage(files=n, lines=events.height, matched=events.height, unattributed=0),
        templates=(),
        library=library(),
        inputs=("big",),
    )
    took = time.perf_counter() - start
    assert inc.verdict.culprit_ranks == (silent,)
    assert len(inc.ranks) == n
    assert took < 60, took


def test_outlier_picking() -> None:
    from nccllog.correlate import outliers

    split = outliers.odd_one_out({"AR": [0, 1, 2], "BC": [3]})
    assert split is not None and split.odd == (3,) and not split.tie
    tie = outliers.odd_one_out({"AR": [0], "BC": [1]})
    assert tie is not None and tie.tie
    assert outliers.odd_one_out({"AR": [0, 1]}) is None
    assert outliers.behind({0: 100, 1: 100, 2: 100, 3: 95}, mark=100) == (3,)
    assert outliers.behind({0: 100, 1: 95}, mark=100) == ()  # one of two: not a minority
    assert outliers.behind({0: 627, 1: 627, 2: 627, 3: 347}, mark=347) == (3,)  # far below the median
    assert outliers.last_behind({0: 16, 1: 17}) == (0,)
    assert outliers.last_behind({0: 5, 1: 5}) == ()
    assert outliers.last_behind({0: 4, 1: 4, 2: 5}) == ()  # most are behind: the one ahead is the odd one


def test_driver_hang_is_not_a_rank_problem() -> None:
    """A hang whose process sleeps inside the GPU driver: the verdict names no rank."""
    import nccllog

    log = (
        "[rank3]:[E1014 11:52:51.013275447 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=203441, OpType=GATHER, NumelIn=1, NumelOut=0, Timeout(ms)=600000) "
        "ran for 600094 milliseconds before timing out.\n"
        "    PID STAT     ELAPSED WCHAN                            CMD\n"
        "   2871 Dl      03:02:05 os_acquire_spinlock              python3 -m vllm.entrypoints.openai.api_server\n"
    )
    v = nccllog.analyze_text(log).verdict
    assert (v.category, v.culprit_ranks) == ("gpu_hardware_xid", ())
    assert "not a rank problem" in v.summary


def test_absurd_rank_and_world_size_numbers_stay_bounded() -> None:
    """Garbled lines claiming 10^12 ranks are no evidence: the per-rank tables stay small."""
    import nccllog

    log = (
        "h:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 999999999999 cudaDev 0 busId 1000 - Init COMPLETE\n"
        "[rank99999999999]:hello\n"
        "Timed out after 901 seconds waiting for clients. 7/999999999999 clients joined.\n"
        "[rank3]:[E1023 14:02:17.412903117 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
        "ran for 600128 milliseconds before timing out.\n"
    )
    incident = nccllog.analyze_text(log)
    assert incident.world_size is not None and incident.world_size < 1000
    assert len(incident.ranks) < 1000
