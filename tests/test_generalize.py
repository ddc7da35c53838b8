"""Mechanisms that make the verdict hold on pasted real-world logs: unknown leading layers, no
all-clear without positive evidence, the words of generic errors, SIGKILL, one-host pastes."""

from __future__ import annotations

from pathlib import Path

import pytest

import nccllog
from nccllog.attribution.layers import parse_line
from nccllog.cli import unquote_paste

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.mark.parametrize(
    ("line", "rank", "host", "message"),
    [
        # a collector's stamp and host before an NCCL header whose host it cut
        (
            "2025-03-04 11:02:09.118204 node-b >> :4411:4470 [2] NCCL INFO Connected all rings",
            None,
            None,
            "Connected all rings",
        ),
        # a CI timestamp with a zone before NCCL's own 2.26 timestamp
        (
            "2025-03-04 19:02:10.007 +08:00 [2025-03-04 11:02:10] gpu-7:301:330 [0] misc/socket.cc:50 NCCL WARN x",
            None,
            "gpu-7",
            "x",
        ),
        # a log viewer's line number before a c10 line
        (
            "[2291] [rank5]:[E304 11:02:10.123456789 ProcessGroupNCCL.cpp:632] [Rank 5] Watchdog",
            5,
            None,
            "[Rank 5] Watchdog",
        ),
        # Open MPI --timestamp-output --tag-output
        ("2019-03-04T11:02:10.884Z: [1,6]<stdout>:gpu-2:881:900 [1] NCCL INFO hi", 6, "gpu-2", "hi"),
        # Open MPI / UCX signal handler prefixes
        ("[gpu-c3:7781] Signal: Segmentation fault (11)", None, "gpu-c3", "Signal: Segmentation fault (11)"),
    ],
)
def test_known_layers_after_an_unknown_one(
    line: str, rank: int | None, host: str | None, message: str
) -> None:
    a = parse_line(line)
    assert (a.rank, a.host, a.message) == (rank, host, message)


def test_a_source_file_bracket_is_not_a_host() -> None:
    assert parse_line("[socket.cpp:12] y").host is None


def test_paste_undoes_tracker_autolinks_and_wraps() -> None:
    got = unquote_paste(
        b"> a/[net_ib.cc:101](http://net_ib.cc:101/) NCCL WARN [10.0.0.9](http://10.0.0.9/)<1>\n"
    )
    assert got == b"a/net_ib.cc:101 NCCL WARN 10.0.0.9<1>\n"
    wrapped = unquote_paste(b"[rank0]:[W304 11:02:10.1\n  ProcessGroupNCCL.cpp:4715] using GPU 0\nnext\n")
    assert wrapped.split(b"\n")[:3] == [
        b"[rank0]:[W304 11:02:10.1 ProcessGroupNCCL.cpp:4715] using GPU 0",
        b"",
        b"next",
    ]


def _verdict(text: str) -> nccllog.Hypothesis:
    return nccllog.analyze(text).verdict


def test_a_log_that_just_stops_is_not_an_all_clear() -> None:
    v = _verdict("step 10 loss 2.1\nstep 11 loss 2.0\ntrn-a1:11:11 [0] NCCL INFO Init COMPLETE\n")
    assert v.category == "unknown"


def test_warnings_alone_are_no_failure_at_low_confidence() -> None:
    v = _verdict(
        "[W socket.cpp:697] [c10d] The client socket cannot be initialized to connect to [localhost]:1234 (errno: 97 - Address family not supported by protocol).\n"
    )
    assert (v.category, v.confidence) == ("no_failure", "low")


def test_the_runs_own_end_is_positive_evidence() -> None:
    v = _verdict("Rank 0: step 9\nRank 1: step 9\nRank 0: End of workload.\nRank 1: End of workload.\n")
    assert v.category == "no_failure"


@pytest.mark.parametrize(
    ("text", "category"),
    [
        (
            "Accelerator Fatal Error: call to cuCtxCreate returned error 214\n  (CUDA_ERROR_ECC_UNCORRECTABLE): uncorrectable ECC error encountered\n",
            "gpu_hardware_xid",
        ),
        (
            "trainer.py startup\n/opt/env/lib/torch/lib/libtorch_cuda.so: undefined symbol: ncclCommWindowRegister\n",
            "version_mismatch",
        ),
        (
            "[gpu-c3:7781] *** Process received signal ***\n[gpu-c3:7781] Signal: Segmentation fault (11)\n",
            "segfault_crash",
        ),
        (
            "[2024-05-02 10:11:12,001] [ERROR] [launch.py:325:sigkill_handler] exits with return code = -9\n",
            "oom",
        ),
    ],
)
def test_generic_failures_are_placed_by_their_words(text: str, category: str) -> None:
    assert _verdict(text).category == category


def test_one_log_of_one_host_names_no_culprit_host() -> None:
    text = (
        "gpu-q1:3001:3050 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.9.0.4<4111> with error 12, opcode 0, len 0, vendor err 129 (Send)\n"
        "gpu-q1:3001:3050 [0] NCCL INFO transport/net.cc:1137 -> 6\n"
    )
    v = _verdict(text)
    assert v.category == "network_ib" and v.culprit_hosts == ()


@pytest.mark.parametrize(
    ("text", "culprits", "confidence"),
    [
        # A bare paste: the waiter's global rank is unknown, the awaited rank 0 of the world group is named.
        (
            "torch.distributed.DistBackendError: [5] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Socket Timeout\n",
            (0,),
            "medium",
        ),
        # A torchrun-prefixed waiter whose group rank is its global rank.
        (
            "[rank3]: torch.distributed.DistBackendError: [3] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Connection reset by peer\n",
            (0,),
            "medium",
        ),
        # Group rank 1 on global rank 9: rank 0 of that group is not global rank 0, so nobody is named.
        (
            "[rank9]: RuntimeError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '1:3', but store->get('1:3') got error: Socket Timeout\n",
            (),
            None,
        ),
    ],
)
def test_a_waiter_points_at_the_rank_it_waits_for(
    text: str, culprits: tuple[int, ...], confidence: str | None
) -> None:
    v = _verdict(text)
    assert v.category == "bootstrap_rendezvous" and v.culprit_ranks == culprits
    assert v.confidence != "high" and (confidence is None or v.confidence == confidence)


def test_ranks_missing_from_a_paste_of_reporters_are_not_named() -> None:
    line = "[E ProcessGroupNCCL.cpp:587] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 180071{r} milliseconds before timing out.\n"
    v = _verdict(line.format(r=3) + line.format(r=1))
    assert v.category == "straggler_hang" and v.culprit_ranks == () and v.confidence != "high"


def _two_node_job(extra_node1: str, init: bool) -> str:
    """Two 4-GPU nodes, ranks 0-5 and 7 time out in #412; `extra_node1` goes into node 1's log."""
    out = []
    for r in range(8):
        node, dev = divmod(r, 4)
        if init:
            out.append(
                f"gpu-n{node}:{5000 + r}:{5000 + r} [{dev}] NCCL INFO comm 0x55a1{r}0 rank {r} nranks 8 cudaDev {dev} "
                f"nvmlDev {dev} busId {dev + 1}b000 commId 0x1d2c3b4a5f607182 - Init COMPLETE\n"
            )
        else:
            out.append(f"[rank{r}]: host gpu-n{node} local_rank {dev}\n")
    for r in (0, 1, 2, 3, 4, 5, 7):
        out.append(
            f"[rank{r}]:[E1125 10:30:0{r}.123456789 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=412, OpType=ALLREDUCE, NumelIn=4096, NumelOut=4096, Timeout(ms)=600000) ran for 600042 milliseconds before timing out.\n"
        )
    return "".join(out[:8]) + extra_node1 + "".join(out[8:])


def test_a_local_gpu_index_is_mapped_to_its_global_rank(tmp_path: Path) -> None:
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 2 has a total capacity of 79.11 GiB of which 1.10 GiB is free.\n"
    lines = _two_node_job(oom, init=True).splitlines(keepends=True)
    (tmp_path / "node0.log").write_text(
        "".join(
            x for x in lines if "gpu-n0" in x or x.startswith(("[rank0]", "[rank1]", "[rank2]", "[rank3]"))
        )
    )
    (tmp_path / "node1.log").write_text(
        "".join(
            x
            for x in lines
            if not ("gpu-n0" in x or x.startswith(("[rank0]", "[rank1]", "[rank2]", "[rank3]")))
        )
    )
    v = nccllog.analyze(tmp_path).verdict
    assert (v.category, v.culprit_ranks, v.culprit_hosts) == ("oom", (6,), ("gpu-n1",))
    assert any("GPU 2 on gpu-n1 is rank 6" in e.note for e in v.evidence)


def test_a_gpu_index_follows_the_nodes_block_of_ranks(tmp_path: Path) -> None:
    # No init lines: node gpu-n1 shows ranks 4, 5, 7 as local ranks 0, 1, 3, so its GPU 2 is rank 6.
    watchdog = (
        "gpu-n{n}: [default{d}]:[rank{r}]:[E1125 10:30:0{r}.123456789 ProcessGroupNCCL.cpp:616] [Rank {r}] "
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=412, OpType=ALLREDUCE, NumelIn=4096, "
        "NumelOut=4096, Timeout(ms)=600000) ran for 600042 milliseconds before timing out.\n"
    )
    for n in (0, 1):
        lines = [watchdog.format(n=n, d=d, r=4 * n + d) for d in range(4) if 4 * n + d != 6]
        if n == 1:
            lines.insert(
                1,
                "gpu-n1: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 2 has a total capacity of 79.11 GiB of which 1.10 GiB is free.\n",
            )
        (tmp_path / f"node{n}.log").write_text("".join(lines))
    v = nccllog.analyze(tmp_path).verdict
    assert (v.category, v.culprit_ranks) == ("oom", (6,))
    assert any("taken as local rank 2" in e.note for e in v.evidence)


@pytest.mark.parametrize(
    ("chain", "category"),
    [
        # A socket system error from bootstrap, no WARN kept: a socket problem.
        (["misc/socket.cc:567 -> 2", "misc/socket.cc:618 -> 2", "bootstrap.cc:270 -> 2"], "network_socket"),
        # A remote error from the IB transport.
        (["transport/net_ib.cc:1296 -> 6", "transport/net.cc:1137 -> 6"], "network_ib"),
        # Invalid usage says NCCL failed, not why: a failure of unknown cause, never an all-clear.
        (["transport/net_ib.cc:889 -> 5", "proxy.cc:1520 -> 5 [Proxy Thread]"], "unknown"),
        # A system error while the topology was detected (/sys, NVML): the communicator's setup.
        (["graph/xml.cc:650 -> 2", "graph/topo.cc:700 -> 2", "init.cc:990 -> 2"], "init_failure"),
        # An internal error while the topology was searched: the communicator's setup.
        (["graph/search.cc:1100 -> 3", "graph/connect.cc:480 -> 3", "init.cc:1210 -> 3"], "init_failure"),
    ],
)
def test_an_nccl_error_trace_alone_is_a_failure(chain: list[str], category: str) -> None:
    text = "".join(
        f"node-b2:{pid}:{pid + 40} [{dev}] NCCL INFO {frame}\n"
        for dev, pid in ((0, 7100), (1, 7101))
        for frame in chain
    )
    v = _verdict("node-b2:7100:7100 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n" + text)
    assert v.category == category and v.confidence == "low"


def test_a_setup_fault_names_the_machine_not_the_reporting_rank() -> None:
    text = "".join(
        f"[rank{r}]: gpu-s{r // 2}:{900 + r}:{900 + r} [{r % 2}] bootstrap.cc:97 NCCL WARN Bootstrap : no socket interface found\n"
        for r in (2, 3)
    ) + "".join(
        f"[rank{r}]: gpu-s0:{900 + r}:{900 + r} [{r}] NCCL INFO Bootstrap : Using ib0:10.4.0.7<0>\n"
        for r in (0, 1)
    )
    v = _verdict(text)
    assert (v.category, v.culprit_ranks, v.culprit_hosts) == ("network_socket", (), ("gpu-s1",))


@pytest.mark.parametrize(
    "hardware",
    [
        "Nov 25 10:29:58 gpu-h1 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=706, GPU has fallen off the bus.\n",
        "Nov 25 10:29:58 gpu-h1 kernel: nvidia 0000:3b:00.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Receiver ID)\n",
    ],
)
def test_a_hardware_fault_outranks_the_software_failure_it_causes(hardware: str) -> None:
    init = "".join(
        f"[rank{r}]:gpu-h{r // 4}:{700 + r}:{700 + r} [{r % 4}] NCCL INFO comm 0x5581a0 rank {r} nranks 8 cudaDev {r % 4} "
        f"nvmlDev {r % 4} busId {r % 4 + 1}b000 commId 0x7f21aa31c0de1234 - Init COMPLETE\n"
        for r in range(8)
    )
    oom = "[rank6]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 2 has a total capacity of 79.11 GiB of which 0 bytes is free.\n"
    waits = "".join(
        f"[rank{r}]:[E1125 10:40:0{r}.000000000 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=88, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran for 600013 milliseconds before timing out.\n"
        for r in range(8)
        if r != 6
    )
    v = _verdict(init + hardware + oom + waits)
    assert (v.category, v.culprit_ranks, v.culprit_hosts) == ("gpu_hardware_xid", (6,), ("gpu-h1",))


def test_a_network_error_without_a_peer_is_not_an_all_clear() -> None:
    text = (
        "node-c1:3301:3301 [0] NCCL INFO comm 0x5581a0 rank 0 nranks 2 cudaDev 0 busId 1b000 commId 0x11 - Init COMPLETE\n"
        "node-c1:3302:3302 [1] NCCL INFO comm 0x5581b0 rank 1 nranks 2 cudaDev 1 busId 2b000 commId 0x11 - Init COMPLETE\n"
        "node-c1:3302:3340 [1] misc/socket.cc:484 NCCL WARN socketFinalizeAccept: wrong magic 2f20544547 != 3c91\n"
    )
    v = _verdict(text)
    assert (v.category, v.culprit_ranks, v.confidence) == ("network_socket", (1,), "low")


def test_the_culprits_own_line_leads_the_evidence() -> None:
    # Rank 2 waits in a 4096-element all-reduce while ranks 0, 1, 3 wait in a 1024-element one.
    line = (
        "[rank{r}]:[E1125 10:40:0{r}.000000000 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=88, OpType=ALLREDUCE, NumelIn={n}, NumelOut={n}, Timeout(ms)=600000) ran for 600013 "
        "milliseconds before timing out.\n"
    )
    v = _verdict("".join(line.format(r=r, n=4096 if r == 2 else 1024) for r in range(4)))
    assert v.culprit_ranks == (2,) and v.evidence[0].rank == 2


def _duplicate(rank: int, other: int, host: str = "gpu-q3") -> str:
    return (
        f"{host}:{7100 + rank}:{7200 + rank} [0] init.cc:1210 NCCL WARN Duplicate GPU detected : "
        f"rank {rank} and rank {other} both on CUDA device 1b000"
    )


def test_a_job_on_one_gpu_names_no_rank() -> None:
    """Every process collides with rank 0: the launch bound no GPU per process (job setup)."""
    text = "\n".join(_duplicate(r, 0) for r in (1, 2, 3)) + "\n" + _duplicate(0, 1) + "\n"
    v = nccllog.analyze_text(text).verdict
    assert v.category == "init_failure"
    assert v.culprit_ranks == ()


def test_one_colliding_pair_among_many_is_named() -> None:
    init = [
        f"gpu-q{r // 8}:{5000 + r}:{5100 + r} [{r % 8}] NCCL INFO comm 0x7a{r}0 rank {r} nranks 16 cudaDev {r % 8} "
        f"nvmlDev {r % 8} busId {r % 8}b000 commId 0x5e11a2 - Init START"
        for r in range(16)
    ]
    text = "\n".join([*init, _duplicate(5, 6, "gpu-q0"), _duplicate(6, 5, "gpu-q0")]) + "\n"
    v = nccllog.analyze_text(text).verdict
    assert v.category == "init_failure"
    assert v.culprit_ranks == (5, 6)


def _hard_wrap(records: list[str], width: int) -> str:
    """What a terminal captured at a fixed width gives: pieces of ``width`` characters, the last
    one padded with spaces."""
    out = []
    for rec in records:
        pieces = [rec[i : i + width] for i in range(0, len(rec), width)]
        out += [p.ljust(width) for p in pieces]
    return "\n".join(out) + "\n"


def test_a_hard_wrapped_paste_is_joined_back() -> None:
    records = [
        f"[rank3]:[E0611 08:12:{10 + i}.52341{i}123 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught collective "
        f"operation timeout: WorkNCCL(SeqNum=9120, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, "
        f"Timeout(ms)=1800000) ran for 180003{i} milliseconds before timing out."
        for i in range(3)
    ]
    pasted = _hard_wrap(records, 96).encode()
    joined = [ln for ln in unquote_paste(pasted).decode().split("\n") if ln.strip()]
    assert joined == records
    assert len(unquote_paste(pasted).split(b"\n")) == len(pasted.split(b"\n"))  # line numbers kept


def test_lines_of_one_length_that_are_records_stay_apart() -> None:
    rec = "[rank{}]:[E0611 08:12:10.523411123 ProcessGroupNCCL.cpp:1671] [PG ID 0 PG GUID 0(default_pg) Rank {}] Timeout at NCCL work: 88, last enqueued NCCL work: 88, last completed NCCL work: 87."
    text = "\n".join(rec.format(r, r) for r in range(4)) + "\n"
    assert unquote_paste(text.encode()).decode() == text


def test_a_stuck_watchdog_alone_names_no_rank_without_others() -> None:
    line = (
        "[rank6]:[E0429 10:41:07.118273645 ProcessGroupNCCL.cpp:1743] [PG ID 0 PG GUID 0(default_pg) Rank 6] "
        "ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued "
        "collectives."
    )
    v = nccllog.analyze_text(line + "\n").verdict
    assert v.culprit_ranks == ()


def test_a_peer_that_closed_every_connection_is_named_as_gone() -> None:
    """Only "closed by remote peer" (no refused, reset or timed-out connection): the peer's process
    went away; its host is named, the cause is unknown without its log."""
    lines = [
        "trn-a03:61102:61190 [2] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer trn-a09.cluster<48120>",
        "trn-a03:61103:61191 [3] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer trn-a09.cluster<48126>",
        "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
    ]
    v = nccllog.analyze_text("\n".join(lines) + "\n").verdict
    assert v.category == "unknown"
    assert v.culprit_hosts == ("trn-a09.cluster",)


def test_a_reset_connection_stays_a_network_reading() -> None:
    lines = [
        "trn-a03:61102:61190 [2] misc/socket.cc:538 NCCL WARN socketProgressOpt: Call to recv from 10.4.0.9<48120> failed : Connection reset by peer",
        "trn-a03:61103:61191 [3] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer 10.4.0.9<48126>",
    ]
    v = nccllog.analyze_text("\n".join(lines) + "\n").verdict
    assert v.category == "network_socket"


def test_nccl_s_own_mismatch_warning_outweighs_the_hang_it_explains() -> None:
    lines = [
        f"[rank{r}]:[E1102 09:14:{10 + r}.123456789 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=8812, OpType=ALLREDUCE, NumelIn=4096, NumelOut=4096, Timeout(ms)=600000) "
        "ran for 600021 milliseconds before timing out."
        for r in range(8)
        if r != 3
    ]
    lines.append(
        "gpu-c3:7712:7790 [3] init.cc:1841 NCCL WARN Mismatched collective detected, please check your collective "
        "calls at and around rank 3. You can use NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=COLL to see the collective logs"
    )
    v = nccllog.analyze_text("\n".join(lines) + "\n").verdict
    assert v.category == "collective_mismatch"
    assert v.culprit_ranks == (3,)


def test_a_pattern_weight_needs_a_category(tmp_path: Path) -> None:
    from nccllog.errors import PatternLibraryError
    from nccllog.match.library import load_library

    (tmp_path / "x.toml").write_text(
        'id = "user.x"\ntitle = "x"\nproducer = "user"\nfamily = "x"\nversions = "any"\nseverity = "error"\n'
        'signal = "nccl_warn"\nweight = 0.9\nkeywords = ["boom"]\nregex = "boom"\n',
        encoding="utf-8",
    )
    with pytest.raises(PatternLibraryError, match="weight"):
        load_library([tmp_path])


def test_unaligned_clocks_lower_a_first_to_fail_verdict() -> None:
    """Ranks on two nodes fail; no sync point ties the nodes' clocks, so which node failed first
    (the one the verdict names) is not established from the times."""
    incident = nccllog.analyze(FIXTURES / "crash-node1-cuda-error-rootcause-names-node0" / "logs")
    assert incident.coverage.unaligned_hosts
    assert any("could not be aligned" in r for r in incident.verdict.rules_out)
    assert incident.verdict.confidence == "medium"


def test_a_launchers_closing_signal_after_a_failed_worker_is_not_a_stop_from_outside() -> None:
    # torch 2.11's agent, as captured on a real GPU: rank 0 failed of itself (exit code 1), the
    # agent then stopped its sibling; the workers' own output went to --log-dir
    text = (
        "W1126 03:26:44.355000 1119 torch/distributed/elastic/multiprocessing/api.py:1012] Sending process 1143 closing signal SIGTERM\n"
        "E1126 03:26:44.470000 1119 torch/distributed/elastic/multiprocessing/api.py:986] failed (exitcode: 1) local_rank: 0 (pid: 1142) of binary: /usr/bin/python3\n"
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
        "============================================================\n"
        "train.py FAILED\n"
        "------------------------------------------------------------\n"
        "Root Cause (first observed failure):\n"
        "[0]:\n"
        "  time      : 2026-11-26_03:26:44\n"
        "  host      : gpu-n4\n"
        "  rank      : 0 (local_rank: 0)\n"
        "  exitcode  : 1 (pid: 1142)\n"
        "  error_file: <N/A>\n"
    )
    v = _verdict(text)
    assert v.category == "unknown"
    assert "first observed failure is rank 0 (exit code 1)" in v.summary
    assert "not in these logs" in v.summary


def test_an_escaped_error_among_warnings_is_not_an_all_clear() -> None:
    text = (
        "gpu-r04:20551:20551 [1] NCCL INFO NCCL_ALGO set by environment to Ring\n"
        "[W1126 03:28:33.749616023 Utils.hpp:137] Warning: Environment variable TORCH_NCCL_TRACE_BUFFER_SIZE is "
        "deprecated; use TORCH_FR_BUFFER_SIZE instead (function operator())\n"
        "[rank3]: Traceback (most recent call l"
    )
    v = _verdict(text)
    assert v.category == "unknown"
    assert "Traceback" in v.summary


def test_the_specific_error_under_ncclinvalidusage_is_the_cause() -> None:
    # NCCL 2.28.9 under torch 2.11, as captured: the WARN, torch's generic wrapper, its "Last error:"
    text = (
        "[2026-11-26 03:29:00] gpu-n4:1441:1441 [0] bootstrap.cc:114 NCCL WARN Bootstrap : no socket interface found\n"
        "gpu-n4:1441:1441 [0] NCCL INFO init.cc:126 -> 5\n"
        "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3135, "
        "invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.28.9\n"
        "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.\n"
        "Last error:\n"
        "Bootstrap : no socket interface found\n"
    )
    assert _verdict(text).category == "network_socket"


def test_a_mismatch_noticed_by_several_ranks_names_none_of_them() -> None:
    text = "".join(
        f"node-a{r // 8}:{900 + r}:{950 + r} [{r % 8}] init.cc:1841 NCCL WARN Mismatched collective detected, please "
        f"check your collective calls at and around rank {r}. You can use NCCL_DEBUG=INFO and "
        "NCCL_DEBUG_SUBSYS=COLL to see the collective logs\n"
        for r in (9, 11, 13)
    )
    v = _verdict(text)
    assert v.category == "collective_mismatch"
    assert v.culprit_ranks == ()


@pytest.mark.parametrize(
    "timeouts",
    [
        ((0, 71201), (0, 71209), (3, 30118)),  # numbers thousands apart: each group counts alone
        ((0, 412), (0, 57), (3, 409)),  # rank 0 at two numbers: two groups', not one stream
    ],
)
def test_watchdog_lines_without_a_group_are_not_one_stream(timeouts: tuple[tuple[int, int], ...]) -> None:
    # torch 2.0 lines name no process group: "[Rank N]" is a group rank of any group
    text = "".join(
        f"[E ProcessGroupNCCL.cpp:458] [Rank {r}] Watchdog caught collective operation timeout: "
        f"WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800412 milliseconds before timing out.\n"
        for r, seq in timeouts
    )
    assert _verdict(text).category != "collective_mismatch"


def test_the_only_member_of_a_job_is_its_own_straggler() -> None:
    text = (
        "gpu-n4:7001:7001 [0] NCCL INFO comm 0x5a1e20 rank 0 nranks 1 cudaDev 0 nvmlDev 0 busId 18000 commId 0x1f2e - Init COMPLETE\n"
        "[rank0]:[E1126 03:27:08.559244593 ProcessGroupNCCL.cpp:689] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=4, OpType=ALLREDUCE, NumelIn=4096, NumelOut=4096, Timeout(ms)=15000) ran for 15049 "
        "milliseconds before timing out.\n"
    )
    v = _verdict(text)
    assert (v.category, v.culprit_ranks) == ("straggler_hang", (0,))


def test_ranks_started_twice_while_others_never_start_is_a_launch_fault() -> None:
    # two nodes of four GPUs, both started as node 0: Lightning's once-per-process banner shows it
    text = "".join(
        f"initializing ddp: GLOBAL_RANK: {r}, MEMBER: {r + 1}/8\n" for _node in range(2) for r in range(4)
    )
    v = _verdict(text)
    assert (v.category, v.culprit_ranks) == ("bootstrap_rendezvous", ())
    assert "started twice" in v.summary


def test_every_rank_once_is_no_launch_fault() -> None:
    text = "".join(f"Initializing distributed: GLOBAL_RANK: {r}, MEMBER: {r + 1}/4\n" for r in range(4))
    assert _verdict(text).category != "bootstrap_rendezvous"


def test_a_header_cut_by_another_writers_line_gives_the_line_to_the_second() -> None:
    a = parse_line("node-a:101:201 [2] NCCL INFO node-a:103:203 [7] NCCL WARN Cuda failure 'out of memory'")
    assert (a.pid, a.message) == (103, "Cuda failure 'out of memory'")


def test_a_desync_report_whose_waiters_are_split_does_not_earn_high() -> None:
    text = (
        "[rank0]:[E702 09:14:22.519911305 ProcessGroupNCCL.cpp:1937] Rank 0\n"
        "         - [0] Timeout at collective: ALLREDUCE, #402\n"
        "         - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:\n"
        "             [7] finished collective #268, but didn't join collective #269 (count from 1)\n"
        "         - Snapshot of ranks' latest states:\n"
        "           #402 started ranks:\n"
        "             [0, 1, 2] started ALLREDUCE\n"
        "           #404 started ranks:\n"
        "             [3, 4, 5, 6] started _ALLGATHER_BASE\n"
    )
    v = _verdict(text)
    assert v.confidence != "high"


def test_an_incident_folder_ending_in_a_rank_is_not_a_ranks_folder() -> None:
    from nccllog.attribution.paths import attrs_from_path

    assert attrs_from_path("cases/k8s-pod-launch-exitcode-7-sigbus-rank0/logs/pod.log").rank is None
    assert attrs_from_path("job7/node0_rank3/stdout.log").rank == 3


def test_a_paste_of_one_ranks_lines_names_no_pair() -> None:
    # rank 1's lines alone: the world of two is only the highest rank shown, so rank 0 is unpasted
    text = (
        "[E ProcessGroupNCCL.cpp:475] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5120, "
        "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800211 milliseconds before timing out.\n"
        "[E ProcessGroupNCCL.cpp:489] Some NCCL operations have failed or timed out. Due to the asynchronous nature "
        "of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.\n"
    )
    assert _verdict(text).culprit_ranks == ()


def test_a_running_servers_watchdog_is_no_startup_failure() -> None:
    text = (
        "".join(
            f"[2026-01-22 13:40:14 TP{r}] Watchdog timeout (self.watchdog_timeout=300)\n" for r in range(4)
        )
        + "[2026-01-22 13:40:19] Received sigquit from a child proces. It usually means the child failed.\nKilled\n"
    )
    assert _verdict(text).category != "bootstrap_rendezvous"


def _torchrun_console(failures: list[tuple[int, int, int]], root: tuple[int, int, int]) -> str:
    """torch 2.11's summary as a one-node torchrun console prints it: (rank, exit code, pid)."""

    def entry(i: int, rank: int, code: int, pid: int) -> str:
        return (
            f"[{i}]:\n  time      : 2026-11-26_07:02:11\n  host      : gpu-n7\n"
            f"  rank      : {rank} (local_rank: {rank})\n  exitcode  : {code} (pid: {pid})\n  error_file: <N/A>\n"
        )

    others = "".join(entry(i + 1, *f) for i, f in enumerate(failures)) or "  <NO_OTHER_FAILURES>\n"
    return (
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
        "============================================================\n"
        "train.py FAILED\n------------------------------------------------------------\n"
        f"Failures:\n{others}------------------------------------------------------------\n"
        f"Root Cause (first observed failure):\n{entry(0, *root)}"
        "============================================================\n"
    )


TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/srv/job/train.py", line 41, in <module>\n'
    "    batch = next(loader)\n"
    "KeyError: 'input_ids'\n"
)


def test_an_unprefixed_traceback_is_the_worker_that_exited_with_an_error() -> None:
    # Rank 2 exited 1 (an escaped exception); torchrun stopped the others (-15): the traceback,
    # which carries no rank prefix, can only be rank 2's.
    stopped = [(r, -15, 7100 + r) for r in (0, 1, 3)]
    v = _verdict(TRACEBACK + _torchrun_console(stopped, (2, 1, 7102)))
    assert v.category == "other" and v.culprit_ranks == (2,)
    # Two workers exited with an error: the traceback could be either's, and none is named from it.
    v = _verdict(TRACEBACK + _torchrun_console([(3, 1, 7103)], (2, 1, 7102)))
    assert v.summary.startswith("A process raised KeyError")


def test_the_awaited_ranks_own_failure_explains_the_store_wait() -> None:
    text = (
        "[rank0]: ValueError: the shard list for this rank is empty\n"
        "[rank1]: torch.distributed.DistBackendError: [1] is setting up NCCL communicator and retrieving "
        "ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: "
        "Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash?\n"
    )
    incident = nccllog.analyze_text(text)
    v = incident.verdict
    assert v.category == "other" and v.culprit_ranks == (0,)
    assert any("waited for" in r for r in v.rules_in)
    wait = next(h for h in incident.hypotheses if h.category == "bootstrap_rendezvous")
    assert wait.culprit_ranks == (0,) and any("What explains the wait" in r for r in wait.rules_out)


def test_a_peer_the_user_redacted_names_no_machine() -> None:
    # Users replace addresses by stand-ins before posting; host names never hold underscores.
    v = _verdict(
        "gpu-b12: gpu-b12:7731:7790 [3] include/socket.h:409 NCCL WARN Net : Call to recv from NODE2_IP<41207> failed : Connection refused\n"
    )
    assert v.category == "network_socket" and v.culprit_hosts == ()


def test_a_crash_no_line_places_does_not_earn_high() -> None:
    # An srun task that may be a node or a rank: the crash is certain, which process it was is not.
    v = _verdict(
        " 57: !!!!!!! Segfault encountered !!!!!!!\n"
        ' 57:   File "<unknown>", line 0, in mz_zip_writer_add_mem_ex_v2\n'
    )
    assert v.category == "segfault_crash" and v.confidence == "medium"


def test_a_launcher_killing_its_workers_is_not_an_all_clear() -> None:
    # DeepSpeed's launcher tears its node down after a worker failed; the return code was cut off.
    v = _verdict(
        "[2025-02-11 04:12:09,551] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 60312\n"
        "[2025-02-11 04:12:09,552] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 60313\n"
    )
    assert v.category == "unknown"


def test_store_warnings_alone_are_no_failure() -> None:
    v = _verdict(
        "W0611 09:14:02.227000 31877 site-packages/torch/distributed/run.py:792] Setting OMP_NUM_THREADS environment "
        "variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the "
        "variable for optimal performance in your application as needed. \n"
        "[W611 09:14:12.905118440 socket.cpp:200] [c10d] The hostname of the client socket cannot be retrieved. err=-3\n"
        "[W socket.cpp:426] [c10d] The server socket cannot be initialized on [::]:29511 (errno: 97 - Address family "
        "not supported by protocol).\n"
    )
    assert v.category == "no_failure" and v.confidence == "low"


def test_a_worker_killed_by_sigkill_names_its_machine_not_its_rank() -> None:
    # The host's OOM killer picks a victim; the rank it killed is not the cause.
    text = (
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 6 (pid: 51208) of binary: /usr/bin/python\n"
        + _torchrun_console([], (6, -9, 51208))
    )
    v = _verdict(text)
    assert v.category == "oom" and v.culprit_ranks == ()
    assert any("OOM killer" in r for r in v.rules_in)
    # A GPU out-of-memory of the rank's own is the rank's.
    v = _verdict("[rank6]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n" + text)
    assert v.category == "oom" and v.culprit_ranks == (6,)


def test_a_death_by_sigkill_told_by_another_process_names_no_rank() -> None:
    # A DataLoader's parent reports its worker's SIGKILL: the host ran out of memory.
    v = _verdict(
        "[rank3]: Traceback (most recent call last):\n"
        "[rank3]: RuntimeError: DataLoader worker (pid 40917) is killed by signal: Killed. \n"
    )
    assert v.category == "oom" and v.culprit_ranks == ()
    # Ray's lost worker: any sudden death reads so; alone, the commonest is the OOM killer ...
    death = (
        "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit "
        "detail: Worker unexpectedly exits with a connection error code 2. End of file. There are some potential "
        "root causes. (1) The process is killed by SIGKILL by OOM killer due to high memory usage.\n"
    )
    assert _verdict(death).category == "oom"
    # ... but after a watchdog timeout it is the abort that followed, not a cause.
    timeout = (
        "[rank2]:[E1102 04:11:52.118733291 ProcessGroupNCCL.cpp:688] [PG ID 0 PG GUID 0(default_pg) Rank 2] "
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=41, OpType=ALLREDUCE, NumelIn=8, "
        "NumelOut=8, Timeout(ms)=600000) ran for 600094 milliseconds before timing out.\n"
    )
    assert _verdict(timeout + death).category != "oom"


def test_an_exception_raised_while_a_process_group_is_set_up_is_a_setup_failure() -> None:
    frames = (
        "Traceback (most recent call last):\n"
        '  File "/srv/train.py", line 41, in <module>\n'
        "    setup()\n"
        '  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py", line 3112, in new_group\n'
        "    pg = _new_process_group_helper(\n"
        '  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py", line 884, in _new_process_group_helper\n'
        "    backend_class = ProcessGroupGloo(backend_prefix_store, group_rank, group_size, timeout=timeout)\n"
    )
    assert _verdict(frames + "RuntimeError: Connection timed out\n").category == "bootstrap_rendezvous"
    assert _verdict(frames + "RuntimeError: NCCL\n").category == "init_failure"
    # The same words raised in the training step are no set-up failure.
    step = frames.replace("in new_group", "in all_reduce").replace(
        "in _new_process_group_helper", "in _all_reduce"
    )
    assert _verdict(step + "RuntimeError: Connection timed out\n").category != "bootstrap_rendezvous"


def test_mpiruns_report_names_the_rank_that_died_of_a_signal() -> None:
    own = (
        "[1,0]<stderr>:[cn-b02:7710] *** Process received signal ***\n"
        "[1,0]<stderr>:[cn-b02:7710] Signal: Segmentation fault (11)\n"
    )
    notice = "mpirun noticed that process rank 1 with PID 0 on node cn-b02 exited on signal 11 (Segmentation fault).\n"
    v = _verdict(own + notice)
    # Both ranks of the job crashed alike: no one rank is the culprit.
    assert v.category == "segfault_crash" and v.culprit_ranks == ()
    killed = _verdict(
        "mpirun noticed that process rank 3 with PID 5120 on node cn-b02 exited on signal 9 (Killed).\n"
    )
    assert killed.category == "oom" and killed.culprit_ranks == ()


def test_a_process_that_drives_several_gpus_is_not_one_rank() -> None:
    # nccl-tests -g 3: one pid, three ranks on the host; its failure line names the host only.
    table = "".join(
        f"#  Rank {r} Group 0 Pid 4410 on lab-ws1 device {r} [0x{r + 1}8] NVIDIA GeForce RTX 4090\n"
        for r in range(3)
    )
    v = _verdict("lab-ws1: Test NCCL failure common.cu:1005 'unhandled cuda error'\n" + table)
    assert v.category == "cuda_error" and v.culprit_ranks == ()


def test_one_side_of_a_mismatch_report_is_not_its_culprit() -> None:
    v = _verdict(
        "[rank1]: RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: "
        "CollectiveFingerPrint(SequenceNumber=12, OpType=ALLREDUCE, TensorShape=[8], TensorDtypes=Float), but "
        "Rank 0 is running collective: CollectiveFingerPrint(SequenceNumber=0OpType=BROADCAST).\n"
    )
    assert v.category == "collective_mismatch" and v.culprit_ranks == ()


def test_the_rank_on_every_side_of_mismatch_reports_is_the_odd_one() -> None:
    report = (
        "[rank{a}]: RuntimeError: Detected mismatch between collectives on ranks. Rank {a} is running collective: "
        "CollectiveFingerPrint(SequenceNumber=301, OpType=ALLREDUCE, TensorShape=[{n}], TensorDtypes=Half), but "
        "Rank {b} is running collective: CollectiveFingerPrint(SequenceNumber=301, OpType=ALLREDUCE, TensorShape=[4096]).\n"
    )
    v = _verdict(report.format(a=2, b=5, n=8192) + report.format(a=7, b=5, n=8192))
    assert v.category == "collective_mismatch" and v.culprit_ranks == (5,)


def test_an_error_trace_carries_the_warn_before_it() -> None:
    v = _verdict(
        "ib-a03:5120:5301 [2] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer 10.9.0.4<40211> with "
        "status=12 opcode=129 len=4096 vendor err 129 (Recv) localGid ::ffff:10.9.0.3 remoteGids::ffff:10.9.0.4\n"
        "ib-a03:5120:5301 [2] NCCL INFO transport/net.cc:1298 -> 6\n"
        "ib-a03:5120:5301 [2] NCCL INFO proxy.cc:694 -> 6\n"
        "ib-a03:5120:5301 [2] NCCL INFO proxy.cc:874 -> 6 [Progress Thread]\n"
    )
    assert v.category == "network_ib"


def test_one_reporter_of_a_first_collective_is_not_every_rank_waiting() -> None:
    line = (
        "[rank{r}]:[E1102 04:11:52.118733291 ProcessGroupNCCL.cpp:688] [PG ID 6 PG GUID 238(PIPELINE_MODEL_PARALLEL_GROUP) "
        "Rank {g}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=COALESCED, NumelIn=0, "
        "NumelOut=0, Timeout(ms)=600000) ran for 651125 milliseconds before timing out.\n"
    )
    assert _verdict(line.format(r=107, g=6)).category != "init_failure"
    both = _verdict(line.format(r=107, g=6) + line.format(r=99, g=5))
    assert both.category == "init_failure"


def test_torchruns_failure_summary_maps_local_ranks_of_its_node() -> None:
    # --tee lines carry the local rank; the summary of the same console says which global rank it is.
    text = (
        "[default3]:Traceback (most recent call last):\n"
        "[default3]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 6.00 GiB.\n"
        + _torchrun_console([(4, -15, 8804)], (11, 1, 8803)).replace("(local_rank: 11)", "(local_rank: 3)")
    )
    v = _verdict(text)
    assert v.category == "oom" and v.culprit_ranks == (11,)


def test_a_store_read_that_timed_out_is_a_rendezvous_wait() -> None:
    v = _verdict(
        "[rank1]:[W1122 06:41:03.118713029 socket.cpp:472] [c10d] waitForInput: poll for socket SocketImpl(fd=72, "
        "addr=[trn-b04]:50212, remote=[trn-b01]:29511) returned 0, likely a timeout\n"
        "[rank1]:[E1122 06:41:03.118733291 socket.cpp:497] [c10d] waitForInput: socket SocketImpl(fd=72, "
        "addr=[trn-b04]:50212, remote=[trn-b01]:29511) timed out after 600000ms\n"
    )
    assert v.category == "bootstrap_rendezvous" and v.culprit_ranks == ()
    assert "trn-b01" in v.summary


def test_a_store_based_barrier_counts_the_ranks_that_joined() -> None:
    waiting = (
        "INFO:torch.distributed.distributed_c10d:Waiting in store based barrier to initialize process group for "
        "rank: 2, key: store_based_barrier_key:1 (world_size=16, worker_count=6, timeout=0:30:00)\n"
    )
    v = _verdict(waiting)
    assert v.category == "bootstrap_rendezvous" and "6 of 16" in v.summary
    v = _verdict(
        waiting
        + "RuntimeError: Timed out initializing process group in store based barrier on rank: 2, for key: "
        "store_based_barrier_key:1 (world_size=16, worker_count=6, timeout=0:30:00)\n"
    )
    assert v.category == "bootstrap_rendezvous" and "timed out" in v.summary


def test_a_servers_report_that_a_child_failed_is_not_an_all_clear() -> None:
    v = _verdict(
        "[2026-02-11 08:14:51] SIGQUIT received. signum=None, frame=None. It usually means one child failed.\n"
    )
    assert v.category == "unknown"
    v = _verdict(
        "[2026-08-10 09:47:36] Subprocess scheduler_0 (pid=52211) crashed with exit code -11. Triggering SIGQUIT for cleanup...\n"
    )
    assert v.category == "segfault_crash"


def test_an_nccl_warning_no_pattern_explains_is_not_an_all_clear() -> None:
    v = _verdict(
        "gpu-a:3311:3350 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/IPC\n"
        "gpu-a:3311:3350 [0] enqueue.cc:1938 NCCL WARN failed to ope\n"
    )
    assert v.category == "unknown" and "NCCL warned" in v.summary


def test_an_nccl_warning_is_placed_by_the_part_of_nccl_that_wrote_it() -> None:
    # The same cut WARN from the P2P transport's source file: a GPU peer path failure.
    v = _verdict(
        "gpu-a:3311:3350 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/IPC\n"
        "gpu-a:3311:3350 [0] transport/p2p.cc:238 NCCL WARN failed to ope\n"
    )
    assert v.category == "p2p_topology"


_CUT_TRACEBACK = (
    "gpu-h1: step 40 loss 1.92\n"
    "gpu-h2: step 40 loss 1.95\n"
    "gpu-h2: Traceback (most recent call last):\n"
    'gpu-h2:   File "/srv/app/train.py", line 211, in <module>\n'
    "gpu-h2:     build_index(cfg)\n"
    'gpu-h2:   File "/srv/app/data/index.py", line 58, in build_'
)


def test_a_traceback_cut_before_its_exception_is_the_applications_error() -> None:
    v = _verdict(_CUT_TRACEBACK)
    assert (v.category, v.confidence) == ("other", "low")


def test_a_cut_traceback_names_the_one_host_of_several_that_began_it() -> None:
    init = "".join(
        f"gpu-h{n}: gpu-h{n}:50{n}:50{n} [0] NCCL INFO comm 0x7f1{n} rank {n - 1} nranks 2 cudaDev 0 "
        f"busId 1000 - Init COMPLETE\n"
        for n in (1, 2)
    )
    v = _verdict(init + _CUT_TRACEBACK)
    assert (v.category, v.culprit_hosts) == ("other", ("gpu-h2",))


@pytest.mark.parametrize(
    "extra",
    [
        # its frames ran through c10d's setup: the missing exception may be NCCL's
        '  File "/usr/lib/python3/site-packages/torch/distributed/distributed_c10d.py", line 4018, in barrier\n',
        # NCCL began setting up a communicator and never finished
        "gpu-h2:88:88 [1] NCCL INFO comm 0x55d0 rank 1 nranks 2 cudaDev 1 busId 41000 - Init START\n",
    ],
)
def test_a_cut_traceback_near_nccl_is_not_read_as_the_applications(extra: str) -> None:
    assert _verdict(extra + _CUT_TRACEBACK).category == "unknown"


def test_a_device_side_assertion_names_its_rank() -> None:
    v = _verdict(
        "[rank2]: /opt/src/aten/src/ATen/native/cuda/Indexing.cu:1236: indexSelectSmallIndex: block: [3,0,0], "
        "thread: [17,0,0] Assertion `srcIndex < srcSelectDimSize` failed.\n"
        "[rank0]:[E1104 08:12:44.117202 3301 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=31, OpType=ALLREDUCE, NumelIn=4096, NumelOut=4096, "
        "Timeout(ms)=600000) ran for 600031 milliseconds before timing out.\n"
    )
    assert (v.category, v.culprit_ranks) == ("cuda_error", (2,))


_STORE_RETRY = (
    "[W socket.cpp:601] [c10d] The client socket has failed to connect to [trn-b04]:29511 "
    "(errno: 22 - Invalid argument).\n"
)


def test_store_retries_before_the_group_formed_are_no_failure() -> None:
    text = (
        _STORE_RETRY * 3
        + "distributed_backend=nccl\nAll distributed processes registered. Starting with 4 processes\n"
    )
    assert _verdict(text).category == "no_failure"


def test_store_retries_with_no_group_formed_after_them_stay_a_rendezvous_problem() -> None:
    text = "All distributed processes registered. Starting with 4 processes\n" + _STORE_RETRY * 3
    assert _verdict(text).category == "bootstrap_rendezvous"


def test_a_cut_traceback_after_a_launcher_killed_its_workers_is_not_read_as_the_applications() -> None:
    kill = "[2021-06-02 11:04:19,512] [INFO] [launch.py:131:sigkill_handler] Killing subprocess 40211\n"
    assert _verdict(kill + _CUT_TRACEBACK).category == "unknown"


def test_a_trace_quotes_the_warning_it_carries_up() -> None:
    text = (
        "dgx-q1:880:901 [3] misc/nvmlwrap.cc:180 NCCL WARN nvmlDeviceGetHandleByPciBusId() failed: Not Found\n"
        + "".join(f"dgx-q1:880:901 [3] NCCL INFO {f} -> 2\n" for f in ("graph/xml.cc:850", "init.cc:1548"))
    )
    v = _verdict(text)
    assert v.category == "init_failure"
    assert "nvmlDeviceGetHandleByPciBusId" in v.summary and "WARN" in v.evidence[0].text


def test_tracebacks_cut_on_several_ranks_at_once_are_not_read_as_one_applications_error() -> None:
    text = "".join(
        f'[rank{r}]: Traceback (most recent call last):\n[rank{r}]:   File "/srv/app/fit.py", line 90, in <module>\n'
        for r in (0, 1)
    )
    assert _verdict(text).category == "unknown"
