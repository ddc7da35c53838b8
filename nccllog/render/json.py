"""JSON renderer: the stable, versioned contract (docs/json.md). Keys are added, never renamed.

Deterministic: keys of maps keyed by data (ranks, hosts, settings) are sorted; lists keep the
order the model gives them (it is meaning: evidence order, timeline order) or are sorted where
order carries no meaning. Control characters that a terminal could interpret (C0 and C1 controls,
DEL, bidi overrides and isolates; nccllog.text_safety) are written as ``\\uXXXX`` escapes, so
printing the JSON is safe; the data is unchanged.
"""

from __future__ import annotations

import json
from typing import Any

from nccllog import __version__
from nccllog.model import (
    SCHEMA_VERSION,
    Advice,
    CollectiveRow,
    Evidence,
    Finding,
    Hypothesis,
    Incident,
    RankInfo,
    SettingFinding,
    TimelineEntry,
)
from nccllog.render import proof
from nccllog.text_safety import json_safe


def _evidence(e: Evidence) -> dict[str, Any]:
    return {
        "source": e.source,
        "line": e.line,
        "rank": e.rank,
        "text": e.text,
        "host": e.host,
        "time": e.time,
        "note": e.note,
    }


def _hypothesis(h: Hypothesis, *, full: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "category": h.category,
        "culprit_ranks": list(h.culprit_ranks),
        "culprit_hosts": list(h.culprit_hosts),
        "confidence": h.confidence,
        "summary": h.summary,
    }
    if full:
        out["score"] = round(h.score, 4)
        out["evidence"] = [_evidence(e) for e in h.evidence]
        out["rules_in"] = list(h.rules_in)
        out["rules_out"] = list(h.rules_out)
        out["remediation"] = list(h.remediation)
        out["collect_next_time"] = list(h.collect_next_time)
    return out


def _finding(f: Finding) -> dict[str, Any]:
    return {
        "pattern": f.pattern,
        "source": f.source,
        "line": f.line,
        "rank": f.rank,
        "host": f.host,
        "time": f.time,
        "fields": dict(sorted(f.fields.items())),
        "severity": f.severity,
        "signal": f.signal,
        "text": f.text,
    }


def _rank(r: RankInfo) -> dict[str, Any]:
    return {
        "rank": r.rank,
        "host": r.host,
        "local_rank": r.local_rank,
        "pids": list(r.pids),
        "sources": list(r.sources),
        "status": r.status,
        "state": r.state,
        "culprit": r.culprit,
        "outlier": r.outlier,
        "stuck_since": r.stuck_since,
        "lines": r.lines,
        "last_time": r.last_time,
        "last_enqueued": r.last_enqueued,
        "last_completed": r.last_completed,
        "last_step": r.last_step,
        "timed_out_seq": r.timed_out_seq,
        "first_error": _finding(r.first_error) if r.first_error is not None else None,
    }


def _collective(c: CollectiveRow) -> dict[str, Any]:
    return {
        "pg": c.pg,
        "seq": c.seq,
        "op": c.op,
        "expected": list(c.expected),
        "reporters": list(c.reporters),
        "silent": list(c.silent),
        "ops": {str(k): v for k, v in sorted(c.ops.items())},
        "numel": {str(k): list(v) for k, v in sorted(c.numel.items())},
        "timeout_ms": c.timeout_ms,
        "elapsed_ms": {str(k): v for k, v in sorted(c.elapsed_ms.items())},
        "note": c.note,
    }


def _timeline(e: TimelineEntry) -> dict[str, Any]:
    return {
        "time": e.time,
        "rank": e.rank,
        "host": e.host,
        "pattern": e.pattern,
        "severity": e.severity,
        "source": e.source,
        "line": e.line,
        "text": e.text,
    }


def _setting(s: SettingFinding) -> dict[str, Any]:
    return {
        "name": s.name,
        "value": s.value,
        "status": s.status,
        "message": s.message,
        "replacement": s.replacement,
        "sources": list(s.sources),
    }


def _advice(a: Advice) -> dict[str, Any]:
    return {"title": a.title, "why": a.why, "steps": list(a.steps), "applies_to": a.applies_to}


def _verdict(incident: Incident) -> dict[str, Any]:
    """The verdict, with the evidence that proves it as the reports show it (culprits' lines
    first, alike lines folded with a count) and the culprits' differing fields side by side."""
    out = _hypothesis(incident.verdict, full=False)
    out["evidence"] = [
        {**_evidence(p.evidence), "count": p.count, "ranks": list(p.ranks), "culprit": p.culprit}
        for p in proof.proof(incident)
    ]
    out["contrast"] = proof.contrast(incident)
    return out


def to_dict(incident: Incident) -> dict[str, Any]:
    """The JSON document as plain Python data."""
    c = incident.coverage
    env = incident.environment
    return {
        "schema_version": SCHEMA_VERSION,
        "verdict": _verdict(incident),
        "mixed_input": incident.mixed_input,
        "hypotheses": [_hypothesis(h, full=True) for h in incident.hypotheses],
        "ranks": {
            "world_size": incident.world_size,
            "seen": list(incident.ranks_seen),
            "missing": list(incident.ranks_missing),
        },
        "findings": [_finding(f) for f in incident.findings],
        "coverage": {
            "files": c.files,
            "lines": c.lines,
            "matched": c.matched,
            "unattributed": c.unattributed,
            "skipped": [{"source": s.source, "reason": s.reason, "lines": s.lines} for s in c.skipped],
            "bytes_read": c.bytes_read,
            "decode_replacements": c.decode_replacements,
            "skipped_lines": c.skipped_lines,
            "truncated_lines": c.truncated_lines,
            "notes": list(c.notes),
            "unmatched": c.unmatched,
            "skipped_line_reasons": [{"reason": r, "lines": n} for r, n in c.skipped_line_reasons],
            "unaligned_hosts": list(c.unaligned_hosts),
        },
        "nccllog_version": __version__,
        "inputs": list(incident.inputs),
        "redacted": incident.redacted,
        "per_rank": [_rank(r) for r in sorted(incident.ranks, key=lambda r: r.rank)],
        "timeline": [_timeline(e) for e in incident.timeline],
        "collectives": [_collective(x) for x in incident.collectives],
        "host_offsets": _host_offsets(incident),
        "environment": {
            "frameworks": list(env.frameworks),
            "launcher": env.launcher,
            "versions": {k: list(v) for k, v in sorted(env.versions.items())},
            "settings": dict(sorted(env.settings.items())),
            "setting_findings": [_setting(s) for s in env.setting_findings],
        },
        "advice": [_advice(a) for a in incident.advice],
        "unmatched_templates": [
            {"template": t, "count": n, "example": ex} for t, n, ex in incident.unmatched_templates
        ],
    }


def _host_offsets(incident: Incident) -> dict[str, float | None]:
    """Seconds to add per host; null for a host whose clock could not be aligned."""
    out: dict[str, float | None] = {h: round(v, 6) for h, v in incident.host_offsets.items()}
    out.update(dict.fromkeys(incident.coverage.unaligned_hosts))
    return dict(sorted(out.items()))


def render_json(incident: Incident) -> str:
    """Serialise the incident deterministically (sorted where order is not meaning)."""
    text = json.dumps(to_dict(incident), indent=2, ensure_ascii=False, default=str) + "\n"
    return json_safe(text)
