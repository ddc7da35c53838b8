"""JSON renderer: the stable, versioned contract (docs/json.md). Keys are added, never renamed."""

from __future__ import annotations

import json
from typing import Any

from nccllog.model import SCHEMA_VERSION, Evidence, Finding, Hypothesis, Incident


def _evidence(e: Evidence) -> dict[str, Any]:
    return {"source": e.source, "line": e.line, "rank": e.rank, "text": e.text}


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
    }


def to_dict(incident: Incident) -> dict[str, Any]:
    """The JSON document as plain Python data."""
    c = incident.coverage
    return {
        "schema_version": SCHEMA_VERSION,
        "verdict": _hypothesis(incident.verdict, full=False),
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
            "skipped": [{"source": s.source, "reason": s.reason} for s in c.skipped],
        },
    }


def render_json(incident: Incident) -> str:
    """Serialise the incident deterministically (sorted where order is not meaning)."""
    return json.dumps(to_dict(incident), indent=2, ensure_ascii=False, default=str) + "\n"
