"""What chat, trackers and terminals do to a pasted log, undone (``unquote_paste``): quoting,
autolinks, lines wrapped inside a bracket, and a terminal's hard wrap.

A terminal hard-wraps by cutting one record into lines of one fixed width.

A console captured at a fixed width (a screen, a CI viewer, a terminal copied as a rectangle)
cuts every long record into physical lines of exactly that many characters, often padding the
last piece with spaces. The pieces after the first carry no prefix, so nothing in them is
attributed, and a message cut in two matches no pattern. When the text shows such a width, the
pieces are joined back: a line of exactly that width that does not end in padding continues on
the next line, unless the next line starts a record of its own (a known prefix layer).
"""

from __future__ import annotations

import re
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


# What a tracker's markdown makes of `net_ib.cc:101` or `10.1.3.201` in a pasted log: a link whose
# text is its own address, `[net_ib.cc:101](http://net_ib.cc:101/)`.
_AUTOLINK = re.compile(rb"\[([^\]\s()]{1,200})\]\((?:https?://)?\1/?\)")


def unquote_paste(data: bytes) -> bytes:
    """Undo what chat, e-mail and trackers do to a pasted blob: when most lines start with ``>``,
    drop one ``> `` from each (line numbers stay the same); turn autolinks back into their text.
    Code-fence lines stay and simply match nothing."""
    if b"](" in data:
        data = _AUTOLINK.sub(rb"\1", data)
    lines = data.split(b"\n")
    filled = [ln for ln in lines if ln.strip()]
    if filled and sum(ln.startswith(b">") for ln in filled) * 2 >= len(filled):
        lines = [ln[2:] if ln.startswith(b"> ") else ln[1:] if ln.startswith(b">") else ln for ln in lines]
    return b"\n".join(_unwrap(unwrap_fixed_width(lines)))


def _unwrap(lines: list[bytes]) -> list[bytes]:
    """Re-join lines a tracker or terminal wrapped inside a bracket: a line with an unclosed ``[``
    followed by an indented line is one line (an empty line keeps the numbering)."""
    out = list(lines)
    for i in range(1, len(out)):
        prev, cur = out[i - 1], out[i]
        if cur[:1] in (b" ", b"\t") and prev.count(b"[") > prev.count(b"]") and len(prev) < 4096:
            out[i - 1], out[i] = prev.rstrip() + b" " + cur.lstrip(), b""
    return out
