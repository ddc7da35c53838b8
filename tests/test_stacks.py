"""Stack dumps (py-spy, faulthandler): the process that is not in the collective the others wait in."""

from __future__ import annotations

import nccllog
from nccllog.correlate import stacks

PIDS = {0: 52310, 1: 52311, 2: 52312, 3: 52313}


def _init_lines() -> list[str]:
    return [
        f"dgx-b12:{pid}:{pid + 90} [{r}] NCCL INFO comm 0x5611a0{r}c rank {r} nranks 4 cudaDev {r} nvmlDev {r} "
        f"busId {r + 1}8000 commId 0x71c2f09a3b5d4e01 - Init COMPLETE"
        for r, pid in PIDS.items()
    ]


def _waiting(pid: int) -> list[str]:
    return [
        f"Process {pid}: /usr/bin/python3 -u pretrain.py --config cfg/7b.yaml",
        "Python v3.11.9 (/usr/bin/python3.11)",
        "",
        f'Thread {pid} (idle): "MainThread"',
        "    synchronize (torch/cuda/__init__.py:954)",
        "    all_reduce (torch/distributed/distributed_c10d.py:2288)",
        "    wrapper (torch/distributed/c10d_logger.py:83)",
        "    reduce_loss (pretrain.py:311)",
        "    train_step (pretrain.py:402)",
        "    <module> (pretrain.py:520)",
        f'Thread {pid + 40} (idle): "Thread-2 (_pin_memory_loop)"',
        "    wait (threading.py:331)",
        "    get (queue.py:180)",
        "    _pin_memory_loop (torch/utils/data/_utils/pin_memory.py:51)",
        "",
    ]


def _loading(pid: int) -> list[str]:
    return [
        f"Process {pid}: /usr/bin/python3 -u pretrain.py --config cfg/7b.yaml",
        "Python v3.11.9 (/usr/bin/python3.11)",
        "",
        f'Thread {pid} (active+gil): "MainThread"',
        "    _read_shard (data/packed.py:144)",
        "    __getitem__ (data/packed.py:97)",
        "    fetch (torch/utils/data/_utils/fetch.py:52)",
        "    _next_data (torch/utils/data/dataloader.py:673)",
        "    train_step (pretrain.py:388)",
        "    <module> (pretrain.py:520)",
        "",
    ]


def test_the_rank_outside_the_collective_is_named_through_its_pid() -> None:
    dumps: list[str] = []
    for r, pid in PIDS.items():
        dumps += _loading(pid) if r == 2 else _waiting(pid)
    v = nccllog.analyze_text("\n".join(_init_lines() + dumps) + "\n").verdict
    assert v.category == "straggler_hang"
    assert list(v.culprit_ranks) == [2]
    assert "torch/utils/data" in v.summary and "all_reduce" in v.summary


def test_a_different_collective_is_a_mismatch() -> None:
    dumps: list[str] = []
    for r, pid in PIDS.items():
        lines = _waiting(pid)
        if r == 3:
            lines = [
                x.replace(
                    "all_reduce (torch/distributed/distributed_c10d.py:2288)",
                    "broadcast (torch/distributed/distributed_c10d.py:2611)",
                )
                for x in lines
            ]
        dumps += lines
    v = nccllog.analyze_text("\n".join(_init_lines() + dumps) + "\n").verdict
    assert v.category == "collective_mismatch"
    assert list(v.culprit_ranks) == [3]


def test_all_alike_names_nobody() -> None:
    dumps: list[str] = []
    for pid in PIDS.values():
        dumps += _waiting(pid)
    incident = nccllog.analyze_text("\n".join(_init_lines() + dumps) + "\n")
    assert all(h.culprit_ranks == () or "stack" not in h.summary for h in incident.hypotheses)


def test_faulthandler_dumps_with_rank_prefixes() -> None:
    lines = []
    for r in range(4):
        lines.append(f"[rank{r}]:Current thread 0x00007f3a9c{r}1b740 (most recent call first):")
        if r == 0:
            lines += [
                '[rank0]:  File "/workspace/ckpt.py", line 77 in save_sharded',
                '[rank0]:  File "/workspace/train.py", line 240 in main',
            ]
        else:
            lines += [
                f'[rank{r}]:  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py", line 3939 in barrier',
                f'[rank{r}]:  File "/workspace/train.py", line 251 in main',
            ]
    v = nccllog.analyze_text("\n".join(lines) + "\n").verdict
    assert v.category == "straggler_hang"
    assert list(v.culprit_ranks) == [0]


def test_a_lone_frame_is_not_a_dump() -> None:
    text = "step 10 loss 2.31\n    all_reduce (torch/distributed/distributed_c10d.py:2288)\n"
    incident = nccllog.analyze_text(text)
    assert all("stack" not in h.summary for h in incident.hypotheses)
    assert stacks.vocabulary().functions >= {"all_reduce", "barrier"}
