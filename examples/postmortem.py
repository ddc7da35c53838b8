"""A short post-mortem with the nccllog library: analyse a job's log folder, print the culprit,
then ask the events table (a polars DataFrame) the follow-up questions.

    python examples/postmortem.py fixtures/crash-oom-rank5-cascade/logs [report.html]
"""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl

import nccllog


def main(folder: str, html: str | None = None) -> int:
    incident = nccllog.analyze(folder)
    v = incident.verdict

    print(f"verdict:    {v.category} ({v.confidence} confidence)")
    print(f"culprit:    ranks {list(v.culprit_ranks) or '-'} hosts {list(v.culprit_hosts) or '-'}")
    print(f"summary:    {v.summary}")
    for e in v.evidence[:3]:
        print(f"evidence:   {e.source}:{e.line} (rank {e.rank}) {e.text[:100]}")

    events = (
        incident.events
    )  # one row per matched line: source, line, rank, host, time, pattern, severity, ...

    # Which ranks reported errors, and how many lines each?
    per_rank = (
        events.filter(pl.col("severity").is_in(["error", "critical"]))
        .group_by("rank")
        .agg(pl.len().alias("errors"), pl.col("pattern").unique().sort().alias("patterns"))
        .sort("rank", nulls_last=True)
    )
    print("\nerrors per rank:")
    print(per_rank)

    # The last line each rank logged: the rank that went quiet first is often the culprit.
    last_seen = (
        events.filter(pl.col("rank").is_not_null() & pl.col("time").is_not_null())
        .group_by("rank")
        .agg(pl.col("time").max().alias("last_time"))
        .sort("last_time", "rank")
    )
    print("\nlast time heard of, earliest first:")
    print(last_seen.head(5))

    # Everything the culprit ranks said.
    if v.culprit_ranks:
        culprit_lines = events.filter(pl.col("rank").is_in(list(v.culprit_ranks))).select(
            "source", "line", "severity", "pattern"
        )
        print(f"\nmatched lines of ranks {list(v.culprit_ranks)}:")
        print(culprit_lines.sort("source", "line").head(10))

    if html:
        # Share it: redact hosts, IPs, users and secrets, then write one self-contained file.
        Path(html).write_text(nccllog.render(nccllog.redact(incident), "html"), encoding="utf-8")
        print(f"\nwrote {html}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
