"""The real GF-Bench runs (captured on real GPUs): the labelled fault type and affected rank must be
found from the run folders alone. Skipped where ../shared/external/gf-bench is absent."""

from __future__ import annotations

import csv

import pytest

import nccllog
from bench.cases import GF, Case, gfbench_cases

RUNS = gfbench_cases()
pytestmark = pytest.mark.skipif(not RUNS, reason="GF-Bench data not present")


def _world_sizes() -> dict[str, int]:
    with (GF / "labels.csv").open(newline="") as fh:
        return {r["run_id"]: int(r["world_size"]) for r in csv.DictReader(fh)}


@pytest.mark.parametrize("case", RUNS, ids=lambda c: c.name)
def test_gfbench_verdict(case: Case) -> None:
    v = nccllog.analyze(case.inputs).verdict
    assert v.category == case.category, v.summary
    assert list(v.culprit_ranks) == list(case.culprit_ranks), v.summary


@pytest.mark.parametrize("case", RUNS, ids=lambda c: c.name)
def test_gfbench_both_ranks_attributed(case: Case) -> None:
    incident = nccllog.analyze(case.inputs)
    assert set(incident.ranks_seen) >= {0, 1}
    assert incident.world_size == _world_sizes()[case.name]
