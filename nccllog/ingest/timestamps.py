"""Timestamps in every form the producers print, including ones without a year.

Forms (formats.md §2.1, §2.2, §4.2, §5.1, §6.3, §7.5), read as the wall clock that was printed;
only an ISO time with an explicit offset (``+02:00``, ``-0500``) is converted to UTC, so that a
daylight-saving change inside a log does not reorder its lines (``Z`` is UTC already):

==========================  ===================================  ======  =========================
producer                    example                              year?   sub-second
==========================  ===================================  ======  =========================
c10 logger 2.4+             ``1023 14:02:17.412903117``          no      the wall clock's ns
                                                                         (kept to the microsecond;
                                                                         read apart from the second,
                                                                         see :func:`from_mmdd`)
                            ``307 09:05:01.000000001`` (Mar 7)   no      (same)
glog / torch Python 2.3+    ``1023 14:02:17.412903``             no      microseconds
Python asctime / DeepSpeed  ``2025-10-23 14:02:17,123``          yes     milliseconds
NCCL 2.26.2+ ``[%F %T]``    ``[2025-10-23 14:02:17]``            yes     none (``%Nf`` if set)
ISO 8601 / kubectl / CI     ``2025-10-23T14:02:17.123456Z``      yes     as printed
torchrun ChildFailedError   ``2025-10-23_14:02:20``              yes     none
journald / syslog           ``Oct 23 14:02:17``                  no      none
dmesg -T                    ``Thu Oct 23 14:02:17 2025``         yes     none
dmesg (plain)               ``[  123.456789]``                   --      seconds since boot: not a
                                                                         wall time, see
                                                                         :func:`parse_uptime`
==========================  ===================================  ======  =========================

A form without a year gives ``PartialTime.year = None``; the year is inferred later from other
lines of the same file, host or data set (never from today's date, see ``attribution/years.py``);
when nothing gives it (a paste of c10 lines only), the time keeps ``PLACEHOLDER_YEAR`` so that
month, day and time still order the lines, and the reports show it without a year.

This module is where nccllog reads time strings: log text with :func:`parse_timestamp` (and the
prefix layers with the ``from_*`` helpers), and the model's own times, ISO strings written by
``datetime.isoformat``, with :func:`parse_iso`, which the later stages (rules, renderers) use.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import NamedTuple

import regex

# The year used to store a year-less time in a Datetime column until the real year is known.
# 2000 is a leap year, so 29 February survives until the inferred year is applied.
PLACEHOLDER_YEAR = 2000

MONTHS = {
    m: i
    for i, m in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), start=1
    )
}


class PartialTime(NamedTuple):
    """A wall-clock time as logged; ``year`` is None when the format has none (c10 `MMDD`)."""

    year: int | None
    month: int
    day: int
    hour: int
    minute: int
    second: int
    microsecond: int = 0
    subsecond: bool = True  # False when the format has no (wall-clock) sub-second part
    utc_offset_min: int = 0  # the ISO offset printed (+02:00 -> 120); subtracted to give UTC

    def complete(self, year: int | None = None) -> datetime | None:
        """Return a datetime (UTC where the line printed an offset), using ``year`` when the line
        had none; None if impossible."""
        y = self.year if self.year is not None else year
        if y is None:
            return None
        try:
            when = datetime(y, self.month, self.day, self.hour, self.minute, self.second, self.microsecond)
            return when - timedelta(minutes=self.utc_offset_min) if self.utc_offset_min else when
        except (ValueError, OverflowError):
            return None

    def placeholder(self) -> datetime | None:
        """The datetime with ``PLACEHOLDER_YEAR`` standing in for a missing year."""
        return self.complete(PLACEHOLDER_YEAR)


def make_time(
    year: int | None,
    month: int,
    day: int,
    hour: int,
    minute: int,
    second: int,
    microsecond: int = 0,
    subsecond: bool = True,
) -> PartialTime | None:
    """A validated PartialTime, or None when a field is out of range (e.g. month 13, 31 April)."""
    try:
        datetime(
            year if year is not None else PLACEHOLDER_YEAR, month, day, hour, minute, second, microsecond
        )
    except (ValueError, OverflowError):
        return None
    return PartialTime(year, month, day, hour, minute, second, microsecond, subsecond)


def fraction_us(digits: str) -> int:
    """Microseconds from the digits after the decimal point (any count, truncated to 6)."""
    return int((digits + "000000")[:6]) if digits else 0


def from_mmdd(mmdd: str, hh: str, mi: str, ss: str, frac: str = "") -> PartialTime | None:
    """c10 / glog / torch-Python ``MMDD HH:MM:SS.frac`` (no year).

    ``mmdd`` is month*100+day; the c10 logger does not zero-pad the month (``307`` = 7 March).
    The fraction is kept to the microsecond: 6 digits (glog, Python) or c10's 9, the nanoseconds
    of ``high_resolution_clock`` (the system clock on Linux) modulo one second. c10 reads that
    clock apart from the ``time()`` that gives the seconds, so near a second's edge a line can
    read up to a second early; the timeline keeps each host's lines in the log's own order.
    """
    v = int(mmdd)
    if not frac:
        return make_time(None, v // 100, v % 100, int(hh), int(mi), int(ss), 0, False)
    return make_time(None, v // 100, v % 100, int(hh), int(mi), int(ss), fraction_us(frac), True)


_A = regex.ASCII
# The date-time forms that both these parsers and the line prefix layers (attribution/layer_regexes.py)
# read, as regex text with the group names ``from_iso_match`` / ``from_syslog_match`` expect.
_MONTH_NAMES = "|".join(MONTHS)  # Jan|Feb|…|Dec
ISO_DATE_TIME = (
    r"(?P<y>[0-9]{4})-(?P<mo>[0-9]{2})-(?P<d>[0-9]{2})[T ](?P<h>[0-9]{2}):(?P<mi>[0-9]{2}):(?P<s>[0-9]{2})"
    r"(?:[.,](?P<f>[0-9]{1,9}))?"
)
SYSLOG_DATE_TIME = (
    rf"(?P<mon>{_MONTH_NAMES}) (?P<d>[ 0-9][0-9]) (?P<h>[0-9]{{2}}):(?P<mi>[0-9]{{2}}):(?P<s>[0-9]{{2}})"
)
CTIME_DATE_TIME = (
    rf"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?P<mon>{_MONTH_NAMES}) (?P<d>[ 0-9]?[0-9]) "
    r"(?P<h>[0-9]{2}):(?P<mi>[0-9]{2}):(?P<s>[0-9]{2}) (?P<y>[0-9]{4})"
)
_ISO = regex.compile(
    r"(?P<y>[0-9]{4})-(?P<mo>[0-9]{2})-(?P<d>[0-9]{2})(?P<sep>[T _])(?P<h>[0-9]{2}):(?P<mi>[0-9]{2}):(?P<s>[0-9]{2})"
    r"(?:[.,](?P<f>[0-9]{1,9}))?(?P<tz>Z|[+-][0-9]{2}:?[0-9]{2})?",
    _A,
)
_SLASH = regex.compile(
    r"(?P<y>[0-9]{4})/(?P<mo>[0-9]{2})/(?P<d>[0-9]{2}) (?P<h>[0-9]{2}):(?P<mi>[0-9]{2}):(?P<s>[0-9]{2})"
    r"(?:[.,](?P<f>[0-9]{1,9}))?",
    _A,
)
_MMDD = regex.compile(
    r"(?:[FEWIVDC])?(?P<md>[0-9]{3,4}) (?P<h>[0-9]{2}):(?P<mi>[0-9]{2}):(?P<s>[0-9]{2})\.(?P<f>[0-9]{6}|[0-9]{9})(?![0-9])",
    _A,
)
_SYSLOG = regex.compile(SYSLOG_DATE_TIME + r"(?: (?P<y>[0-9]{4}))?", _A)
_CTIME = regex.compile(CTIME_DATE_TIME, _A)
_UPTIME = regex.compile(r"\[\s*(?P<s>[0-9]{1,10}\.[0-9]{1,9})\]", _A)


def utc_offset_minutes(tz: str | None) -> int | None:
    """Minutes east of UTC from an ISO offset (``Z``, ``+02:00``, ``-0530``); None if out of range."""
    if not tz or tz == "Z":
        return 0
    digits = tz[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:4])
    if hours > 18 or minutes > 59:
        return None
    return (hours * 60 + minutes) * (-1 if tz[0] == "-" else 1)


def from_iso_match(m: regex.Match[str]) -> PartialTime | None:
    """PartialTime from a match of the ISO-like pattern (``-`` date, ``T``/space/``_`` separator);
    an offset, where the pattern captures one as ``tz``, is kept so that ``complete`` gives UTC."""
    f = m.group("f") or ""
    offset = utc_offset_minutes(m.groupdict().get("tz"))
    if offset is None:
        return None
    t = make_time(
        int(m.group("y")),
        int(m.group("mo")),
        int(m.group("d")),
        int(m.group("h")),
        int(m.group("mi")),
        int(m.group("s")),
        fraction_us(f),
        bool(f),
    )
    return t._replace(utc_offset_min=offset) if t is not None and offset else t


def from_syslog_match(m: regex.Match[str]) -> PartialTime | None:
    """``Oct 23 14:02:17`` (journald/syslog, no year) or ``Thu Oct 23 14:02:17 2025`` (dmesg -T)."""
    y = m.groupdict().get("y")
    return make_time(
        int(y) if y else None,
        MONTHS[m.group("mon")],
        int(m.group("d").strip()),
        int(m.group("h")),
        int(m.group("mi")),
        int(m.group("s")),
        0,
        False,
    )


def parse_timestamp(text: str) -> PartialTime | None:
    """Parse a timestamp at the start of ``text`` (surrounding spaces and one pair of brackets allowed).

    Accepts every wall-clock form of the module table. Returns None for anything else,
    including dmesg uptime seconds (not wall time: use :func:`parse_uptime`).
    """
    s = text.strip()
    if s.startswith("[") and s.endswith("]"):
        s = s[1:-1].strip()
    if not s:
        return None
    c = s[0]
    if c.isdigit():
        m = _ISO.match(s)
        if m:
            return from_iso_match(m)
        m = _SLASH.match(s)
        if m:
            return from_iso_match(m)
    m = _MMDD.match(s)
    if m:
        return from_mmdd(m.group("md"), m.group("h"), m.group("mi"), m.group("s"), m.group("f"))
    m = _CTIME.match(s)
    if m:
        return from_syslog_match(m)
    m = _SYSLOG.match(s)
    if m:
        return from_syslog_match(m)
    return None


def parse_uptime(text: str) -> float | None:
    """Seconds since boot from a plain dmesg prefix ``[  123.456789]``; None otherwise.

    This is kept apart from wall-clock time: without the boot time of that host it cannot be
    placed on the timeline, only ordered within one host's kernel log.
    """
    m = _UPTIME.match(text.strip())
    return float(m.group("s")) if m else None


def parse_iso(iso: str | None) -> datetime | None:
    """A time of the model (an ISO string from ``datetime.isoformat``, never log text) as a naive
    datetime, its wall clock kept where it has an offset; None when empty or not ISO 8601."""
    if not iso:
        return None
    try:
        t = datetime.fromisoformat(iso)
    except ValueError:
        return None
    return t.replace(tzinfo=None) if t.tzinfo is not None else t
