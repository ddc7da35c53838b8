"""Terminal renderer (placeholder: plain text; the rich renderer replaces it)."""

from __future__ import annotations

from nccllog.model import Incident


def render_text(incident: Incident) -> str:
    """A short plain-text report."""
    v = incident.verdict
    lines = [
        f"Verdict: {v.category} (confidence {v.confidence})",
        f"Culprit ranks: {', '.join(map(str, v.culprit_ranks)) or '-'}",
        v.summary,
        f"Ranks seen: {len(incident.ranks_seen)}; files {incident.coverage.files}, lines {incident.coverage.lines}",
    ]
    return "\n".join(lines) + "\n"
