"""Integers from log text, bounded: a digit run of any length never reaches ``int()``.

Python refuses to convert more than 4,300 digits (and a long run costs quadratic time before
that), so every number read from a log, a file name or an archive goes through ``int64``.
"""

from __future__ import annotations

INT64_MAX = 2**63 - 1
_MAX_DIGITS = 19  # len(str(INT64_MAX)); more digits cannot fit, whatever they are


def int64(digits: str | None) -> int | None:
    """A non-negative int64 from ASCII digits (leading zeros allowed), else None.

    None for an empty or non-digit string and for a value beyond 64 bits (the caller leaves the
    field empty and, where it counts coverage, says so in a note).
    """
    if not digits or not digits.isascii() or not digits.isdigit():
        return None
    s = digits.lstrip("0") or "0"
    if len(s) > _MAX_DIGITS:
        return None
    v = int(s)
    return v if v <= INT64_MAX else None
