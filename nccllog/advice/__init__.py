"""Advice: what the environment was, what is wrong with its settings, and what to do next.

``advise(incident)`` runs after the diagnosis. It reads frameworks, launcher and versions off the
events, lints the environment settings against the variables those versions read
(variables.toml), checks version consistency across ranks, and writes advice per verdict category
x framework x version (remediation.toml). Every variable it names is read by the detected
versions; hypothesis remediation that names one they do not read is dropped.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

import polars as pl

from nccllog.advice.detect import Detected, detect, driver_text
from nccllog.advice.lint import collect, ib_present, lint, plugin_state
from nccllog.advice.remedy import check_advice, collect_next_time, fits_versions, timeout_advice
from nccllog.advice.text import Violation, violations
from nccllog.advice.variables import table, vstr
from nccllog.match.library import Library, load_library
from nccllog.model import Advice, Environment, Hypothesis, Incident

__all__ = [
    "VersionSplit",
    "Violation",
    "advise",
    "detect",
    "explain_setting",
    "version_consistency",
    "violations",
]


@dataclasses.dataclass(frozen=True)
class VersionSplit:
    """One component whose version differs across processes."""

    component: str  # "NCCL", "CUDA driver", "PyTorch"
    groups: dict[str, tuple[str, ...]]  # version -> the ranks (or host:pid) that report it

    def summary(self) -> str:
        parts = "; ".join(
            f"{v}: {', '.join(who[:8])}{' …' if len(who) > 8 else ''}" for v, who in self.groups.items()
        )
        return f"{self.component} differs across processes ({parts})"


def version_consistency(events: pl.DataFrame) -> list[VersionSplit]:
    """NCCL, CUDA driver and PyTorch versions per process; a split for each that differs.

    The diagnosis can turn a split into the ``version_mismatch`` verdict. vLLM/SGLang's own NCCL
    (``framework`` column set) is kept apart from the training processes'.
    """
    out = []
    for col, name in (("nccl_version", "NCCL"), ("cuda_driver", "CUDA driver"), ("torch_version", "PyTorch")):
        if col not in events.columns:
            continue
        rows = events.filter(pl.col(col).is_not_null())
        if "framework" in events.columns:
            rows = rows.filter(pl.col("framework").is_null())
        by: dict[str, set[str]] = defaultdict(set)
        for rank, host, pid, v in rows.select("rank", "host", "pid", col).iter_rows():
            who = f"rank {rank}" if rank is not None else f"{host or '?'}:{pid or '?'}"
            by[driver_text(v) if col == "cuda_driver" else str(v)].add(who)
        if len(by) > 1:
            groups = {v: tuple(sorted(w)) for v, w in sorted(by.items(), key=lambda kv: -len(kv[1]))}
            out.append(VersionSplit(name, groups))
    return out


def explain_setting(name: str) -> str | None:
    """What nccllog knows about an environment variable (``nccllog explain NCCL_TIMEOUT``), or None."""
    var = table().get(name.strip().upper())
    if var is None:
        return None
    owner = {"nccl": "NCCL", "torch": "PyTorch", "plugin": "a network plugin", "none": "nothing"}[var.owner]
    lines = [
        f"{var.name}",
        f"read by: {owner}" + (f" ({var.versions_text()})" if var.versions_text() else ""),
    ]
    status = {
        "current": "current",
        "legacy": "legacy name, still read",
        "deprecated": f"deprecated from {var.product} {vstr(var.deprecated_since)}"
        if var.deprecated_since
        else "deprecated",
        "removed": "no longer read",
        "folk": "not a real setting: nothing reads it",
        "plugin": "not core NCCL",
    }[var.status]
    lines.append(f"status: {status}")
    if var.replacement:
        lines.append(f"use instead: {var.replacement}")
    if var.note:
        lines += ["", var.note]
    return "\n".join(lines)


def advise(incident: Incident, library: Library | None = None) -> Incident:
    """The Incident with environment, advice and version-correct hypothesis remediation filled in."""
    lib = library or load_library(())
    ev = incident.events
    det = detect(ev, lib)
    seen = collect(ev)
    findings = lint(seen, det, ib=ib_present(ev), plugin=plugin_state(ev))
    splits = version_consistency(ev)
    env = Environment(
        frameworks=det.ordered(),
        launcher=det.launcher,
        versions=det.versions,
        settings={k: s.values[0] for k, s in sorted(seen.items()) if s.values},
        setting_findings=tuple(findings),
    )
    fr_off = _flight_recorder_off(ev, seen)
    timed_out = ev.height > 0 and ev.filter(pl.col("signal") == "collective_timeout").height > 0
    collect_steps = collect_next_time(det, fr_off)
    advice: list[Advice] = []
    verdict = incident.verdict.category
    collect_advice = Advice(
        title="Collect next time",
        why="These make the next failure of this kind attributable to one rank and one collective"
        + (f" (names for {_versions_phrase(det)})." if _versions_phrase(det) else "."),
        steps=collect_steps,
    )
    if verdict == "unknown":  # nothing named: what to capture comes before any fix
        advice.append(collect_advice)
    for a in (check_advice(verdict), timeout_advice(verdict, det, timed_out, _long_work(incident))):
        if a is not None:
            advice.append(a)
    if findings:
        advice.append(
            Advice(
                title=f"Fix {len(findings)} environment setting(s)",
                why="The logs show settings that do nothing, are renamed, or slow the job down for the versions in use.",
                steps=tuple(
                    f"{f.name}={f.value}: {f.message}" + (f" Use: {f.replacement}." if f.replacement else "")
                    for f in findings
                ),
            )
        )
    if splits and verdict != "version_mismatch":
        advice.append(check_advice("version_mismatch") or Advice("Versions differ", ""))
        advice[-1] = dataclasses.replace(
            advice[-1], why=advice[-1].why + " " + "; ".join(s.summary() for s in splits) + "."
        )
    if verdict not in ("no_failure", "unknown"):
        advice.append(collect_advice)
    hyps = tuple(_fix(h, det, collect_steps, fr_off) for h in incident.hypotheses)
    verdict_h = _fix(incident.verdict, det, collect_steps, fr_off)
    return dataclasses.replace(
        incident, environment=env, advice=tuple(advice), hypotheses=hyps, verdict=verdict_h
    )


def _versions_phrase(det: Detected) -> str:
    parts = []
    if det.torch is not None:
        parts.append("torch " + det.versions.get("torch", (vstr(det.torch),))[0])
    if det.nccl is not None:
        parts.append(f"NCCL {vstr(det.nccl)}")
    return ", ".join(parts)


def _flight_recorder_off(ev: pl.DataFrame, seen: dict) -> bool:
    if (
        ev.height
        and ev.filter(pl.col("pattern") == "torch.failed_collective_stack_trace")["message"]
        .str.contains("FlightRecorder is disabled")
        .any()
    ):
        return True
    size = seen.get("TORCH_NCCL_TRACE_BUFFER_SIZE")
    return bool(size and size.values and size.values[0] == "0")


def _long_work(incident: Incident) -> bool:
    """Whether the diagnosis leaves room for a legitimate long wait: not a straggler verdict naming
    its late rank, or the too-short-timeout reading has lines of its own (the late rank's long
    work) beyond the verdict's evidence."""
    if incident.verdict.category != "straggler_hang" or not incident.verdict.culprit_ranks:
        return True  # no late rank named: nothing says what it was doing
    return any(
        e not in incident.verdict.evidence
        for h in incident.hypotheses
        if h.category == "config_timeout_too_short"
        for e in h.evidence
    )


def _fix(h: Hypothesis, det: Detected, collect_steps: tuple[str, ...], fr_off: bool = False) -> Hypothesis:
    """Drop remediation that names a variable the detected versions do not read, and rule steps
    whose version gate (remediation.toml) the detected versions miss; version-correct collection."""
    remediation = tuple(r for r in h.remediation if not violations(r, det) and fits_versions(r, det, fr_off))
    collect_next = tuple(
        c for c in h.collect_next_time if not violations(c, det) and fits_versions(c, det, fr_off)
    )
    if h.collect_next_time:
        collect_next = tuple(dict.fromkeys((*collect_steps, *collect_next)))
    return dataclasses.replace(h, remediation=remediation, collect_next_time=collect_next)
