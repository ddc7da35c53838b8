"""A job stopped from outside with no error: where its processes were when it stopped.

Without NCCL's INFO lines (NCCL_DEBUG unset, the usual case), the absence of NCCL lines does not
show that no rank reached NCCL: the tracebacks the stop printed say where each process waited
(rules/startup.py, pattern torch.c10d_collective_frame). A launcher's stop of the siblings of a
child that had already failed (mp.spawn's `Terminating process`) is no stop from outside.
"""

from __future__ import annotations

import pytest

import nccllog

_TORCHRUN_STOP = (
    "W0302 10:25:40.118000 140221 torch/distributed/elastic/agent/server/api.py:704] Received Signals.SIGINT "
    "death signal, shutting down workers\n"
    "W0302 10:25:40.119000 140221 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 140233 "
    "closing signal SIGINT\n"
)


def _interrupted(frames: str) -> str:
    return (
        _TORCHRUN_STOP
        + "Traceback (most recent call last):\n"
        + '  File "/home/lab/ddp_probe.py", line 41, in <module>\n    main()\n'
        + frames
        + "KeyboardInterrupt\n"
    )


_IN_ALL_REDUCE = (
    '  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/c10d_logger.py", line 72, in wrapper\n'
    "    return func(*args, **kwargs)\n"
    '  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py", line 1992, in all_reduce\n'
    "    work.wait()\n"
)
_IN_DDP_SYNC = (  # torch 1.13 console with a rank prefix
    '[rank1]:   File "/usr/lib/python3.9/site-packages/torch/distributed/utils.py", line 268, in '
    "_verify_param_shape_across_processes\n"
    "[rank1]:     return dist._verify_params_across_processes(process_group, tensors, logger)\n"
)
_IN_INIT = (
    '  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py", line 1148, in '
    "init_process_group\n"
    "    store, rank, world_size = next(rendezvous_iterator)\n"
)


@pytest.mark.parametrize("frames", [_IN_ALL_REDUCE, _IN_DDP_SYNC])
def test_stopped_inside_a_collective_is_past_the_rendezvous(frames: str) -> None:
    v = nccllog.analyze(_interrupted(frames)).verdict
    assert v.category == "straggler_hang" and v.confidence == "low"
    assert "the rendezvous had completed" in v.summary


def test_stopped_inside_init_process_group_is_the_rendezvous() -> None:
    v = nccllog.analyze(_interrupted(_IN_INIT)).verdict
    assert v.category == "bootstrap_rendezvous" and v.confidence == "medium"


def test_no_nccl_line_without_nccl_debug_proves_little() -> None:
    v = nccllog.analyze(_TORCHRUN_STOP).verdict
    assert v.category == "bootstrap_rendezvous" and v.confidence == "low"
    assert any("NCCL_DEBUG was not INFO" in r for r in v.rules_out)


@pytest.mark.parametrize(
    "setting",
    [
        "NCCL_DEBUG=INFO\n",  # an env listing
        "NCCL_DEBUG=INFO torchrun --nnodes 2 --nproc_per_node 4 probe.py\n",  # the launch command
        "CUDA 12.1 | torch 2.3.1 | NCCL_DEBUG=INFO NCCL_SOCKET_IFNAME=eth0\n",  # a job script's echo
    ],
)
def test_no_nccl_line_with_nccl_debug_on_is_the_rendezvous(setting: str) -> None:
    v = nccllog.analyze(setting + _TORCHRUN_STOP).verdict
    assert v.category == "bootstrap_rendezvous" and v.confidence == "medium"


def test_mp_spawn_terminating_siblings_is_not_a_stop_from_outside() -> None:
    text = (
        "W0428 00:47:04.140000 51002 torch/multiprocessing/spawn.py:169] Terminating process 51010 via signal SIGTERM\n"
        "W0428 00:47:04.141000 51002 torch/multiprocessing/spawn.py:169] Terminating process 51011 via signal SIGTERM\n"
        "torch.multiprocessing.spawn.ProcessRaisedException: \n\n"
        "-- Process 2 terminated with the following error:\n"
        "Traceback (most recent call last):\n" + _IN_DDP_SYNC.replace("[rank1]:", "")
    )
    v = nccllog.analyze(text).verdict
    assert v.category != "bootstrap_rendezvous"
