"""Input that mixes several jobs: find them, and keep the largest coherent one.

A paste or a folder can hold lines of unrelated runs. Lines are one job unless the time between
two stretches of lines cannot be one run: a gap of at least ``SPLIT_GAP`` between stretches that
state different world sizes, or a gap of at least ``LONG_GAP`` whatever they state (a job's lines
months apart are two jobs). A job that ran for days with a quiet log is never split by time
alone below ``LONG_GAP``. Untimed lines belong to the job of the timed line before them in their
file (or after them, at a file's start).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import polars as pl

SPLIT_GAP = timedelta(hours=6)
LONG_GAP = timedelta(days=30)
_SIZE_COLUMNS = ("world_size", "nranks")


@dataclass(frozen=True)
class Job:
    """One run found in the input: its time span, stated world size, lines and ranks."""

    start: datetime | None
    end: datetime | None
    world_size: int | None
    lines: int
    ranks: int


def _size(seg: pl.DataFrame) -> int | None:
    """The world size a stretch of lines states: torch's world size, else NCCL's largest comm."""
    for col in _SIZE_COLUMNS:
        if col in seg.columns:
            top = seg.get_column(col).cast(pl.Int64, strict=False).drop_nulls().max()
            if isinstance(top, int) and top > 0:
                return top
    return None


def _segments(timed: pl.DataFrame) -> list[tuple[int, int]]:
    """Row ranges of the time-sorted lines, split where the gap means another job."""
    times = timed.get_column("time").to_list()
    cuts = [i for i in range(1, len(times)) if times[i] - times[i - 1] >= SPLIT_GAP]
    bounds = list(zip([0, *cuts], [*cuts, len(times)], strict=True))
    merged: list[tuple[int, int]] = [bounds[0]]
    for start, end in bounds[1:]:
        prev = merged[-1]
        gap = times[start] - times[prev[1] - 1]
        a, b = _size(timed[prev[0] : prev[1]]), _size(timed[start:end])
        if gap < LONG_GAP and (a is None or b is None or a == b):
            merged[-1] = (prev[0], end)
        else:
            merged.append((start, end))
    return merged


def split(events: pl.DataFrame) -> tuple[pl.DataFrame, list[Job], int]:
    """The events of the largest job (most ranks, then most lines, then the latest), the jobs
    found (in time order), and the index of the kept one. One job: the events unchanged."""
    if events.height == 0 or "time" not in events.columns:
        return events, [], 0
    rows = events.with_row_index("_row")
    timed = rows.filter(pl.col("time").is_not_null()).sort("time", "_row")
    if timed.height < 2:
        return events, [], 0
    segments = _segments(timed)
    if len(segments) < 2:
        return events, [], 0
    job_of = pl.DataFrame(
        {
            "_row": pl.concat([timed["_row"][a:b] for a, b in segments]),
            "_job": [k for k, (a, b) in enumerate(segments) for _ in range(a, b)],
        },
        schema_overrides={"_job": pl.Int64},
    )
    rows = (
        rows.join(job_of, on="_row", how="left")
        .with_columns(pl.col("_job").forward_fill().backward_fill().over("source", order_by="line"))
        .with_columns(pl.col("_job").fill_null(len(segments) - 1))
    )
    jobs: list[Job] = []
    for k, (a, b) in enumerate(segments):
        mine = rows.filter(pl.col("_job") == k)
        ranks = mine.get_column("rank").drop_nulls().n_unique() if "rank" in mine.columns else 0
        jobs.append(Job(timed["time"][a], timed["time"][b - 1], _size(timed[a:b]), mine.height, ranks))
    keep = max(range(len(jobs)), key=lambda k: (jobs[k].ranks, jobs[k].lines, k))
    kept = rows.filter(pl.col("_job") == keep).drop("_row", "_job")
    return kept, jobs, keep


def describe(jobs: list[Job], keep: int) -> str:
    """One sentence for the top of every report: how many jobs, and which one was analysed."""

    def one(j: Job) -> str:
        span = ""
        if j.start is not None and j.end is not None:
            span = f"{j.start:%m-%d %H:%M}" + (f" to {j.end:%m-%d %H:%M}" if j.end != j.start else "")
        size = f"world size {j.world_size}" if j.world_size else "world size not stated"
        return f"{span} ({size}, {j.ranks} ranks, {j.lines} lines)" if span else f"({size})"

    others = [one(j) for k, j in enumerate(jobs) if k != keep]
    return (
        f"The input mixes {len(jobs)} jobs (lines that cannot be one run: "
        f"{'different world sizes or ' if len({j.world_size for j in jobs if j.world_size}) > 1 else ''}"
        f"dates far apart); analysed the largest, {one(jobs[keep])}; left out "
        + "; ".join(others)
        + ". Give each job's logs separately to analyse the others."
    )
