"""Golden snapshots: every unsealed fixture and GF-Bench run keeps its verdict, every hypothesis'
category, culprits and score, and its markdown report, byte for byte.

A refactor of the engine must leave these identical; a change that means to alter them regenerates
them on request (``NCCLLOG_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py``) and says in its
commit message what changed and why. Sealed fixtures are never run here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import nccllog
from bench.cases import GF, Case, fixture_cases, gfbench_cases

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("NCCLLOG_UPDATE_GOLDEN") == "1"
CASES = fixture_cases() + gfbench_cases()
# Reports name files by their path; the snapshots name them relative to these roots, so a clone
# anywhere (a worktree, CI's checkout) compares equal.
# Both spellings of each root: the cases name files through ../shared as given (a symlink in some
# checkouts), the resolved path where a path was resolved.
_REPO = Path(__file__).parents[1]
ROOTS = (
    (str(GF.resolve()), "<gf-bench>"),
    (str(GF.absolute()), "<gf-bench>"),
    (str(_REPO.resolve()), "<repo>"),
    (str(_REPO.absolute()), "<repo>"),
)


def _portable(text: str) -> str:
    for root, name in ROOTS:
        text = text.replace(root, name)
    return text


def snapshot(case: Case) -> tuple[str, str]:
    """The verdict and hypotheses as sorted JSON, and the markdown report, of one case."""
    incident = nccllog.analyze(case.inputs)
    hypotheses = [
        {
            "category": h.category,
            "culprit_ranks": list(h.culprit_ranks),
            "culprit_hosts": list(h.culprit_hosts),
            "confidence": str(h.confidence),
            "score": round(h.score, 6),
        }
        for h in incident.hypotheses
    ]
    v = incident.verdict
    verdict = {
        "category": v.category,
        "culprit_ranks": list(v.culprit_ranks),
        "culprit_hosts": list(v.culprit_hosts),
        "confidence": str(v.confidence),
    }
    facts = json.dumps({"verdict": verdict, "hypotheses": hypotheses}, indent=1, sort_keys=True)
    return facts + "\n", _portable(nccllog.render(incident, "markdown"))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_golden(case: Case) -> None:
    facts, markdown = snapshot(case)
    want_facts = GOLDEN / f"{case.name}.json"
    want_md = GOLDEN / f"{case.name}.md"
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        want_facts.write_text(facts, encoding="utf-8")
        want_md.write_text(markdown, encoding="utf-8")
        return
    if not want_facts.exists():
        pytest.fail(f"no golden snapshot for {case.name}: run with NCCLLOG_UPDATE_GOLDEN=1")
    assert facts == want_facts.read_text(encoding="utf-8")
    assert markdown == want_md.read_text(encoding="utf-8")
