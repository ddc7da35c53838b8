"""Pass 7, years: the year of timestamps that print none (c10/glog ``MMDD``, syslog, journald).

From other lines of the same file, then a date in the file's path, then lines of the same host,
then the whole data set (the year that puts the time nearest the reference), then the file's
modification time; never from today. With none the time stays null and a note says so.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from nccllog.attribution.rows import Rows


@dataclass(frozen=True)
class YearFacts:
    """Each row's time with its year filled where the data set gives it."""

    time: list[datetime | None]
    notes: tuple[str, ...]


def resolve_years(rows: Rows, hosts: list[str | None], file_mtimes: Mapping[str, datetime]) -> YearFacts:
    """Fill missing years; ``hosts`` is each row's assigned host (display name)."""
    out: list[datetime | None] = list(rows.time)
    unknown = [i for i in range(rows.n) if rows.time[i] is not None and rows.year_known[i] is False]
    if not unknown:
        return YearFacts(out, ())
    known = [i for i in range(rows.n) if rows.time[i] is not None and rows.year_known[i] is not False]
    by_src: dict[str, list[datetime]] = defaultdict(list)
    by_host: dict[str, list[datetime]] = defaultdict(list)
    for i in known:
        by_src[rows.source[i]].append(rows.time[i])
        h = hosts[i]
        if h:
            by_host[h].append(rows.time[i])
    # one reference time (the median) per file, per host and for the data set
    src_ref = {k: _median(v) for k, v in by_src.items()}
    host_ref = {k: _median(v) for k, v in by_host.items()}
    all_ref = _median([rows.time[i] for i in known]) if known else None
    missing = from_mtime = 0
    for i in unknown:
        t: datetime = rows.time[i]
        ref = src_ref.get(rows.source[i])
        y: int | None = None
        if ref is not None:
            y = nearest_year(t, ref)
        elif rows.file_year[i] is not None:
            y = rows.file_year[i]
        elif (oh := hosts[i]) and oh in host_ref:
            y = nearest_year(t, host_ref[oh])
        elif all_ref is not None:
            y = nearest_year(t, all_ref)
        elif (mtime := file_mtimes.get(rows.source[i])) is not None:
            # A log is written before its file's last modification: the nearest year to it.
            y = nearest_year(t, mtime)
            from_mtime += 1
        new = with_year(t, y) if y is not None else None
        if y is None:  # keep the placeholder year: month, day and time still order the lines
            missing += 1
            new = t
        out[i] = new
    notes: list[str] = []
    if from_mtime:
        notes.append(
            f"{from_mtime} timestamp(s) without a year (c10/glog MMDD or syslog form) took it from their "
            "file's modification time: no line, path or host of the data set gives the year"
        )
    if missing:
        notes.append(
            f"{missing} timestamp(s) without a year (c10/glog MMDD or syslog form) are shown without one: "
            "no line of the same file, host or data set and no date in a path gives the year"
        )
    return YearFacts(out, tuple(notes))


def with_year(t: datetime, year: int) -> datetime | None:
    """``t`` in another year, or None for 29 February in a non-leap year."""
    try:
        return t.replace(year=year)
    except ValueError:
        return None


def _median(values: list[datetime]) -> datetime:
    return sorted(values)[len(values) // 2]


def nearest_year(t: datetime, ref: datetime) -> int | None:
    """The year that puts ``t`` (a placeholder-year time) nearest the reference time."""
    best: tuple[float, int] | None = None
    for y in (ref.year - 1, ref.year, ref.year + 1):
        cand = with_year(t, y)
        if cand is None:
            continue
        d = abs((cand - ref).total_seconds())
        if best is None or d < best[0]:
            best = (d, y)
    return best[1] if best else None
