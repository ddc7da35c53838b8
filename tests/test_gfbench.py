"""The real GF-Bench runs (captured on real GPUs): the labelled fault type and affected rank must be
found from the run folders alone. Skipped where ../shared/external/gf-bench is absent."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

import nccllog

GF = Path(__file__).resolve().parents[2] / "shared" / "external" / "gf-bench"
LABELS = GF / "labels.csv"
CATEGORY = {"no_fault": "no_failure", "cuda_oom": "oom", "gpu_straggler": "straggler_hang"}


def _runs() -> list[dict[str, str]]:
    if not LABELS.is_file():
        return []
    with LABELS.open(newline="") as fh:
        return sorted(csv.DictReader(fh), key=lambda r: r["run_id"])


def _folder(run_id: str) -> Path:
    hits = sorted(GF.glob(f"dataset/*/{run_id}"))
    assert hits, run_id
    return hits[0]


pytestmark = pytest.mark.skipif(not LABELS.is_file(), reason="GF-Bench data not present")


@pytest.mark.parametrize("label", _runs(), ids=lambda r: r["run_id"])
def test_gfbench_verdict(label: dict[str, str]) -> None:
    incident = nccllog.analyze(_folder(label["run_id"]))
    want = CATEGORY[label["fault_type"]]
    assert incident.verdict.category == want, incident.verdict.summary
    if want != "no_failure":
        assert list(incident.verdict.culprit_ranks) == [int(label["affected_rank"])], incident.verdict.summary


@pytest.mark.parametrize("label", _runs(), ids=lambda r: r["run_id"])
def test_gfbench_both_ranks_attributed(label: dict[str, str]) -> None:
    incident = nccllog.analyze(_folder(label["run_id"]))
    assert set(incident.ranks_seen) >= {0, 1}
    assert incident.world_size == int(label["world_size"])
