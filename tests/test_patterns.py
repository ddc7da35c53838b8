"""Every pattern's examples must match (with their field values) and its near-misses must not,
through the same reader, prefilter, attribution and matcher that production uses."""

from __future__ import annotations

from typing import Any

import pytest

from nccllog.ingest.reader import read_sources
from nccllog.ingest.sources import Source
from nccllog.match.keywords import prefilter_keywords, sampled_keywords
from nccllog.match.library import Library, Pattern, load_library
from nccllog.match.matcher import match_lines

LIBRARY: Library = load_library()
KEYWORDS = prefilter_keywords(LIBRARY)
SAMPLED = sampled_keywords(LIBRARY)


def _events_for(line: str) -> list[dict[str, Any]]:
    read = read_sources([Source(name="example.log", data=line.encode("utf-8"))], KEYWORDS, sampled=SAMPLED)
    return match_lines(read.lines, LIBRARY).events.to_dicts()


def _cases(kind: str) -> list[Any]:
    out = []
    for p in LIBRARY.patterns:
        items = p.examples if kind == "example" else p.near_misses
        for i, item in enumerate(items):
            out.append(pytest.param(p, item, id=f"{p.id}#{i}"))
    return out


def test_library_loads_and_is_not_empty() -> None:
    assert len(LIBRARY.patterns) > 0


@pytest.mark.parametrize(("pattern", "example"), _cases("example"))
def test_example_matches(pattern: Pattern, example: Any) -> None:
    events = [e for e in _events_for(example.line) if e["pattern"] == pattern.id]
    assert events, f"{pattern.id} does not match its example {example.line!r}"
    got = events[0]
    for name, want in example.fields.items():
        assert got[name] == want, f"{pattern.id}: field {name} = {got[name]!r}, expected {want!r}"
    if example.rank is not None:
        assert got["rank"] == example.rank


@pytest.mark.parametrize(("pattern", "line"), _cases("near_miss"))
def test_near_miss_does_not_match(pattern: Pattern, line: str) -> None:
    assert not [e for e in _events_for(line) if e["pattern"] == pattern.id]
