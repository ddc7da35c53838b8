"""Failures caused on purpose on one GPU, under torchrun; argv[1] picks the case (bench/capture/run.sh).

Their console output, as torch and NCCL print it, became the ``cap-*`` fixtures (docs/fixtures.md).
Needs torch with CUDA (and cupy for ``ima``); nccllog itself never imports this file.
"""

import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

case = sys.argv[1]
# Only one GPU is lent: in the multi-rank cases below, only one rank ever touches it.
rank = int(os.environ.get("RANK", "0"))
if case == "ordinal":  # every local rank takes its own GPU, as usual; the node has fewer GPUs
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
else:
    torch.cuda.set_device(0)


def init(seconds=600):
    dist.init_process_group("nccl", timeout=timedelta(seconds=seconds), device_id=torch.device("cuda", 0))


if case == "dupgpu":  # two ranks on one GPU
    init()
    t = torch.ones(1024, device="cuda")
    dist.all_reduce(t)
    torch.cuda.synchronize()
elif case == "watchdog":  # a collective that cannot finish before the timeout
    init(seconds=15)
    t = torch.ones(4096, device="cuda")
    for _ in range(3):
        dist.all_reduce(t)
    torch.cuda.synchronize()
    print(f"rank {rank}: warm-up collectives done", flush=True)
    torch.cuda._sleep(int(2e9 * 90))  # ~90 s of GPU time on the compute stream
    dist.all_reduce(t)
    dist.broadcast(t, 0)
    time.sleep(80)
elif case == "frdump":  # live Flight Recorder dumps, pickle and JSON
    init()
    t = torch.ones(1 << 16, device="cuda")
    for _ in range(4):
        dist.all_reduce(t)
    dist.broadcast(t, 0)
    dist.all_gather_into_tensor(torch.empty(1 << 16, device="cuda"), t)
    torch.cuda.synchronize()
    out = os.environ["CAP"]
    from torch._C._distributed_c10d import _dump_nccl_trace

    with open(f"{out}/fr_pickle_rank_{rank}", "wb") as f:
        f.write(_dump_nccl_trace())
    try:
        from torch._C._distributed_c10d import _dump_nccl_trace_json

        with open(f"{out}/fr_json_rank_{rank}.json", "wb") as f:
            f.write(_dump_nccl_trace_json())
    except Exception as e:  # the JSON form is optional; say why it is missing
        print("json dump:", repr(e), flush=True)
    dist.destroy_process_group()
elif case == "ima":  # illegal memory access on the compute stream, then a collective
    init()
    t = torch.ones(1024, device="cuda")
    dist.all_reduce(t)
    torch.cuda.synchronize()
    import cupy

    k = cupy.RawKernel(
        r'extern "C" __global__ void k(float* p){ p[(size_t)1 << 38] = 1.0f; }', "k"
    )  # out of bounds
    x = cupy.zeros(16, dtype=cupy.float32)
    k((1,), (1,), (x,))
    dist.all_reduce(t)
    torch.cuda.synchronize()
elif case == "oom":
    init()
    t = torch.ones(1024, device="cuda")
    dist.all_reduce(t)
    torch.empty(400 * (1 << 30), dtype=torch.uint8, device="cuda")
elif case == "plain":  # a clean run with NCCL_DEBUG=INFO and COLL lines
    init()
    t = torch.ones(1 << 20, device="cuda")
    for _ in range(3):
        dist.all_reduce(t)
    dist.broadcast(t, 0)
    dist.barrier()
    torch.cuda.synchronize()
    print(f"rank {rank}: finished", flush=True)
    dist.destroy_process_group()
elif case == "peer_dies":  # rank EARLY_RANK fails before joining; the others wait for it in init
    if rank == int(os.environ.get("EARLY_RANK", "0")):
        time.sleep(3)
        if os.environ.get("EARLY", "raise") == "segv":
            import ctypes

            ctypes.string_at(0)  # SIGSEGV
        raise FileNotFoundError(f"/data/shards/part-{rank:05d}.arrow")
    init(seconds=40)
    t = torch.ones(1024, device="cuda")
    dist.all_reduce(t)
    torch.cuda.synchronize()
elif case == "device_assert":  # an index out of range on the GPU after the first collective
    init()
    t = torch.ones(1024, device="cuda")
    dist.all_reduce(t)
    emb = torch.nn.Embedding(1000, 64).cuda()
    ids = torch.tensor([3, 999, 1000, 17], device="cuda")
    out = emb(ids)
    dist.all_reduce(out)
    torch.cuda.synchronize()
elif case == "ordinal":  # launched with more processes per node than the node has GPUs
    init()
    t = torch.ones(1024, device="cuda")
    dist.all_reduce(t)
    torch.cuda.synchronize()
