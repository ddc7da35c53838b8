"""The labelled cases nccllog is measured on: scenario fixtures, sealed real-thread fixtures, the real
GF-Bench runs, and any local folder of pasted logs.

Fixtures written from real public threads (``incident = "real-thread"`` in expect.toml) are split by
a hash of their folder name: a third are *sealed*. Sealed fixtures are not run by the test suite and
not looked at while the engine is developed; ``bench/accuracy.py --sealed`` evaluates them at the
end, so their accuracy estimates how nccllog does on logs nobody tuned it for.
"""

from __future__ import annotations

import csv
import hashlib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
GF = ROOT.parent / "shared" / "external" / "gf-bench"
GF_CATEGORY = {"no_fault": "no_failure", "cuda_oom": "oom", "gpu_straggler": "straggler_hang"}
SEAL_MODULUS = 3  # one real-thread fixture in three is sealed


def is_sealed(name: str) -> bool:
    """Whether the real-thread fixture ``name`` (its folder name) belongs to the sealed set."""
    return int(hashlib.sha256(name.encode("utf-8")).hexdigest(), 16) % SEAL_MODULUS == 0


@dataclass(frozen=True)
class Case:
    """One labelled input: where its logs are and what a careful reader concludes."""

    name: str
    group: str  # scenarios | captured | real-threads | sealed | gf-bench | corpus
    inputs: Path  # folder (or file) handed to nccllog
    category: str
    accept: tuple[str, ...] = ()
    culprit_ranks: tuple[int, ...] = ()
    culprit_hosts: tuple[str, ...] | None = None  # None: not checked
    min_confidence: str = "low"
    gaps: dict[str, str] = field(default_factory=dict)  # known_gaps of expect.toml

    def category_ok(self, got: str) -> bool:
        """The category nccllog gave is the expected one or one a careful reader also accepts."""
        return got == self.category or got in self.accept

    def culprit_ok(self, ranks: list[int], hosts: list[str]) -> bool:
        """The culprit ranks (and hosts, where the label names them) are exactly the expected ones."""
        if sorted(ranks) != sorted(self.culprit_ranks):
            return False
        return self.culprit_hosts is None or sorted(hosts) == sorted(self.culprit_hosts)


def read_expect(folder: Path) -> dict[str, Any]:
    """A fixture's expect.toml."""
    return tomllib.loads((folder / "expect.toml").read_text(encoding="utf-8"))


def _fixture_case(folder: Path) -> Case:
    doc = read_expect(folder)
    want = doc["expect"]
    real = doc.get("incident") == "real-thread"
    group = ("sealed" if is_sealed(folder.name) else "real-threads") if real else "scenarios"
    if doc.get("incident") == "captured":
        group = "captured"  # our own real runs on a GPU machine: real output, known cause
    return Case(
        name=folder.name,
        group=group,
        inputs=folder / "logs",
        category=want["category"],
        accept=tuple(want.get("accept", ())),
        culprit_ranks=tuple(want["culprit_ranks"]),
        culprit_hosts=tuple(want["culprit_hosts"]) if "culprit_hosts" in want else None,
        min_confidence=want.get("min_confidence", "low"),
        gaps=dict(doc.get("known_gaps", {})),
    )


def fixture_cases(*, sealed: bool = False) -> list[Case]:
    """Every fixture under fixtures/; sealed ones only when asked for."""
    cases = [_fixture_case(p.parent) for p in sorted(FIXTURES.glob("*/expect.toml"))]
    return [c for c in cases if sealed or c.group != "sealed"]


def gfbench_cases() -> list[Case]:
    """The labelled GF-Bench runs, where ../shared/external/gf-bench is present."""
    labels = GF / "labels.csv"
    if not labels.is_file():
        return []
    with labels.open(newline="") as fh:
        rows = sorted(csv.DictReader(fh), key=lambda r: r["run_id"])
    cases = []
    for row in rows:
        folder = sorted(GF.glob(f"dataset/*/{row['run_id']}"))[0]
        category = GF_CATEGORY[row["fault_type"]]
        culprits = () if category == "no_failure" else (int(row["affected_rank"]),)
        cases.append(Case(row["run_id"], "gf-bench", folder, category, culprit_ranks=culprits))
    return cases


def corpus_cases(root: Path) -> list[Case]:
    """A local folder of ``<id>/paste.txt`` + ``<id>/label.toml`` (pasted logs kept outside the repo)."""
    cases = []
    for label in sorted(root.glob("*/label.toml")):
        doc = tomllib.loads(label.read_text(encoding="utf-8"))
        hosts = tuple(doc.get("culprit_hosts", ()))
        cases.append(
            Case(
                name=label.parent.name,
                group="corpus",
                inputs=label.parent / "paste.txt",
                category=doc["category"],
                accept=tuple(doc.get("accept", ())),
                culprit_ranks=tuple(doc.get("culprit_ranks", ())),
                culprit_hosts=hosts or None,
            )
        )
    return cases
