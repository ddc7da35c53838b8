"""Timestamps in every form the producers print, including ones without a year."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple


class PartialTime(NamedTuple):
    """A wall-clock time as logged; ``year`` is None when the format has none (c10 `MMDD`)."""

    year: int | None
    month: int
    day: int
    hour: int
    minute: int
    second: int
    microsecond: int = 0

    def complete(self, year: int | None = None) -> datetime | None:
        """Return a datetime, using ``year`` when the line had none; None if impossible."""
        y = self.year if self.year is not None else year
        if y is None:
            return None
        try:
            return datetime(y, self.month, self.day, self.hour, self.minute, self.second, self.microsecond)
        except ValueError:
            return None
