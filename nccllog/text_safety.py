"""Text made safe to show: the one cleaner every string from a log or a file name passes through
before it reaches a terminal, an HTML page or markdown.

Log lines and file names are untrusted. A terminal obeys escape sequences (OSC 52 writes the
clipboard, CSI 2J clears the screen, OSC 0 sets the window title), bidi controls reorder what a
reader sees (``rank9\\u202egol.exe`` reads as ``rank9exe.log``), and a tracker turns ``https://…``
or ``www.…`` in markdown prose into a live link. ``clean`` shows every such character as a
visible escape (``\\x1b``, ``\\u202e``); ``defang`` makes web addresses inert in markdown prose
(``https[:]//``, ``www[.]``); ``one_line`` makes an error message one safe line that keeps its
reason when it must be cut. This module imports nothing from nccllog, so any stage may use it.
"""

from __future__ import annotations

import re

# C0 controls (tab and newline included: a display line is one line), DEL, C1 controls, and the
# characters that reorder or hide text: the Arabic letter mark, LRM/RLM, line and paragraph
# separators, bidi embeddings and overrides (U+202A-202E), isolates (U+2066-2069), and the BOM.
_C1_AND_REORDERING = "\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff"
UNSAFE_CHARS = "\x00-\x1f" + _C1_AND_REORDERING  # a regex character class body
_UNSAFE = re.compile(f"[{UNSAFE_CHARS}]")
_UNSAFE_KEEP_NEWLINE = re.compile(f"(?!\n)[{UNSAFE_CHARS}]")
# In JSON text, the same characters less the C0 controls (json.dumps escapes those itself).
_JSON_UNSAFE = re.compile(f"[{_C1_AND_REORDERING}]")

# Web addresses a markdown renderer links by itself (GitHub's extended autolinks): a scheme
# followed by ``://``, and ``www.`` (anywhere: GitHub links ``x_www.a.b`` too).
_SCHEME = re.compile(r"(?i)([a-z][a-z0-9+.-]{0,31}):(?=//)")
_WWW = re.compile(r"(?i)(www)\.")

LONG_WORD = 80  # in a cut error message, a run without spaces longer than this is a path or a name


def _escape_char(m: re.Match[str]) -> str:
    c = m.group(0)
    if c == "\t":
        return "    "
    code = ord(c)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(text: str | None, limit: int | None = None, *, newlines: bool = False) -> str:
    """``text`` made inert for display: control, escape and reordering characters become visible
    escapes (``\\x1b``, ``\\u202e``), a tab becomes four spaces, and the result is cut to ``limit``
    characters with a marker saying how much went. ``newlines=True`` keeps line breaks (HTML).
    Idempotent: cleaning cleaned text changes nothing."""
    if not text:
        return ""
    out = (_UNSAFE_KEEP_NEWLINE if newlines else _UNSAFE).sub(_escape_char, text)
    if limit is not None and len(out) > limit:
        cut = len(out) - limit
        out = f"{out[:limit]}… [+{cut} chars]"
    return out


def json_safe(json_text: str) -> str:
    """JSON text (from ``json.dumps``) with DEL, C1 controls and bidi characters written as
    ``\\uXXXX`` escapes: the data is unchanged, and printing it to a terminal is safe."""
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", json_text)


def defang(text: str) -> str:
    """Web addresses made inert for markdown prose: ``https://x`` -> ``https[:]//x`` and
    ``www.x`` -> ``www[.]x`` (the usual way to quote a link that must not be followed). The caller
    escapes the brackets like any other markdown punctuation; code spans and fences need none."""
    return _WWW.sub(r"\1[.]", _SCHEME.sub(r"\1[:]", text))


def middle_cut(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters in the middle (``abc…xyz``): a path keeps its
    start and its file name."""
    if len(text) <= limit:
        return text
    head = max(limit // 3, 1)
    tail = max(limit - head - 1, 1)
    return text[:head] + "…" + text[-tail:]


def one_line(message: str, limit: int = 300) -> str:
    """An error message as one safe line of at most about ``limit`` characters: cleaned, its
    first line only, long names cut in the middle first (so the reason stays), then the middle."""
    first = message.strip().splitlines()[0] if message.strip() else ""
    out = clean(first)
    if len(out) > limit:
        out = re.sub(rf"\S{{{LONG_WORD + 1},}}", lambda m: middle_cut(m.group(0), LONG_WORD), out)
    return middle_cut(out, limit)
