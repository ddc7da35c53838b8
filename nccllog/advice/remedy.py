"""Advice per verdict category x framework x version, from remediation.toml."""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources
from typing import Any

from nccllog.advice.detect import Detected
from nccllog.advice.variables import at_least
from nccllog.model import Advice

# Verdicts where the wait itself may be the problem: where the timeout lives is the advice.
TIMEOUT_CATEGORIES = ("straggler_hang", "config_timeout_too_short", "unknown")
# Verdicts where one rank failed and the others waited out the timeout: the timeout only decides
# how long the survivors idle.
FAILSTOP_CATEGORIES = (
    "segfault_crash",
    "oom",
    "cuda_error",
    "gpu_hardware_xid",
    "network_ib",
    "network_socket",
)
# Frameworks whose own groups (not the default one) are set up through a rendezvous.
OWN_GROUPS = ("openrlhf",)


@cache
def tables() -> dict[str, Any]:
    return tomllib.loads(resources.files("nccllog.advice").joinpath("remediation.toml").read_text("utf-8"))


def timeout_entry(det: Detected) -> dict[str, Any]:
    """The table entry for where this job's timeout lives (torchrun's when no framework is known)."""
    fws = set(det.frameworks)
    for entry in tables()["timeout"]:
        if entry["framework"] in fws:
            return dict(entry)
    return dict(next(e for e in tables()["timeout"] if e["framework"] == "torchrun"))


def applies_to(det: Detected, entry: dict[str, Any]) -> str:
    fw = entry["framework"]
    if fw == "torchrun":
        return "PyTorch (torchrun / plain torch.distributed)" if fw not in det.frameworks else fw
    return fw


def timeout_advice(category: str, det: Detected, timed_out: bool) -> Advice | None:
    """Where the timeout lives, worded for the verdict."""
    entry = timeout_entry(det)
    reasons = (
        "; ".join(r for rs in det.frameworks.values() for r in rs[:1]) or "no framework named in the logs"
    )
    why = entry["why"] + f" (framework evidence: {reasons})."
    if category in TIMEOUT_CATEGORIES or (
        category == "bootstrap_rendezvous" and entry["framework"] in OWN_GROUPS
    ):
        return Advice(
            title=entry["title"], why=why, steps=tuple(entry["steps"]), applies_to=applies_to(det, entry)
        )
    if category in FAILSTOP_CATEGORIES and timed_out:
        return Advice(
            title="The other ranks only waited out their timeout",
            why=(
                "One process failed first; the ranks that then timed out were waiting for it, so a larger timeout "
                "would not help. A smaller one frees their GPUs sooner after such a failure. " + why
            ),
            steps=tuple(entry["steps"][:1]),
            applies_to=applies_to(det, entry),
        )
    if category == "collective_mismatch" and timed_out:
        return Advice(
            title="Raising the timeout would not help here",
            why=(
                "The ranks were waiting in different collectives, which never complete however long they wait; "
                "fix the divergence instead. For reference, the timeout lives here: " + why
            ),
            steps=tuple(entry["steps"][:1]),
            applies_to=applies_to(det, entry),
        )
    return None


def check_advice(category: str) -> Advice | None:
    row = tables().get("check", {}).get(category)
    if not row:
        return None
    return Advice(title=row["title"], why=row["why"], steps=tuple(row["steps"]))


# Settings torch >= 2.7 applies by default: advice to set them is dropped there (unless the run had
# the flight recorder off).
FLIGHT_RECORDER_DEFAULTS = (
    "TORCH_NCCL_TRACE_BUFFER_SIZE=",
    "TORCH_FR_BUFFER_SIZE=",
    "TORCH_NCCL_DUMP_ON_TIMEOUT=1",
)


def enables_a_default(step: str, det: Detected, flight_recorder_off: bool) -> bool:
    """Whether ``step`` tells the user to turn on what the detected torch already turns on."""
    return (
        not flight_recorder_off
        and det.torch is not None
        and at_least(det.torch, (2, 7))
        and any(name in step for name in FLIGHT_RECORDER_DEFAULTS)
    )


def collect_next_time(det: Detected, flight_recorder_off: bool) -> tuple[str, ...]:
    """What to turn on for the next run, in the names the detected versions read."""
    out = []
    torch_lo, nccl = det.torch, det.nccl
    off = " (this run had it off)" if flight_recorder_off else ""
    if torch_lo is not None and at_least(torch_lo, (2, 7)) and not flight_recorder_off:
        # On by default since torch 2.7 (2,000 entries from 2.6, dump on timeout from 2.7): nothing to
        # enable, but the dumps stay on each node unless they are written where they can be collected.
        out.append(
            "the flight recorder is on by default in this torch: set TORCH_FR_DUMP_TEMP_FILE=<shared dir>/fr_rank_ "
            "so every rank's dump can be collected, and give the dumps to nccllog with the logs"
        )
    elif torch_lo is not None and at_least(torch_lo, (2, 8)):
        out.append(
            "TORCH_FR_BUFFER_SIZE=2000 and TORCH_NCCL_DUMP_ON_TIMEOUT=1: every rank dumps its flight recorder "
            f"(its last collectives) on timeout, to TORCH_FR_DUMP_TEMP_FILE{off}"
        )
    elif torch_lo is not None and at_least(torch_lo, (2, 2)):
        out.append(
            "TORCH_NCCL_TRACE_BUFFER_SIZE=2000 and TORCH_NCCL_DUMP_ON_TIMEOUT=1: every rank dumps its flight "
            f"recorder (its last collectives) on timeout, to TORCH_NCCL_DEBUG_INFO_TEMP_FILE{off}"
        )
    elif torch_lo is None:
        out.append(
            "On torch >= 2.2: TORCH_NCCL_TRACE_BUFFER_SIZE=2000 and TORCH_NCCL_DUMP_ON_TIMEOUT=1, so every rank "
            "dumps its flight recorder on timeout (torch has no flight recorder before 2.2)"
        )
    if torch_lo is not None and at_least(torch_lo, (2, 2)):
        out.append(
            "TORCH_NCCL_DESYNC_DEBUG=1: the watchdog reports which ranks never joined the timed-out collective"
        )
    elif torch_lo is not None and at_least(torch_lo, (1, 11)):
        out.append("NCCL_DESYNC_DEBUG=1 (this torch's name): the watchdog reports which ranks never joined")
    if nccl is None or at_least(nccl, (2, 5, 6)):
        out.append(
            "NCCL_DEBUG=INFO with NCCL_DEBUG_FILE=<shared dir>/nccl_%h_%p.log: one NCCL log per process, with "
            "versions, interfaces and transports"
        )
    else:
        out.append("NCCL_DEBUG=INFO: NCCL's versions, interfaces and transports in each rank's output")
    out.append("NCCL_DEBUG_SUBSYS=INIT,NET for network and bootstrap problems (INIT,GRAPH for topology/P2P)")
    if nccl is not None and at_least(nccl, (2, 26, 2)):
        out.append("NCCL_DEBUG_TIMESTAMP_LEVELS=ALL: timestamps on INFO lines too, to line up the ranks")
    out.append(
        "one log file per rank (torchrun --log-dir, or --tee 3 / srun --label so every line carries its rank)"
    )
    return tuple(out)
