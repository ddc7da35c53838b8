"""Advice per verdict category x framework x version, from remediation.toml."""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources
from typing import Any

from nccllog.advice.detect import Detected
from nccllog.advice.variables import Version
from nccllog.correlate.rules import remedies
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
# Launchers with their own "Collect next time" wording (``launcher:<name>`` flags).
LAUNCHERS = ("torchrun", "deepspeed", "slurm")
# Frameworks whose own groups (not the default one) are set up through a rendezvous.
OWN_GROUPS = ("openrlhf",)


@cache
def tables() -> dict[str, Any]:
    return tomllib.loads(resources.files("nccllog.advice").joinpath("remediation.toml").read_text("utf-8"))


def timeout_entry(det: Detected) -> dict[str, Any]:
    """The table entry for where this job's timeout lives: the framework's, else the launcher's
    (DeepSpeed's, torchrun's), else the script's own init_process_group call."""
    entries = {e["framework"]: e for e in tables()["timeout"]}
    for entry in tables()["timeout"]:
        if entry["framework"] in det.frameworks:
            return dict(entry)
    for name in ("deepspeed", "torchrun"):
        if det.launcher and name in det.launcher:
            return dict(entries[name])
    return dict(entries["torch"])


def applies_to(det: Detected, entry: dict[str, Any]) -> str:
    fw = entry["framework"]
    if fw == "torch":
        return "PyTorch (torch.distributed)"
    return fw


def timeout_advice(category: str, det: Detected, timed_out: bool, long_work: bool = True) -> Advice | None:
    """Where the timeout lives, worded for the verdict. ``long_work``: whether the verdict leaves
    room for a legitimate long wait (False for a straggler shown doing no long work, where a larger
    timeout only makes the hang last longer)."""
    entry = timeout_entry(det)
    reasons = (
        "; ".join(r for rs in det.frameworks.values() for r in rs[:1]) or "no framework named in the logs"
    )
    why = entry["why"] + f" (framework evidence: {reasons})."
    if category == "straggler_hang" and not long_work:
        return None
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


def flags(det: Detected, flight_recorder_off: bool) -> frozenset[str]:
    """The conditions remediation.toml's ``when`` names: the flight recorder off, the launcher."""
    out = {f"launcher:{name}" for name in LAUNCHERS if det.launcher and name in det.launcher}
    if not out:
        out.add("launcher:none")
    if flight_recorder_off:
        out.add("fr_off")
    return frozenset(out)


def versions(det: Detected) -> dict[str, Version | None]:
    """The detected versions as the remedy table reads them (torch's lower bound where inferred)."""
    return {"torch": det.torch, "nccl": det.nccl}


def collect_next_time(det: Detected, flight_recorder_off: bool) -> tuple[str, ...]:
    """What to turn on for the next run, in the names the detected versions read (``remedy.collect_next``)."""
    return tuple(remedies.steps("collect_next", versions(det), flags(det, flight_recorder_off)))


def fits_versions(step: str, det: Detected, flight_recorder_off: bool) -> bool:
    """Whether a rule's remediation step still holds at the versions the advice detected (which add
    the torch range inferred from log formats to the versions the rules saw printed)."""
    s = remedies.step_of(step)
    return s is None or s.applies(versions(det), flags(det, flight_recorder_off))
