"""Setup lines (interfaces, IB, /dev/shm, fabric manager, GPU topology, MASTER_ADDR) as evidence for a
failure at or right after init, and never as a failure on their own (correlate/setup.py)."""

from __future__ import annotations

import nccllog
from nccllog.correlate import setup_vocab

# Two hosts, two ranks each, NCCL 2.23.4 (connections made at the first collective).
HOSTS = {"trn-b04": (38211, 38212), "trn-b05": (40101, 40102)}
COMM = "0x55d0c1a3e2f0"
COMM_ID = "0x5f1e2d3c4b5a6978"


def _init(socket_ifaces: dict[str, str], *, complete: bool = True, extra: str = "") -> list[str]:
    out = []
    rank = 0
    for host, pids in HOSTS.items():
        ip = "10.1.2.3" if host == "trn-b04" else "10.1.2.4"
        for dev, pid in enumerate(pids):
            h = f"{host}:{pid}:{pid} [{dev}]"
            out += [
                f"{h} NCCL INFO Bootstrap : Using eth0:{ip}<0>",
                f"{h} NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.",
                f"{h} NCCL INFO NET/IB : No device found.",
                f"{h} NCCL INFO NET/Socket : Using {socket_ifaces[host]}",
                f"{h} NCCL INFO Using network Socket",
                f"{h} NCCL INFO ncclCommInitRankConfig comm {COMM} rank {rank} nranks 4 cudaDev {dev} nvmlDev {dev} "
                f"busId {dev + 1}b000 commId {COMM_ID} - Init START",
            ]
            if extra:
                out.append(f"{h} NCCL INFO {extra}")
            if complete:
                out.append(
                    f"{h} NCCL INFO ncclCommInitRankConfig comm {COMM} rank {rank} nranks 4 cudaDev {dev} nvmlDev {dev} "
                    f"busId {dev + 1}b000 commId {COMM_ID} - Init COMPLETE"
                )
            rank += 1
    return out


def _timeouts(ranks: range, seq: int = 1, op: str = "ALLREDUCE") -> list[str]:
    return [
        f"[rank{r}]:[E311 09:32:4{r}.118733291 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
        f"operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
        f"60008{r} milliseconds before timing out."
        for r in ranks
    ]


VIRTUAL = {
    "trn-b04": "[0]docker0:172.17.0.1<0>",
    "trn-b05": "[0]veth3a9f2c1:fe80::4c1d:8fff:fe02:91a3%veth3a9f2c1<0>",
}


def test_hang_after_init_with_only_virtual_interfaces_is_network_socket() -> None:
    inc = nccllog.analyze("\n".join(_init(VIRTUAL) + _timeouts(range(4))) + "\n")
    assert inc.verdict.category == "network_socket"
    assert inc.verdict.culprit_ranks == ()
    assert "docker0" in inc.verdict.summary
    assert any("NET/Socket : Using [0]docker0" in e.text for e in inc.verdict.evidence)
    assert any("NCCL_SOCKET_IFNAME" in step for step in inc.verdict.remediation)


def test_same_setup_lines_on_a_completed_run_are_no_failure() -> None:
    # the run's own end is the positive evidence no_failure needs
    inc = nccllog.analyze("\n".join([*_init(VIRTUAL), "Training completed."]) + "\n")
    assert inc.verdict.category == "no_failure"
    assert not [h for h in inc.hypotheses if h.category == "network_socket"]


def test_routable_interfaces_add_no_socket_reading_to_a_first_collective_hang() -> None:
    real = {"trn-b04": "[0]eth0:10.1.2.3<0>", "trn-b05": "[0]eth0:10.1.2.4<0>"}
    inc = nccllog.analyze("\n".join(_init(real) + _timeouts(range(4))) + "\n")
    assert inc.verdict.category != "network_socket"
    assert not [h for h in inc.hypotheses if h.category == "network_socket"]


def test_a_later_hang_is_not_blamed_on_the_interfaces() -> None:
    # seq 4170: the job ran for a while over these interfaces, so they carried traffic.
    inc = nccllog.analyze("\n".join(_init(VIRTUAL) + _timeouts(range(4), seq=4170)) + "\n")
    assert not [h for h in inc.hypotheses if h.category == "network_socket"]


def test_one_host_with_docker0_is_not_a_socket_problem() -> None:
    lines = [
        line
        for line in _init({"trn-b04": "[0]docker0:172.17.0.1<0>", "trn-b05": ""})
        if line.startswith("trn-b04")
    ]
    text = "\n".join(lines + _timeouts(range(2))).replace("nranks 4", "nranks 2")
    inc = nccllog.analyze(text + "\n")
    assert not [h for h in inc.hypotheses if h.category == "network_socket"]


def test_dev_shm_errors_are_init_failure_with_the_shm_remedy() -> None:
    lines = [
        "trn-b04:38211:38211 [0] NCCL INFO ncclCommInitRankConfig comm 0x55d0c1a3e2f0 rank 0 nranks 2 cudaDev 0 "
        "nvmlDev 0 busId 1b000 commId 0x5f1e2d3c4b5a6978 - Init START",
        "",
        "trn-b04:38211:38267 [0] misc/shmutils.cc:87 NCCL WARN Error: failed to extend /dev/shm/nccl-Qm3vTz to "
        "9637892 bytes, error: No space left on device (28)",
        "",
        "trn-b04:38211:38267 [0] misc/shmutils.cc:128 NCCL WARN Error while creating shared memory segment "
        "/dev/shm/nccl-Qm3vTz (size 9637888), error: No space left on device (28)",
        "trn-b04:38211:38267 [0] NCCL INFO transport/shm.cc:114 -> 2",
        "[rank0]: torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:2027, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.23.4",
        "[rank0]: ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. ",
    ]
    inc = nccllog.analyze("\n".join(lines) + "\n")
    assert inc.verdict.category == "init_failure"
    assert inc.verdict.culprit_hosts == ()  # one log of one host: nothing singles the host out
    assert "/dev/shm" in inc.verdict.summary
    assert any("--shm-size" in s and "--ipc=host" in s for s in inc.verdict.remediation)


def test_shm_info_lines_alone_are_no_failure() -> None:
    lines = [
        "trn-b04:38211:38267 [0] NCCL INFO Allocated 9637892 bytes of shared memory in /dev/shm/nccl-Qm3vTz",
        "trn-b04:38211:38267 [0] NCCL INFO fallocate: Failed to extend /dev/shm/nccl-Qm3vTz to 9637892 bytes, "
        "error: Interrupted system call (4) - retrying",
        "trn-b04:38211:38211 [0] NCCL INFO comm 0x55d1e2a0 rank 0 nranks 8 cudaDev 0 busId 18000 - Destroy COMPLETE",
    ]
    inc = nccllog.analyze("\n".join(lines) + "\n")
    assert inc.verdict.category == "no_failure"


STORE_TIMEOUT = [
    "[rank2]:[E311 09:40:03.118733291 socket.cpp:1028] [c10d] The client socket has timed out after 900s while "
    "trying to connect to ({addr}, 29500).",
    "[rank2]: torch.distributed.DistNetworkError: The client socket has timed out after 900s while trying to "
    "connect to ({addr}, 29500).",
]


def _rendezvous(addr: str) -> str:
    lines = [
        "[setup] 2025-03-11 09:25:01 host=trn-b05 NNODES=2 NODE_RANK=1 MASTER_ADDR={addr} MASTER_PORT=29500",
        "+ torchrun --nnodes=2 --node_rank=1 --nproc_per_node=2 --master_addr={addr} --master_port=29500 train.py",
        *STORE_TIMEOUT,
    ]
    return "\n".join(line.format(addr=addr) for line in lines) + "\n"


def test_master_addr_netmask_with_store_timeout_is_bootstrap_rendezvous() -> None:
    inc = nccllog.analyze(_rendezvous("255.255.0.0"))
    assert inc.verdict.category == "bootstrap_rendezvous"
    assert "netmask" in inc.verdict.summary
    assert any("MASTER_ADDR" in step for step in inc.verdict.remediation)


def test_routable_master_addr_gets_the_plain_rendezvous_reading() -> None:
    inc = nccllog.analyze(_rendezvous("10.1.2.3"))
    assert inc.verdict.category == "bootstrap_rendezvous"
    assert not any("netmask" in h.summary for h in inc.hypotheses)


def test_netmask_master_addr_on_a_clean_run_is_no_failure() -> None:
    inc = nccllog.analyze(
        "+ export MASTER_ADDR=255.255.255.0\nMASTER_ADDR=255.255.255.0\nTraining completed.\n"
    )
    assert inc.verdict.category == "no_failure"


def _topo(cells: list[list[str]]) -> list[str]:
    n = len(cells)
    head = "\t" + "\t".join(f"GPU{i}" for i in range(n)) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"
    rows = [
        f"GPU{i}\t" + "\t".join(" X " if c == "X" else c for c in row) + "\t0-31\t0\t\tN/A"
        for i, row in enumerate(cells)
    ]
    return ["+ nvidia-smi topo -m", head, *rows, "", "Legend:", "", "  X    = Self"]


def _single_node(topo: list[str]) -> str:
    lines = list(topo)
    for r in range(4):
        pid = 51200 + r
        h = f"trn-c11:{pid}:{pid} [{r}]"
        lines += [
            f"{h} NCCL INFO ncclCommInitRankConfig comm 0x5611a0c3d2e0 rank {r} nranks 4 cudaDev {r} nvmlDev {r} "
            f"busId {r + 1}b000 commId 0x2a3b4c5d6e7f8091 - Init START",
            f"trn-c11:{pid}:{pid + 60} [{r}] NCCL INFO Channel 00/0 : {r}[{r}] -> {(r + 1) % 4}[{(r + 1) % 4}] via P2P/CUMEM",
            f"{h} NCCL INFO ncclCommInitRankConfig comm 0x5611a0c3d2e0 rank {r} nranks 4 cudaDev {r} nvmlDev {r} "
            f"busId {r + 1}b000 commId 0x2a3b4c5d6e7f8091 - Init COMPLETE",
        ]
    return "\n".join(lines + _timeouts(range(4))) + "\n"


PHB = [
    ["X", "PHB", "SYS", "SYS"],
    ["PHB", "X", "SYS", "SYS"],
    ["SYS", "SYS", "X", "PHB"],
    ["SYS", "SYS", "PHB", "X"],
]
NVLINK = [[("X" if i == j else "NV12") for j in range(4)] for i in range(4)]


def test_topo_phb_and_first_allreduce_hang_is_p2p_topology() -> None:
    inc = nccllog.analyze(_single_node(_topo(PHB)))
    assert inc.verdict.category == "p2p_topology"
    assert "GPU0-GPU1 PHB" in inc.verdict.summary
    assert any("NCCL_P2P_DISABLE" in step for step in inc.verdict.remediation)


def test_topo_all_nvlink_adds_no_topology_reading() -> None:
    inc = nccllog.analyze(_single_node(_topo(NVLINK)))
    assert inc.verdict.category != "p2p_topology"
    assert inc.verdict.category == "init_failure"  # the generic first-collective reading


def test_fabric_manager_not_running_explains_cuda_802() -> None:
    lines = [f"[rank{r}]: RuntimeError: CUDA error: system not yet initialized" for r in range(2)] + [
        "trn-c11:51200:51200 [0] NCCL INFO NVLS multicast support is not available on dev 0"
    ]
    inc = nccllog.analyze("\n".join(lines) + "\n")
    assert inc.verdict.category == "init_failure"
    assert "fabric manager" in inc.verdict.summary
    assert any("nvidia-fabricmanager" in step for step in inc.verdict.remediation)


def test_ib_expected_but_missing_on_one_host_is_network_ib() -> None:
    real = {"trn-b04": "[0]eth0:10.1.2.3<0>", "trn-b05": "[0]eth0:10.1.2.4<0>"}
    lines = _init(real)
    # trn-b04 has its HCAs; trn-b05 keeps the "No device found" lines of _init.
    lines = [
        line.replace(
            "NET/IB : No device found.",
            "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:10.1.2.3<0>",
        )
        if line.startswith("trn-b04")
        else line
        for line in lines
    ]
    inc = nccllog.analyze("\n".join(lines + _timeouts(range(4))) + "\n")
    ib = [h for h in inc.hypotheses if h.category == "network_ib"]
    assert ib and ib[0].culprit_hosts == ("trn-b05",)
    assert inc.verdict.category == "network_ib"


def test_no_ib_device_on_an_ethernet_cluster_is_not_evidence() -> None:
    real = {"trn-b04": "[0]eth0:10.1.2.3<0>", "trn-b05": "[0]eth0:10.1.2.4<0>"}
    inc = nccllog.analyze("\n".join(_init(real) + _timeouts(range(4))) + "\n")
    assert not [h for h in inc.hypotheses if h.category == "network_ib"]


# --------------------------------------------------------------------------- the vocabulary


def test_interface_and_address_rules() -> None:
    shared = {"172.17.0.1": {"trn-b04", "trn-b05"}}
    assert setup_vocab.iface_problem("docker0", "172.17.0.1", {}) is not None
    assert setup_vocab.iface_problem("veth3a9f2c1", "10.9.0.1", {}) is not None
    assert setup_vocab.iface_problem("lo", "127.0.0.1", {}) is not None
    assert setup_vocab.iface_problem("eth0", "fe80::4c1d:8fff:fe02:91a3%eth0", {}) is not None
    assert setup_vocab.iface_problem("eth0", "169.254.3.7", {}) is not None
    assert setup_vocab.iface_problem("eth0", "172.17.0.1", shared) is not None
    assert setup_vocab.iface_problem("eth0", "172.17.0.2", shared) is None
    assert setup_vocab.iface_problem("eth0", "10.1.2.3", {}) is None
    assert setup_vocab.iface_problem("ens8f0np0", "10.1.2.3", {}) is None
    assert setup_vocab.iface_problem("bond0", "192.168.7.12", {}) is None


def test_master_addr_rules() -> None:
    assert setup_vocab.bad_master_addr("255.255.0.0") == "a netmask"
    assert setup_vocab.bad_master_addr("255.255.255.0") == "a netmask"
    assert setup_vocab.bad_master_addr("255.255.255.255") == "the broadcast address"
    assert setup_vocab.bad_master_addr("0.0.0.0") == "the unspecified address"
    assert setup_vocab.bad_master_addr("255.255.3.0") is None
    assert setup_vocab.bad_master_addr("10.1.2.3") is None
    assert setup_vocab.bad_master_addr("trn-b04") is None


def test_parse_ifaces_reads_every_interface() -> None:
    row = {"ifaces": "[0]eth0:10.1.2.3<0> [1]docker0:172.17.0.1<0> [2]veth1:fe80::1%veth1<0>"}
    assert setup_vocab.parse_ifaces(row) == [
        ("eth0", "10.1.2.3"),
        ("docker0", "172.17.0.1"),
        ("veth1", "fe80::1%veth1"),
    ]
    assert setup_vocab.parse_ifaces({"iface": "ib0", "ip": "10.1.0.17"}) == [("ib0", "10.1.0.17")]
