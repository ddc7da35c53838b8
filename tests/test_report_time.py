"""Time kept: year-less c10 times keep month, day, time and sub-seconds in paste mode; the stuck
collective's start per rank comes from "ran for N ms"; a file's own order wins within a host."""

from __future__ import annotations

from datetime import datetime

import nccllog
from nccllog.ingest.timestamps import PLACEHOLDER_YEAR, PartialTime, parse_timestamp
from nccllog.render.view import short_time
from tests.report_lines import mismatch_job


def test_c10_fraction_is_kept_to_the_microsecond() -> None:
    assert parse_timestamp("1014 11:47:00.123456789") == PartialTime(None, 10, 14, 11, 47, 0, 123456, True)


def test_yearless_paste_keeps_month_day_time() -> None:
    inc = nccllog.analyze_text(mismatch_job())
    times = [e.time for e in inc.timeline if e.time]
    assert times, "a paste of c10 lines alone still has times"
    t = datetime.fromisoformat(times[0])
    assert (t.year, t.month, t.day, t.hour, t.minute) == (PLACEHOLDER_YEAR, 10, 14, 11, 47)
    assert len({x for x in times}) > 1, "sub-seconds keep the ranks' lines apart"
    assert short_time(times[0], with_date=True).startswith("10-14 11:47:00.")  # shown without the year
    md = nccllog.render(inc, "markdown")
    assert "| 11:47:00." in md and str(PLACEHOLDER_YEAR) not in md


def test_stuck_since_from_elapsed_time() -> None:
    inc = nccllog.analyze_text(mismatch_job())
    r7 = next(r for r in inc.ranks if r.rank == 7)
    assert r7.stuck_since is not None
    start = datetime.fromisoformat(r7.stuck_since)
    line_time = datetime(PLACEHOLDER_YEAR, 10, 14, 11, 47, 0, 123456 + 7 * 1111)
    assert (line_time - start).total_seconds() == 600.017
