"""The evidence that proves the verdict: the culprit's own line first, one representative of the
others folded with a count, the differing fields side by side, in every format (golden wording)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import nccllog
from nccllog.render.proof import OWN_LINE_NOTE, contrast, proof
from tests.report_lines import mismatch_job

FIXTURE = (
    Path(__file__).resolve().parent.parent / "fixtures" / "ts-accelerate-epoch-end-broadcast-vs-allreduce"
)


@pytest.fixture(scope="module")
def incident() -> nccllog.Incident:
    return nccllog.analyze_text(mismatch_job())


def test_contrast_names_both_sides(incident: nccllog.Incident) -> None:
    assert incident.verdict.category == "collective_mismatch"
    assert contrast(incident) == (
        "rank 7: BROADCAST, 812 elements | ranks 0-6, 8-9: ALLREDUCE, 1,048,576 elements (#4410)"
    )


def test_culprit_line_first_then_one_folded_representative(incident: nccllog.Incident) -> None:
    lines = proof(incident)
    assert lines[0].culprit and lines[0].evidence.rank == 7 and "BROADCAST" in lines[0].evidence.text
    others = [p for p in lines if not p.culprit and p.count > 1]
    assert others, "the alike ALLREDUCE lines fold into one"
    assert all("ALLREDUCE" in p.evidence.text for p in others)
    assert len({p.evidence.text for p in lines}) == len(lines)


def test_text_and_markdown_show_the_proof(incident: nccllog.Incident) -> None:
    text = nccllog.render(incident, "text", width=200)
    assert "rank 7: BROADCAST, 812 elements | ranks 0-6, 8-9: ALLREDUCE, 1,048,576 elements (#4410)" in text
    assert "alike: ranks" in text
    md = nccllog.render(incident, "markdown")
    assert (
        "**rank 7: BROADCAST, 812 elements \\| ranks 0-6, 8-9: ALLREDUCE, 1,048,576 elements (#4410)**" in md
    )


def test_json_verdict_carries_its_evidence(incident: nccllog.Incident) -> None:
    doc = json.loads(nccllog.render(incident, "json"))
    v = doc["verdict"]
    assert v["contrast"].startswith("rank 7: BROADCAST")
    first = v["evidence"][0]
    assert (first["rank"], first["culprit"], first["count"]) == (7, True, 1)
    assert any(e["count"] > 1 and len(e["ranks"]) == e["count"] for e in v["evidence"][1:])


@pytest.mark.skipif(not FIXTURE.is_dir(), reason="fixture not present")
def test_fixture_culprit_line_is_added_when_the_engine_gave_none() -> None:
    inc = nccllog.analyze(str(FIXTURE / "logs"))
    first = proof(inc)[0]
    assert first.evidence.rank == 7 and first.evidence.note == OWN_LINE_NOTE
    assert "OpType=BROADCAST" in first.evidence.text
