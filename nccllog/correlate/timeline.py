"""One timeline for all hosts, tolerant of clock skew.

Hosts log their own wall clock. Some events happen at the same moment everywhere: the watchdog
timeouts of one collective fire within about a second on every rank that waited in it (they
entered it together and share the timeout), and the ranks of one communicator finish its init
together. Each such group is a sync point; a host's offset is the median, over the sync points it
shares with hosts already placed, of how far its clock reads from theirs. Offsets under a second
are noise (watchdog poll, entry jitter) and are reported as 0.

Untimestamped lines (NCCL INFO, tracebacks) keep their place in their file: they sort after the
last timestamped line before them in the same file.
"""

from __future__ import annotations

import bisect
import statistics
from collections import defaultdict
from datetime import datetime, timedelta

import polars as pl

from nccllog.model import TimelineEntry


def wait_began(fired: datetime, elapsed_ms: int) -> datetime | None:
    """When a wait that a watchdog line reports began: its time minus the elapsed time it gives;
    None when that falls outside the calendar (an elapsed time of thousands of years: a garbled line)."""
    try:
        return fired - timedelta(milliseconds=elapsed_ms)
    except OverflowError:
        return None


MIN_OFFSET_S = 1.0
TIMELINE_SIGNALS = (
    "collective_timeout",
    "work_status",
    "desync_report",
    "heartbeat",
    "stall",
    "root_cause",
    "process_exit",
    "actor_died",
    "xid",
)
MAX_TIMELINE = 50_000


def sync_points(ev: pl.DataFrame) -> pl.DataFrame:
    """(key, host, t) rows: per sync point and host, the median time (epoch seconds) there."""
    timed = ev.filter(pl.col("time").is_not_null() & pl.col("host").is_not_null())
    timeouts = timed.filter((pl.col("signal") == "collective_timeout") & pl.col("seq").is_not_null()).select(
        key=pl.concat_str(
            pl.lit("t:"), pl.col("pgk").fill_null("?"), pl.lit(":"), pl.col("seq").cast(pl.String)
        ),
        host=pl.col("host"),
        t=pl.col("time").dt.epoch("us") / 1e6,
    )
    inits = timed.filter(
        (pl.col("signal") == "init")
        & pl.col("comm_id").is_not_null()
        & pl.col("phase").str.contains("COMPLETE")
    ).select(
        key=pl.concat_str(pl.lit("i:"), pl.col("comm_id")),
        host=pl.col("host"),
        t=pl.col("time").dt.epoch("us") / 1e6,
    )
    both = pl.concat([timeouts, inits])
    if both.height == 0:
        return both
    return both.group_by("key", "host").agg(pl.col("t").median())


def unaligned_hosts(ev: pl.DataFrame, offsets: dict[str, float]) -> tuple[str, ...]:
    """Hosts with timed lines whose clocks no sync point tied to the others' (their times are as
    logged, so order across hosts involving them is not established); none with fewer than two."""
    if not ev.height or "host" not in ev.columns:
        return ()
    timed = ev.filter(pl.col("time").is_not_null() & pl.col("host").is_not_null())
    hosts = sorted(set(timed.get_column("host").to_list()))
    if len(hosts) < 2:
        return ()
    return tuple(h for h in hosts if h not in offsets)


def estimate_offsets(ev: pl.DataFrame) -> dict[str, float]:
    """Seconds to add to each host's clock to put it on the reference host's clock.

    Only hosts that share at least one sync point with the others get an entry.
    """
    pts = sync_points(ev)
    if pts.height == 0:
        return {}
    by_key: dict[str, dict[str, float]] = defaultdict(dict)
    for key, host, t in pts.iter_rows():
        by_key[key][host] = t
    shared = {k: v for k, v in by_key.items() if len(v) >= 2}
    if not shared:
        return {}
    count: dict[str, int] = defaultdict(int)
    for v in shared.values():
        for h in v:
            count[h] += 1
    ref = sorted(count, key=lambda h: (-count[h], h))[0]
    # Per sync point, the corrected times of the hosts placed so far, kept sorted: a host's
    # estimate reads the median of each of its sync points in O(1), instead of recomputing it
    # from every placed host (quadratic in hosts at 10,000+ hosts).
    keys_of: dict[str, list[str]] = defaultdict(list)
    for key, v in shared.items():
        for h in v:
            keys_of[h].append(key)
    placed: dict[str, list[float]] = {key: [] for key in shared}
    offsets: dict[str, float] = {}

    def place(host: str, offset: float) -> None:
        offsets[host] = offset
        for key in keys_of[host]:
            bisect.insort(placed[key], shared[key][host] + offset)

    place(ref, 0.0)
    while True:
        added = False
        for host in sorted(count):
            if host in offsets:
                continue
            diffs = [_median(placed[key]) - shared[key][host] for key in keys_of[host] if placed[key]]
            if diffs:
                place(host, statistics.median(diffs))
                added = True
        if not added:
            break
    return {h: (round(o, 3) if abs(o) >= MIN_OFFSET_S else 0.0) for h, o in sorted(offsets.items())}


def _median(ordered: list[float]) -> float:
    """``statistics.median`` of an already sorted, non-empty list."""
    n = len(ordered)
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def order_key(ev: pl.DataFrame) -> pl.DataFrame:
    """Add ``_anchor``: the corrected time, or for untimestamped lines the last one before them in their file."""
    # Within one file and host the log's own order wins over sub-seconds (c10 reads its fraction
    # apart from its second, so a later line can read a little earlier): the anchor never goes back.
    return (
        ev.with_columns(_anchor=pl.col("ctime").forward_fill().over("source", order_by="_i"))
        .with_columns(_anchor=pl.col("_anchor").backward_fill().over("source", order_by="_i"))
        .with_columns(_anchor=pl.col("_anchor").cum_max().over(["source", "host"], order_by="_i"))
    )


def build(ev: pl.DataFrame) -> tuple[TimelineEntry, ...]:
    """The merged timeline: warnings and errors plus the diagnosis-relevant signals, in corrected order."""
    keep = order_key(ev).filter(
        pl.col("severity").is_in(["warning", "error", "critical"])
        | pl.col("signal").is_in(list(TIMELINE_SIGNALS))
    )
    keep = keep.sort("_anchor", "source", "_i", nulls_last=True).head(MAX_TIMELINE)
    out = []
    for row in keep.select(
        "ctime", "rank", "host", "pattern", "text", "source", "line", "severity"
    ).iter_rows():
        ctime, rank, host, pattern, text, source, line, severity = row
        out.append(
            TimelineEntry(
                time=ctime.isoformat() if ctime is not None else None,
                rank=rank,
                host=host,
                pattern=pattern or "",
                text=text,
                source=source,
                line=line,
                severity=severity or "info",
            )
        )
    return tuple(out)
