"""Every fixture under fixtures/ yields the verdict its expect.toml states, and its lines get the
ranks a careful human would give them."""

from __future__ import annotations

import tomllib
from contextlib import chdir
from pathlib import Path
from typing import Any

import pytest

import nccllog
from bench.cases import FIXTURES, fixture_cases
from nccllog.model import CONFIDENCES
from nccllog.pipeline import attribute

# Sealed real-thread fixtures are evaluated only by `bench/accuracy.py --sealed` (bench/cases.py).
CASES = {c.name: c for c in fixture_cases()}
SCENARIOS = [FIXTURES / name for name in sorted(CASES)]


def _expect(folder: Path) -> dict[str, Any]:
    return tomllib.loads((folder / "expect.toml").read_text(encoding="utf-8"))


def _cases(check: str) -> list[object]:
    """One case per fixture; a fixture whose expect.toml records a known gap for this check runs as
    a strict xfail (it fails loudly once the gap is closed, so the record must then go)."""
    out: list[object] = []
    for folder in SCENARIOS:
        gap = _expect(folder).get("known_gaps", {}).get(check)
        marks = [pytest.mark.xfail(strict=True, reason=gap)] if gap else []
        out.append(pytest.param(folder, id=folder.name, marks=marks))
    return out


@pytest.mark.parametrize("folder", _cases("verdict"))
def test_verdict(folder: Path) -> None:
    want = _expect(folder)["expect"]
    with chdir(folder):
        incident = nccllog.analyze("logs")
    v = incident.verdict
    # `accept` lists the other categories a careful reader of a real thread would also accept.
    assert CASES[folder.name].category_ok(v.category), f"{folder.name}: {v.category} ({v.summary})"
    assert sorted(v.culprit_ranks) == sorted(want["culprit_ranks"]), f"{folder.name}: {v.summary}"
    if "culprit_hosts" in want:
        assert sorted(v.culprit_hosts) == sorted(want["culprit_hosts"]), f"{folder.name}: {v.summary}"
    assert CONFIDENCES.index(v.confidence) >= CONFIDENCES.index(want["min_confidence"]), v.summary
    if "world_size" in want:
        assert incident.world_size == want["world_size"]


@pytest.mark.parametrize("folder", SCENARIOS, ids=[f.name for f in SCENARIOS])
def test_verdict_does_not_depend_on_where_the_folder_lives(folder: Path) -> None:
    # The README runs `nccllog analyze fixtures/<name>/logs`; fixture names carry words such as
    # "rank0" that must not be read as attribution.
    with chdir(folder):
        here = nccllog.analyze("logs").verdict
    with chdir(FIXTURES.parent):
        there = nccllog.analyze(str(folder.relative_to(FIXTURES.parent) / "logs")).verdict
    assert (there.category, there.culprit_ranks, there.confidence) == (
        here.category,
        here.culprit_ranks,
        here.confidence,
    )


@pytest.mark.parametrize("folder", _cases("lines"))
def test_line_attribution(folder: Path) -> None:
    checks = _expect(folder).get("lines", [])
    if not checks:
        pytest.skip("no attribution checks")
    with chdir(folder):
        rows = attribute("logs").to_dicts()
    for check in checks:
        hits = [
            r
            for r in rows
            if check["contains"] in r["text"] and ("source" not in check or r["source"] == check["source"])
        ]
        assert hits, f"{folder.name}: no line contains {check['contains']!r}"
        got = hits[0]
        where = f"{folder.name}: {got['source']}:{got['line']}"
        want = None if check["rank"] == -1 else check["rank"]
        assert got["rank"] == want, f"{where} rank {got['rank']}, expected {want} ({got['attribution']})"
        if "target_rank" in check:
            target = got.get("target_rank")
            assert target == check["target_rank"], (
                f"{where} target_rank {target}, expected {check['target_rank']}"
            )
