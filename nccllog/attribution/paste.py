"""Pastes a terminal hard-wrapped: one record cut into lines of one fixed width.

A console captured at a fixed width (a screen, a CI viewer, a terminal copied as a rectangle)
cuts every long record into physical lines of exactly that many characters, often padding the
last piece with spaces. The pieces after the first carry no prefix, so nothing in them is
attributed, and a message cut in two matches no pattern. When the text shows such a width, the
pieces are joined back: a line of exactly that width that does not end in padding continues on
the next line, unless the next line starts a record of its own (a known prefix layer).
"""

from __future__ import annotations

from collections import Counter

from nccllog.attribution.layers import parse_line

MIN_WIDTH = 60  # narrower "widths" are coincidences of short lines
MIN_CUT_LINES = 3  # lines of exactly the width, not ending in padding, needed to believe in it


def wrap_width(lines: list[bytes]) -> int | None:
    """The width the text was hard-wrapped at, or None: the most common length among long lines,
    which no line exceeds and which at least ``MIN_CUT_LINES`` lines reach without padding."""
    lengths = Counter(n for ln in lines if (n := len(ln)) >= MIN_WIDTH)
    if not lengths:
        return None
    width, _n = max(lengths.items(), key=lambda kv: (kv[1], kv[0]))
    if width != max(lengths):
        return None
    cut = sum(1 for ln in lines if len(ln) == width and not ln.endswith(b"  "))
    return width if cut >= MIN_CUT_LINES else None


def _starts_record(line: bytes) -> bool:
    text = line.decode("utf-8", "replace")
    return bool(parse_line(text).layers)


def unwrap_fixed_width(lines: list[bytes]) -> list[bytes]:
    """Re-join records a fixed-width terminal cut into pieces (line numbers kept: a piece joined
    to the line above leaves an empty line)."""
    lines = [ln.rstrip(b"\r") for ln in lines]
    width = wrap_width(lines)
    if width is None:
        return lines
    out = list(lines)
    head = None  # index of the record the current piece continues
    for i, line in enumerate(lines):
        if head is not None and line.strip() and not _starts_record(line):
            out[head] += line
            out[i] = b""
        else:
            head = i
        # a piece of the full width that does not end in padding (two spaces) is cut mid-record
        if not (len(line) == width and not line.endswith(b"  ")):
            head = None
    return [ln.rstrip(b" ") if len(ln) >= width else ln for ln in out]
