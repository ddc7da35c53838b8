"""`high` must be earned: each test of correlate/earned.py holds a verdict at medium, with a reason."""

from __future__ import annotations

import nccllog

_WATCHDOG = (
    "[rank{r}]:[E1125 10:00:0{r}.000000000 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=88, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, "
    "Timeout(ms)=600000) ran for 600013 milliseconds before timing out.\n"
)
_CUDA = "[rank{r}]: RuntimeError: CUDA error: an illegal memory access was encountered\n"


def _held(v: nccllog.Hypothesis) -> list[str]:
    return [r for r in v.rules_out if r.startswith("Confidence held at medium")]


def test_the_culprits_own_line_and_a_contrast_earn_high() -> None:
    text = _CUDA.format(r=2) + "".join(_WATCHDOG.format(r=r) for r in (0, 1, 3))
    v = nccllog.analyze(text).verdict
    assert (v.category, v.culprit_ranks, v.confidence) == ("cuda_error", (2,), "high")
    assert not _held(v)


def test_one_ranks_own_log_alone_is_not_a_contrast() -> None:
    v = nccllog.analyze(_CUDA.format(r=0)).verdict
    assert v.culprit_ranks == (0,) and v.confidence == "medium"
    assert "only the culprit's own log" in _held(v)[0]


def test_a_machine_fault_without_its_machine_is_not_high() -> None:
    text = "Accelerator Fatal Error: call to cuCtxCreate returned error 214 (CUDA_ERROR_ECC_UNCORRECTABLE): uncorrectable ECC error encountered\n"
    v = nccllog.analyze(text).verdict
    assert v.category == "gpu_hardware_xid" and v.confidence == "medium"
    assert "which machine" in _held(v)[0]


def test_a_silent_rank_without_its_log_is_an_inference() -> None:
    # Ranks 0-2 wait in #88; rank 3 left no log: it is the likely straggler, but nothing proves it.
    init = "[rank{r}]:gpu-a1:90{r}:90{r} [{r}] NCCL INFO comm 0x5581a0 rank {r} nranks 4 cudaDev {r} nvmlDev {r} busId 1{r}000 commId 0x7f21aa31c0de1234 - Init COMPLETE\n"
    text = "".join(init.format(r=r) + _WATCHDOG.format(r=r) for r in (0, 1, 2))
    v = nccllog.analyze(text).verdict
    assert (v.category, v.culprit_ranks, v.confidence) == ("straggler_hang", (3,), "medium")


def test_a_rank_local_failure_of_unknown_rank_is_not_high() -> None:
    # Four ranks wait; the out-of-memory line carries no rank: what happened is known, not where.
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.11 GiB of which 1.10 GiB is free.\n"
    text = oom + "".join(_WATCHDOG.format(r=r) for r in (0, 1, 2, 3))
    v = nccllog.analyze(text).verdict
    assert v.category == "oom" and v.culprit_ranks == () and v.confidence != "high"


def test_another_ranks_cut_traceback_may_be_the_same_failure() -> None:
    # Rank 2's own error earns high against the others' timeouts ...
    text = _CUDA.format(r=2) + "".join(_WATCHDOG.format(r=r) for r in (0, 1, 3))
    assert nccllog.analyze(text).verdict.confidence == "high"
    # ... but not when rank 3 also began a traceback whose error line the paste lost.
    cut = '[rank3]: Traceback (most recent call last):\n[rank3]:   File "train.py", line 88, in <module>\n'
    v = nccllog.analyze(text + cut).verdict
    assert v.culprit_ranks == (2,) and v.confidence == "medium"
    assert "rank 3 also began a traceback" in _held(v)[0]


def test_every_rank_alike_needs_every_rank() -> None:
    init = "gpu-a:{p}:{p} [{r}] NCCL INFO comm 0x55d0{r} rank {r} nranks 4 cudaDev {r} busId {r}1000 - Init COMPLETE\n"
    alike = "".join(init.format(p=700 + r, r=r) + _CUDA.format(r=r) for r in (0, 1))
    v = nccllog.analyze(alike).verdict
    assert v.category == "cuda_error" and v.culprit_ranks == () and v.confidence == "medium"
    assert "ranks 2,3 left no log" in _held(v)[0] or "ranks 2-3 left no log" in _held(v)[0]


def test_a_failure_written_by_a_process_of_unknown_rank_is_not_high() -> None:
    # Two ranks of gpu-a are known from their init lines; the /dev/shm failure comes from a process
    # on gpu-b that no line ties to a rank: the machine is named, the rank is not known.
    text = (
        "gpu-a:1100:1100 [0] NCCL INFO comm 0x55d0c1a0 rank 0 nranks 4 cudaDev 0 busId 1b000 - Init START\n"
        "gpu-a:1101:1101 [1] NCCL INFO comm 0x55d0c2b0 rank 1 nranks 4 cudaDev 1 busId 1c000 - Init START\n"
        "gpu-b:2207:2290 [1] include/shm.h:42 NCCL WARN Cuda failure 'invalid argument'\n"
        "gpu-b:2207:2290 [1] NCCL INFO transport/shm.cc:95 -> 1\n"
    )
    v = nccllog.analyze(text).verdict
    assert (v.category, v.culprit_hosts, v.confidence) == ("init_failure", ("gpu-b",), "medium")
    assert "which rank it was is not in the logs" in _held(v)[0]
