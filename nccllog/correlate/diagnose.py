"""Events -> Incident (placeholder verdict: the first fatal finding; the correlation engine replaces it)."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from nccllog.correlate.ranks import Topology
from nccllog.match.library import Library
from nccllog.model import Coverage, Evidence, Finding, Hypothesis, Incident, RankInfo

_FATAL = ("error", "critical")


def findings_from_events(events: pl.DataFrame, library: Library) -> tuple[Finding, ...]:
    """The JSON contract's findings: every event of severity warning or above, in source order."""
    out = []
    rows = events.filter(pl.col("severity").is_in(["warning", "error", "critical"])).sort("source", "line")
    for row in rows.iter_rows(named=True):
        pat = library.get(row["pattern"])
        fields = {k: row[k] for k in (pat.fields if pat else {}) if row.get(k) is not None}
        out.append(
            Finding(
                pattern=row["pattern"],
                source=row["source"],
                line=row["line"],
                rank=row["rank"],
                host=row["host"],
                time=row["time"].isoformat() if row["time"] is not None else None,
                fields=fields,
                severity=row["severity"],
                text=row["text"],
                signal=row["signal"],
            )
        )
    return tuple(out)


def diagnose(
    events: pl.DataFrame,
    topology: Topology,
    *,
    coverage: Coverage,
    templates: Sequence[tuple[str, int, str]],
    library: Library,
    inputs: Sequence[str],
) -> Incident:
    """Correlate ranks and pick the best hypothesis."""
    findings = findings_from_events(events, library)
    fatal = [f for f in findings if f.severity in _FATAL]
    if fatal:
        first = fatal[0]
        pat = library.get(first.pattern)
        category = (pat.category if pat else None) or "unknown"
        ranks = (first.rank,) if first.rank is not None else ()
        verdict = Hypothesis(
            category=category,
            culprit_ranks=ranks,
            culprit_hosts=(),
            confidence="low",
            summary=f"First error: {first.pattern} at {first.source}:{first.line}.",
            score=0.1,
            evidence=(Evidence(first.source, first.line, first.rank, first.text),),
        )
    else:
        verdict = Hypothesis("no_failure", (), (), "low", "No failure found in the logs.", 0.0)
    seen = tuple(sorted({int(r) for r in events["rank"].drop_nulls().to_list()})) if events.height else ()
    return Incident(
        verdict=verdict,
        hypotheses=(verdict,),
        world_size=topology.world_size,
        ranks_seen=seen,
        ranks_missing=(),
        ranks=tuple(RankInfo(rank=r) for r in seen),
        findings=findings,
        coverage=coverage,
        events=events,
        unmatched_templates=tuple(templates),
        inputs=tuple(inputs),
    )
