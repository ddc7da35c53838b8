"""Messages that differ only in their numbers are matched once: per *shape*.

About half of a large job's candidate messages hold a rank, a count or an address of their own
(``Channel 12/0 : 7[7] -> 8[0] via P2P/CUMEM/read`` on every rank), so remembering the matches of
each message finds little. A message's shape writes each standalone number (a run of ASCII
digits with no letter, digit or ``_`` on either side) as zeros of the same length: ``Channel
00/0 : 0[0] -> 0[0] via P2P/CUMEM/read``. ``mlx5_0``, ``P2P``, ``0x1f`` and ``cuda12`` keep
their digits.

A pattern is *blind to numbers* (``number_blind``) when every part of its regex that may meet
a digit of a standalone number accepts all ten digits or none: ``\\d``, ``[0-9a-f]``, ``.``,
``\\S``, ``[^\\]]``, and a literal digit only right after a literal letter, digit or ``_`` (the
``2`` of ``P2P``), which meets only digits of numbers that are not standalone. Such a regex
takes the same path through a message and through its shape: every test of a character gives
the same answer, so the match has the same spans, and its fields are read from the message
itself. The analysis of the regex text is conservative: whatever it does not know (a digit in
an escape or a class other than ``0-9``, back-references, verbose or case-insensitive digits)
makes the pattern not blind, and a message with such a candidate is searched as before.
"""

from __future__ import annotations

import functools

import regex

_NUMBER = regex.compile(r"(?<![A-Za-z0-9_])[0-9]+(?![A-Za-z0-9_])")
_QUANTIFIER = regex.compile(r"\{[0-9]*(?:,[0-9]*)?\}")
# group openings whose text is no atom: `(?:`, lookarounds, atomic, branch reset, named groups
# (names may hold digits), inline flags other than verbose and case-insensitive (a scoped flag is
# not in the pattern's flags; under it `K` also matches the Kelvin sign, which is no letter here)
_GROUP = regex.compile(r"\(\?(?:P?<[A-Za-z_][A-Za-z0-9_]*>|[:=!>|]|<[=!]|[a-hj-wyzA-Z-]*[:)])")
_WORD = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_DIGITS = frozenset("0123456789")
_UNSURE_ESCAPES = frozenset("0123456789xuUNpPLgGXKkm")  # numeric payloads, properties, lists


def _zeros(m: regex.Match[str]) -> str:
    return "0" * (m.end() - m.start())


def shape(message: str) -> str:
    """``message`` with each standalone number's digits written as ``0`` (same length)."""
    return _NUMBER.sub(_zeros, message)


def number_blind(rx: regex.Pattern[str]) -> bool:
    """Whether ``rx`` matches a message and its ``shape`` alike (see the module's docstring)."""
    return _blind(rx.pattern, rx.flags)


@functools.lru_cache(maxsize=4096)
def _blind(src: str, flags: int) -> bool:
    if flags & (regex.VERBOSE | regex.V1):
        return False
    literal_digits = not flags & regex.IGNORECASE
    i, n = 0, len(src)
    chained = False  # the atom before this one is a literal letter, digit or `_`
    last_digit = False  # and it is a digit
    while i < n:
        c = src[i]
        if c == "\\":
            if src[i + 1 : i + 2] in _UNSURE_ESCAPES or i + 1 >= n:
                return False
            i, chained, last_digit = i + 2, False, False
        elif c == "[":
            end = _class_end(src, i)
            if end < 0:
                return False
            i, chained, last_digit = end, False, False
        elif c == "{" and (q := _QUANTIFIER.match(src, i)):
            i, chained = q.end(), chained and last_digit
        elif c in "?*+":
            i, chained = i + 1, chained and last_digit
        elif c == "(" and src.startswith("(?", i):
            g = _GROUP.match(src, i)
            if g is None:
                return False
            i, chained, last_digit = g.end(), False, False
        elif c in _DIGITS:
            if not (chained and literal_digits):
                return False
            i, last_digit = i + 1, True
        else:
            i, chained, last_digit = i + 1, c in _WORD, False
    return True


def _class_end(src: str, start: int) -> int:
    """The end of the character class at ``start`` when it accepts all digits or none, else -1."""
    i = start + 1
    if src.startswith("^", i):
        i += 1
    body: list[str] = []
    first = True
    while i < len(src):
        c = src[i]
        if c == "]" and not first:
            text = "".join(body).replace("0-9", "")
            return i + 1 if not _DIGITS.intersection(text) and "[:" not in text else -1
        if c == "\\":
            e = src[i + 1 : i + 2]
            if not e or e in _UNSURE_ESCAPES:
                return -1
            i += 2
        else:
            body.append(c)
            i += 1
        first = False
    return -1
