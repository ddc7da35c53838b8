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


REPO = Path(__file__).resolve().parents[1]
_VOCAB_KEYS = {
    "category": "Category",
    "categories": "Category",
    "rank_causes": "Category",
    "category_free": "Category",
    "signal": "Signal",
    "signals": "Signal",
    "severity": "Severity",
}


def _vocab_strings(node: object, key: str = "") -> list[tuple[str, str]]:
    """(enum name, value) for every string under a vocabulary key of a TOML document."""
    if isinstance(node, dict):
        return [pair for k, v in node.items() for pair in _vocab_strings(v, k)]
    if isinstance(node, list):
        return [pair for v in node for pair in _vocab_strings(v, key)]
    if isinstance(node, str) and key in _VOCAB_KEYS:
        return [(_VOCAB_KEYS[key], node)]
    return []


def test_every_vocabulary_string_in_the_data_is_a_member() -> None:
    import tomllib

    from nccllog import vocab

    files = sorted((REPO / "patterns").rglob("*.toml")) + sorted((REPO / "nccllog").rglob("*.toml"))
    bad = []
    for path in files:
        doc = tomllib.loads(path.read_text("utf-8"))
        pairs = _vocab_strings(doc)
        pairs += [("FieldType", t) for t in doc.get("fields", {}).values() if isinstance(t, str)]
        pairs += [("Category", c) for c in doc.get("check", {})]  # remediation: advice per category
        for enum, value in pairs:
            if value not in {m.value for m in getattr(vocab, enum)}:
                bad.append(f"{path.relative_to(REPO)}: {value!r} is not a {enum}")
    assert not bad, "\n".join(bad)
    assert len(files) > 100


def test_the_vocabulary_is_the_one_the_tables_use() -> None:
    from nccllog import model, vocab
    from nccllog.match import library

    assert tuple(vocab.Category) == model.CATEGORIES
    assert tuple(vocab.Signal) == library.SIGNALS
    assert set(vocab.CATEGORY_TITLES) == set(vocab.Category)
    assert all(type(c) is str for c in model.CATEGORIES)  # plain strings in the JSON contract


def test_remedy_steps_name_their_variables_and_only_real_ones() -> None:
    from nccllog.advice.detect import Detected
    from nccllog.advice.text import violations
    from nccllog.advice.variables import is_covered, table
    from nccllog.correlate.rules.remedies import table as remedies

    for name, steps in remedies().items():
        for s in steps:
            for var in s.vars:
                assert var in s.text, (name, var)
                assert not is_covered(var) or table().get(var) is not None, (name, var)
            det = Detected(torch=_lowest(s.torch), torch_max=_lowest(s.torch), nccl=_lowest(s.nccl))
            assert not violations(s.text, det), (name, s.text)


def _lowest(gate: str | None) -> tuple[int, ...] | None:
    """The lowest version a remedy gate admits, or None (no version: what the step says unversioned)."""
    import re

    m = re.search(r">=\s*(\d+(?:\.\d+)*)", gate or "")
    if m:
        return tuple(int(p) for p in m.group(1).split("."))
    m = re.search(r"==\s*(\d+(?:\.\d+)*)", gate or "")
    return tuple(int(p) for p in m.group(1).split(".")) if m else None


def test_remedy_steps_follow_the_versions_shown() -> None:
    from nccllog.correlate.rules.remedies import steps

    def names(versions: dict[str, tuple[int, ...] | None]) -> str:
        return " ".join(steps("collect_hang", versions) + steps("collect_logs", versions))

    # torch 2.7 dumps the flight recorder on timeout by default: nothing to enable there.
    assert "TORCH_NCCL_DUMP_ON_TIMEOUT" not in names({"torch": (2, 7, 1)})
    assert "TORCH_NCCL_DUMP_ON_TIMEOUT" in names({"torch": (2, 6, 0)})
    assert "TORCH_NCCL_DUMP_ON_TIMEOUT" in names({})
    # NCCL_WARN_ENABLE_DEBUG_INFO exists from NCCL 2.19.4: named only where the logs show one.
    assert "NCCL_WARN_ENABLE_DEBUG_INFO" in names({"nccl": (2, 21, 5)})
    assert "NCCL_WARN_ENABLE_DEBUG_INFO" not in names({"nccl": (2, 18, 3)})
    assert "NCCL_WARN_ENABLE_DEBUG_INFO" not in names({})


def test_shown_versions_are_the_jobs_lowest() -> None:
    import polars as pl

    from nccllog.correlate.rules.remedies import shown_versions

    ev = pl.DataFrame(
        {
            "torch_version": ["2.6.0+cu124", None, "2.7.1"],
            "nccl_version": [None, "2.21.5", "2.26.2"],
            "framework": [None, None, "vllm"],
        }
    )
    assert shown_versions(ev) == {"torch": (2, 6, 0), "nccl": (2, 21, 5)}


def test_diagnosis_vocabulary_is_data() -> None:
    from nccllog.correlate import ranks_state
    from nccllog.correlate.rules import network, startup, timeouts, wording
    from nccllog.correlate.rules.vocabulary import vocabulary

    v = vocabulary()
    assert vocabulary() is v  # loaded once
    assert v.phase_words == timeouts.PHASE_WORDS and all(w == w.lower() for w in v.phase_words)
    assert v.stop_words == startup.STOP_WORDS and startup.VIRTUAL_IFACE is v.virtual_iface
    assert network.RESTRICTIVE_ENV["NCCL_P2P_LEVEL"] == ("LOC", "0")
    assert wording.XID_NAMES[79] == "GPU fell off the bus"
    assert (ranks_state.APP_XIDS, ranks_state.SECONDARY_XIDS, ranks_state.INFO_XIDS) == (
        (13, 31),
        (43, 45),
        (63, 92),
    )
    assert v.virtual_iface.search("NET/Socket : Using [0]veth1a2b:10.0.0.2<0>")
    assert not v.virtual_iface.search("NET/Socket : Using [0]eth0:10.0.0.2<0>")


def test_phase_words_match_any_case() -> None:
    import polars as pl

    from nccllog.correlate.rules.timeouts import PHASE_WORDS

    s = pl.Series(["SAVING CHECKPOINT to /ckpt", "Tokenizing shard 3", "step 10 loss 1.2"])
    assert s.str.contains_any(list(PHASE_WORDS), ascii_case_insensitive=True).to_list() == [True, True, False]
