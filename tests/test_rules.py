"""The rules package: its scores table, its vocabulary and its structure."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

from nccllog.correlate.rules.scores import Scores, scores

ENGINE = Path(__file__).resolve().parents[1] / "nccllog" / "correlate"


def _engine_text() -> str:
    paths = [*sorted((ENGINE / "rules").glob("*.py")), ENGINE / "diagnose.py"]
    return "\n".join(p.read_text("utf-8") for p in paths)


def test_scores_table_loads_every_field() -> None:
    s = scores()
    assert s.confidence_medium < s.confidence_strong
    assert all(isinstance(getattr(s, f.name), float) for f in fields(Scores))


def test_every_score_is_used_and_every_use_is_a_score() -> None:
    used = set(re.findall(r"\bS\.(\w+)", _engine_text()))
    names = {f.name for f in fields(Scores)}
    assert used - names == set()
    assert names - used == set(), "scores.toml keys no rule reads"


def test_rules_modules_stay_readable() -> None:
    for p in (ENGINE / "rules").glob("*.py"):
        assert len(p.read_text("utf-8").splitlines()) <= 600, p.name


def _fixture(name: str) -> list[str]:
    logs = Path(__file__).resolve().parents[1] / "fixtures" / name / "logs"
    return [str(p) for p in sorted(logs.rglob("*")) if p.is_file()]


def test_a_hang_verdict_names_its_collective() -> None:
    import json

    import nccllog

    incident = nccllog.analyze(_fixture("ts-torchtune-gemma-epoch-end-rank0-silent"))
    v = incident.verdict
    assert v.category == "straggler_hang"
    assert v.collective is not None
    assert (v.collective.pg, v.collective.seq, v.collective.op) == ("0", 15037, "_ALLGATHER_BASE")
    doc = json.loads(nccllog.render(incident, "json"))
    assert doc["verdict"]["collective"] == {"pg": "0", "seq": 15037, "op": "_ALLGATHER_BASE"}
    assert all("collective" in h for h in doc["hypotheses"])


def test_a_failure_verdict_names_no_collective() -> None:
    import json

    import nccllog

    incident = nccllog.analyze(_fixture("crash-oom-rank5-cascade"))
    assert incident.verdict.category == "oom"
    assert json.loads(nccllog.render(incident, "json"))["verdict"]["collective"] is None
