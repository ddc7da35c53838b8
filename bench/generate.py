"""Generate a realistic log tree of a large job with one planted failure, deterministically by seed.

One file per rank, as torchrun --log-dir leaves them (``<host>/attempt_0/<local_rank>/stderr.log``)
or flat (``rank_<N>.log``): NCCL_DEBUG=INFO init chatter (version, bootstrap, NET/IB, comm init,
channels, rings, trees), training progress lines, tqdm bars with carriage returns, harmless
warnings, and the planted failure:

- ``straggler``: one rank stops before collective SeqNum S; every other rank's watchdog fires.
- ``oom``: one rank hits CUDA OOM; the others time out ten minutes later.
- ``ib``: NCCL IB completion errors (status 12, vendor err 129) from many ranks toward one host.

Usage: python bench/generate.py OUT --ranks 1024 --file-size 1MiB --failure straggler --seed 1
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
from datetime import datetime, timedelta
from pathlib import Path

GPUS_PER_HOST = 8
NCCL_VERSION = "2.21.5"


def _size(text: str) -> int:
    units = {"k": 1024, "kib": 1024, "m": 1024**2, "mib": 1024**2, "g": 1024**3, "gib": 1024**3}
    t = text.strip().lower()
    for suffix in sorted(units, key=len, reverse=True):
        if t.endswith(suffix):
            return int(float(t[: -len(suffix)]) * units[suffix])
    return int(t)


class Job:
    """The shape of the generated job: ranks, hosts, pids, addresses, the planted culprit."""

    def __init__(self, ranks: int, failure: str, seed: int) -> None:
        self.ranks = ranks
        self.failure = failure
        self.rng = random.Random(seed)
        self.hosts = [f"gpu-{i:04d}" for i in range((ranks + GPUS_PER_HOST - 1) // GPUS_PER_HOST)]
        self.ips = [f"10.{20 + i // 250}.{i % 250}.{11 + i % 7}" for i in range(len(self.hosts))]
        self.pids = [40000 + self.rng.randrange(20000) for _ in range(ranks)]
        self.culprit = self.rng.randrange(ranks)
        self.bad_host = self.culprit // GPUS_PER_HOST
        self.seq = 4000 + self.rng.randrange(2000)
        self.start = datetime(2026, 3, 14, 9, 0, 0)
        self.comm = f"0x{self.rng.getrandbits(64):016x}"
        self.hang_at: datetime | None = None

    def host_of(self, rank: int) -> int:
        return rank // GPUS_PER_HOST

    def expected(self) -> dict[str, object]:
        category = {"straggler": "straggler_hang", "oom": "oom", "ib": "network_ib"}[self.failure]
        out: dict[str, object] = {"category": category, "culprit_ranks": [self.culprit]}
        if self.failure == "ib":
            first = self.bad_host * GPUS_PER_HOST
            out["culprit_ranks"] = list(range(first, min(first + GPUS_PER_HOST, self.ranks)))
            out["culprit_hosts"] = [self.hosts[self.bad_host]]
        return out


def _c10(rank: int, when: datetime, src: str, msg: str, level: str = "E") -> str:
    ns = f"{(when.microsecond * 1000 + rank) % 10**9:09d}"
    return f"[rank{rank}]:[{level}{when.month}{when.day:02d} {when:%H:%M:%S}.{ns} {src}] {msg}"


def _nccl(job: Job, rank: int, msg: str, tid_offset: int = 0) -> str:
    host = job.hosts[job.host_of(rank)]
    pid = job.pids[rank]
    return f"{host}:{pid}:{pid + tid_offset} [{rank % GPUS_PER_HOST}] NCCL INFO {msg}"


def _init_chatter(job: Job, rank: int) -> list[str]:
    h = job.host_of(rank)
    lr = rank % GPUS_PER_HOST
    bus = f"{0x18 + lr * 0x11:x}000"
    lines = [
        _nccl(job, rank, f"Bootstrap : Using eth0:{job.ips[h]}<0>"),
        _nccl(job, rank, "NET/Plugin: No plugin found (libnccl-net.so)"),
        _nccl(job, rank, "cudaDriverVersion 12040"),
        _nccl(job, rank, f"NCCL version {NCCL_VERSION}+cuda12.4"),
        _nccl(job, rank, "NCCL_IB_HCA set by environment to mlx5_0,mlx5_1,mlx5_2,mlx5_3"),
        _nccl(job, rank, "NCCL_SOCKET_IFNAME set by environment to eth0"),
        _nccl(
            job,
            rank,
            f"NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB [RO]; OOB eth0:{job.ips[h]}<0>",
            7,
        ),
        _nccl(job, rank, "Using non-device net plugin version 0", 7),
        _nccl(job, rank, "Using network IB", 7),
        _nccl(
            job,
            rank,
            f"ncclCommInitRank comm 0x55{rank:010x} rank {rank} nranks {job.ranks} cudaDev {lr} nvmlDev {lr} "
            f"busId {bus} commId {job.comm} - Init START",
            7,
        ),
        _nccl(job, rank, f"Setting affinity for GPU {lr} to ffff,ffffffff", 7),
        _nccl(
            job,
            rank,
            f"comm 0x55{rank:010x} rank {rank} nRanks {job.ranks} nNodes {len(job.hosts)} localRanks 8 "
            f"localRank {lr} MNNVL 0",
            7,
        ),
    ]
    nxt, prv = (rank + 1) % job.ranks, (rank - 1) % job.ranks
    for c in range(16):
        lines.append(_nccl(job, rank, f"Channel {c:02d}/16 :    0   1   2   3   4   5   6   7", 7))
        lines.append(_nccl(job, rank, f"Ring {c:02d} : {prv} -> {rank} -> {nxt}", 7))
    lines.append(_nccl(job, rank, f"Trees [0] {nxt}/-1/-1->{rank}->{prv} [1] {nxt}/-1/-1->{rank}->{prv}", 7))
    for c in range(16):
        lines.append(
            _nccl(job, rank, f"Channel {c:02d}/0 : {rank}[{lr}] -> {nxt}[{nxt % 8}] via P2P/CUMEM/read", 7)
        )
    lines += [
        _nccl(job, rank, "Connected all rings", 7),
        _nccl(job, rank, "Connected all trees", 7),
        _nccl(job, rank, "threadThresholds 8/8/64 | 8192/8/64 | 512 | 512", 7),
        _nccl(
            job,
            rank,
            "32 coll channels, 32 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer",
            7,
        ),
        _nccl(
            job,
            rank,
            f"ncclCommInitRank comm 0x55{rank:010x} rank {rank} nranks {job.ranks} cudaDev {lr} nvmlDev {lr} "
            f"busId {bus} commId {job.comm} - Init COMPLETE",
            7,
        ),
    ]
    return lines


def _progress(job: Job, rank: int, step: int, when: datetime) -> list[str]:
    r = job.rng
    out = [
        f"[rank{rank}]:step {step:6d} | loss {2.0 + r.random():.4f} | lr 3.00e-04 | grad_norm {r.random() * 2:.3f} "
        f"| tokens/s {90000 + r.randrange(9000)} | {when:%Y-%m-%d %H:%M:%S}",
    ]
    if rank == 0 and step % 7 == 0:  # tqdm draws its bar on the main process only
        bar = "".join(
            f"\rTraining: {p:3d}%|{'#' * (p // 10):<10}| {step + p}/{step + 100} [00:{p // 10:02d}<00:{10 - p // 10:02d},"
            f"  9.87it/s]"
            for p in range(0, 101, 25)
        )
        out.append(bar)
    if step % 97 == 0:
        out.append(
            "/opt/conda/lib/python3.11/site-packages/torch/utils/checkpoint.py:464: UserWarning: "
            "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly."
        )
    return out


def _failure_lines(job: Job, rank: int, when: datetime) -> list[str]:
    if job.failure == "ib":
        if job.host_of(rank) == job.bad_host or rank % 3:
            return []
        peer = job.ips[job.bad_host]
        h = job.hosts[job.host_of(rank)]
        pid = job.pids[rank]
        return [
            "",
            f"{h}:{pid}:{pid + 9} [{rank % 8}] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
            f"{peer}<{40000 + rank}> with status=12 opcode=0 len=0 vendor err 129 (Send) hca mlx5_{rank % 4}",
            f"{h}:{pid}:{pid + 9} [{rank % 8}] NCCL INFO transport/net_ib.cc:1805 -> 6",
        ]
    if job.failure == "oom" and rank == job.culprit:
        return [
            "Traceback (most recent call last):",
            '  File "/workspace/train.py", line 211, in <module>',
            "    loss.backward()",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of "
            "79.19 GiB of which 1.06 GiB is free. Including non-PyTorch memory, this process has 78.12 GiB memory in "
            "use. Of the allocated memory 71.40 GiB is allocated by PyTorch, and 5.22 GiB is reserved by PyTorch but "
            "unallocated. If reserved but unallocated memory is large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory "
            "Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
        ]
    if rank == job.culprit and job.failure == "straggler":
        return []  # the straggler is silent
    t = when + timedelta(seconds=600, milliseconds=job.rng.randrange(900))
    elapsed = 600000 + job.rng.randrange(40, 900)
    pg = f"[PG ID 0 PG GUID 0(default_pg) Rank {rank}]"
    return [
        _c10(
            rank,
            t,
            "ProcessGroupNCCL.cpp:632",
            f"[Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={job.seq}, "
            f"OpType=ALLREDUCE, NumelIn=50331648, NumelOut=50331648, Timeout(ms)=600000) ran for {elapsed} "
            "milliseconds before timing out.",
        ),
        _c10(
            rank,
            t,
            "ProcessGroupNCCL.cpp:2168",
            f"{pg}  failure detected by watchdog at work sequence id: {job.seq} PG status: last enqueued work: "
            f"{job.seq}, last completed work: {job.seq - 1}",
        ),
        _c10(
            rank,
            t,
            "ProcessGroupNCCL.cpp:1595",
            f"[Rank {rank}] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA "
            "kernels, subsequent GPU operations might run on corrupted/incomplete data.",
        ),
    ]


def write_tree(out: Path, ranks: int, file_size: int, failure: str, seed: int, layout: str, gz: bool) -> dict:
    """Write the tree under ``out`` and return its expected verdict."""
    job = Job(ranks, failure, seed)
    out.mkdir(parents=True, exist_ok=True)
    for rank in range(ranks):
        h = job.host_of(rank)
        if layout == "logdir":
            path = out / job.hosts[h] / "none_x8k2" / "attempt_0" / str(rank % GPUS_PER_HOST) / "stderr.log"
        else:
            path = out / f"rank_{rank}.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = _init_chatter(job, rank)
        body_size = sum(len(s) + 1 for s in lines)
        when = job.start
        step = 0
        tail_size = sum(len(s) + 1 for s in _failure_lines(job, rank, job.start))
        while body_size + tail_size < file_size:
            step += 1
            when += timedelta(seconds=1)
            for s in _progress(job, rank, step, when):
                lines.append(s)
                body_size += len(s) + 1
        if failure == "straggler" and rank == job.culprit:
            lines = lines[: max(len(lines) - 40, 1)]  # it stopped earlier than everyone else
        # Training is synchronous: the collective hangs at the same moment for every rank, so the
        # watchdogs of all waiting ranks fire together (to within the watchdog's poll latency).
        if job.hang_at is None:
            job.hang_at = when
        tail = _failure_lines(job, rank, job.hang_at)
        data = ("\n".join(lines + tail) + "\n").encode()
        if gz:
            path = path.with_name(path.name + ".gz")
            path.write_bytes(gzip.compress(data, compresslevel=1, mtime=0))
        else:
            path.write_bytes(data)
    expected = job.expected()
    (out.parent / f"{out.name}.expected.json").write_text(json.dumps(expected, indent=2) + "\n")
    return expected


def main() -> None:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--file-size", default="256KiB")
    ap.add_argument("--failure", choices=["straggler", "oom", "ib"], default="straggler")
    ap.add_argument("--layout", choices=["flat", "logdir"], default="flat")
    ap.add_argument("--gz", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    exp = write_tree(a.out, a.ranks, _size(a.file_size), a.failure, a.seed, a.layout, a.gz)
    print(json.dumps(exp))


if __name__ == "__main__":
    main()
