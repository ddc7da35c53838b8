"""Input that mixes several jobs: find them, and keep the largest coherent one.

A paste or a folder can hold lines of unrelated runs. Lines are one job unless the time between
two stretches of lines cannot be one run: a gap of at least ``SPLIT_GAP`` between stretches that
state different world sizes, or whose collective sequence numbers go back down (on some rank and
process group, the first sequence number after the gap is below the last one before it: the
counters restarted, so a new run began), or a gap of at least ``LONG_GAP`` whatever they state (a
job's lines months apart are two jobs). A job that ran for days with a quiet log is never split
by time alone below ``LONG_GAP``, and sequence numbers that jump forward across a gap never split
(a quiet run reaches any number later). Untimed lines belong to the job of the timed line before
them in their file (or after them, at a file's start).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import polars as pl

SPLIT_GAP = timedelta(hours=6)
LONG_GAP = timedelta(days=30)
_SIZE_COLUMNS = ("world_size", "nranks")
# Why a stretch of lines is another job than the one before it, in the order they are named.
SIZES, SEQUENCE, DATES = "sizes", "sequence", "dates"
_REASON_WORDS = {
    SIZES: "different world sizes",
    SEQUENCE: "collective sequence numbers that start over",
    DATES: "dates far apart",
}
# A run's collective counter is kept per process group and rank (null: a key of its own).
_SEQ_KEYS = ("pg", "rank")
SeqEnds = dict[tuple[str, str], tuple[int, int]]


@dataclass(frozen=True)
class Job:
    """One run found in the input: its time span, stated world size, lines and ranks, and why it
    is not the job before it (``SIZES`` and/or ``DATES``, else ``SEQUENCE``; empty for the
    first)."""

    start: datetime | None
    end: datetime | None
    world_size: int | None
    lines: int
    ranks: int
    split_by: tuple[str, ...] = ()


def _sizes(timed: pl.DataFrame, nb: int) -> list[dict[str, int]]:
    """Per stretch, the largest positive value of each size column it states."""
    out: list[dict[str, int]] = [{} for _ in range(nb)]
    for col in _SIZE_COLUMNS:
        if col in timed.columns:
            top = timed.group_by("_b").agg(pl.col(col).cast(pl.Int64, strict=False).max())
            for b, v in top.iter_rows():
                if isinstance(v, int) and v > 0:
                    out[b][col] = v
    return out


def _seq_ends(timed: pl.DataFrame, nb: int) -> list[SeqEnds]:
    """Per stretch, the first and last (in time order) sequence number of each (process group,
    rank); an unnamed group or an unknown rank is a key of its own."""
    out: list[SeqEnds] = [{} for _ in range(nb)]
    if not all(c in timed.columns for c in ("seq", *_SEQ_KEYS)):
        return out
    keys = [pl.col(c).cast(pl.String).fill_null("") for c in _SEQ_KEYS]
    seqs = timed.select("_b", *keys, pl.col("seq").cast(pl.Int64, strict=False)).drop_nulls("seq")
    ends = seqs.group_by("_b", *_SEQ_KEYS, maintain_order=True).agg(
        pl.col("seq").first().alias("first"), pl.col("seq").last().alias("last")
    )
    for b, pg, rank, first, last in ends.iter_rows():
        out[b][(pg, rank)] = (first, last)
    return out


def _size_of(sizes: dict[str, int]) -> int | None:
    """The world size stated: torch's world size, else NCCL's largest comm."""
    return next((sizes[c] for c in _SIZE_COLUMNS if c in sizes), None)


@dataclass
class _Stretch:
    """Time-sorted rows ``start:end`` taken as one job, why it is not the one before it, and the
    sizes and last sequence numbers stated so far."""

    start: int
    end: int
    split_by: tuple[str, ...]
    sizes: dict[str, int]
    last_seq: dict[tuple[str, str], int]


def _segments(timed: pl.DataFrame) -> list[_Stretch]:
    """The time-sorted lines as jobs: split where the gap means another job. One pass: each
    stretch between gaps is summarised once."""
    times = timed.get_column("time")
    gap = (times.diff() >= SPLIT_GAP).fill_null(False)
    cuts = gap.arg_true().to_list()
    if not cuts:  # no gap to split at: one job, nothing to summarise
        return [_Stretch(0, len(times), (), {}, {})]
    bounds = list(zip([0, *cuts], [*cuts, len(times)], strict=True))
    timed = timed.with_columns(_b=gap.cum_sum())
    sizes, seqs = _sizes(timed, len(bounds)), _seq_ends(timed, len(bounds))
    jobs: list[_Stretch] = []
    for k, (start, end) in enumerate(bounds):
        if jobs:
            job = jobs[-1]
            a, b = _size_of(job.sizes), _size_of(sizes[k])
            why = (
                *([SIZES] if a is not None and b is not None and a != b else []),
                *([DATES] if times[start] - times[job.end - 1] >= LONG_GAP else []),
            )
            # Within one run a rank's sequence numbers on a group only grow: down is a restart.
            # Named only where it alone tells the jobs apart.
            if not why and any(f < job.last_seq.get(key, f) for key, (f, _) in seqs[k].items()):
                why = (SEQUENCE,)
        if not jobs or why:
            jobs.append(_Stretch(start, end, why if jobs else (), {}, {}))
        job = jobs[-1]
        job.end = end
        for col, v in sizes[k].items():
            job.sizes[col] = max(v, job.sizes.get(col, v))
        job.last_seq |= {key: last for key, (_, last) in seqs[k].items()}
    return jobs


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
            "_row": pl.concat([timed["_row"][j.start : j.end] for j in segments]),
            "_job": [k for k, j in enumerate(segments) for _ in range(j.start, j.end)],
        },
        schema_overrides={"_job": pl.Int64},
    )
    rows = (
        rows.join(job_of, on="_row", how="left")
        .with_columns(pl.col("_job").forward_fill().backward_fill().over("source", order_by="line"))
        .with_columns(pl.col("_job").fill_null(len(segments) - 1))
    )
    jobs: list[Job] = []
    for k, j in enumerate(segments):
        mine = rows.filter(pl.col("_job") == k)
        ranks = mine.get_column("rank").drop_nulls().n_unique() if "rank" in mine.columns else 0
        start, end = timed["time"][j.start], timed["time"][j.end - 1]
        jobs.append(Job(start, end, _size_of(j.sizes), mine.height, ranks, j.split_by))
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
    found = {r for j in jobs for r in j.split_by}
    why = " or ".join(words for r, words in _REASON_WORDS.items() if r in found)
    return (
        f"The input mixes {len(jobs)} jobs (lines that cannot be one run: {why}); "
        f"analysed the largest, {one(jobs[keep])}; left out "
        + "; ".join(others)
        + ". Give each job's logs separately to analyse the others."
    )
