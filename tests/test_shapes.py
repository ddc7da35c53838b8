"""Matching per shape (nccllog/match/shapes.py): a message whose numbers differ from a known
shape's takes that shape's spans, and must get exactly what a search of its own would give."""

from __future__ import annotations

import random
import time

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nccllog.attribution.layers import parse_line
from nccllog.match import matcher
from nccllog.match.library import Library, load_library
from nccllog.match.shapes import number_blind, shape

LIBRARY: Library = load_library()
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_NUMBER = regex.compile(r"[0-9]+")


@pytest.mark.parametrize(
    ("source", "blind"),
    [
        (r"Channel (?:\d+)(?:/\d+)? : \d+\[[0-9a-fx]+\] via (?P<t>(?:P2P|SHM|NET)/[\w/]+)", True),
        (r"rank (?P<r>\d+) n[Rr]anks (?P<n>\d{1,7})", True),
        (r"mlx5_0 P2?3 [a-z0-9]+ (?<![0-9])x [^]a]", True),
        (r"0x[0-9a-f]+", False),  # a literal digit after a space: it meets standalone numbers
        (r"P?2", False),
        (r"a|2", False),
        (r"(?:ab)2", False),
        (r"cuda12\.4", False),
        (r"[1-9]", False),
        (r"[\x30]", False),
        (r"[[:digit:]]", False),
        (r"\p{N}", False),
        (r"(\d)\1", False),
        (r"(?P<a>\d)(?P=a)", False),
        (r"(?x)P 2", False),
        (r"(?i)P2P", False),
        (r"(?i:K2)", False),
        (r"(?s:x)\d", True),
        (r"(?#2)", False),
        (r"[]2]", False),
    ],
)
def test_number_blind(source: str, blind: bool) -> None:
    assert number_blind(regex.compile(source)) is blind


def test_shape_zeroes_standalone_numbers_only() -> None:
    line = "Channel 12/0 : 7[7] -> 8[0] via P2P/CUMEM/read mlx5_0 0x1f cuda12.4 v2.21.5"
    assert shape(line) == "Channel 00/0 : 0[0] -> 0[0] via P2P/CUMEM/read mlx5_0 0x1f cuda12.0 v2.00.0"


def _examples() -> list[str]:
    return [parse_line(ex.line).message for p in LIBRARY.patterns for ex in p.examples]


EXAMPLES = _examples()


def _search(message: str) -> tuple[int, matcher._Hits, bool]:
    """What the matcher finds in ``message`` with no memo (every candidate searched)."""
    kws = tuple(sorted({k for k in LIBRARY.keywords if k in message}))
    pats = matcher._candidates(LIBRARY, kws, False)
    offset, matches, late = matcher._find(pats[0], message, time.monotonic() + 5)
    hits = tuple((p, *matcher._typed_fields(p, [m.group(f) for f in p.fields])) for p, m in matches)
    return offset, hits, late


@SETTINGS
@given(st.sampled_from(EXAMPLES), st.randoms(use_true_random=False))
def test_a_known_shape_gives_what_a_search_gives(message: str, rnd: random.Random) -> None:
    """Seed the memo with an example line, then look up lines of the same shape and other numbers."""
    kws = tuple(sorted({k for k in LIBRARY.keywords if k in message}))
    candidates = matcher._candidates(LIBRARY, kws, False)
    memo = matcher._Found()
    memo.get(candidates, message, time.monotonic() + 5)
    for _ in range(4):
        variant = _NUMBER.sub(lambda m: "".join(rnd.choice("0123456789") for _ in m.group()), message)
        got = memo.get(candidates, variant, time.monotonic() + 5)
        assert got == _search(variant), variant


def test_shapes_are_used_on_a_large_job(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines that differ only in ranks are searched once per shape, and get what a search gives."""
    lines = [
        f"Channel {c:02d}/0 : {r}[{r % 8}] -> {r + 1}[{(r + 1) % 8}] via P2P/CUMEM/read"
        for r in range(50)
        for c in range(4)
    ]
    expected = [_search(line) for line in lines]
    kws = tuple(sorted({k for k in LIBRARY.keywords if k in lines[0]}))
    candidates = matcher._candidates(LIBRARY, kws, False)
    assert candidates[2], "the channel line's patterns are blind to numbers"
    searched: list[str] = []
    find = matcher._find

    def counted(pats: list[matcher.Pattern], message: str, deadline: float) -> object:
        searched.append(message)
        return find(pats, message, deadline)

    monkeypatch.setattr(matcher, "_find", counted)
    memo = matcher._Found()
    assert [memo.get(candidates, line, time.monotonic() + 5) for line in lines] == expected
    # three shapes: ranks 0-8, rank 9 (next to 10), ranks 10-49
    assert len(searched) == len({shape(line) for line in lines}) == 3
