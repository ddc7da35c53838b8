"""bench/accuracy.py: the sealed split is fixed by the fixture name, and the report adds up."""

from __future__ import annotations

from bench.accuracy import Outcome, report
from bench.cases import Case, is_sealed


def test_sealing_is_a_fixed_function_of_the_name() -> None:
    names = [f"rt-thread-{i}" for i in range(300)]
    sealed = [n for n in names if is_sealed(n)]
    assert sealed == [n for n in names if is_sealed(n)]  # deterministic
    assert 70 < len(sealed) < 130  # about a third


def test_accept_and_culprit_hosts() -> None:
    case = Case("x", "scenarios", inputs=None, category="unknown", accept=("straggler_hang",))  # type: ignore[arg-type]
    assert case.category_ok("unknown") and case.category_ok("straggler_hang")
    assert not case.category_ok("no_failure")
    assert case.culprit_ok([], ["any-host"])  # hosts not labelled: not checked
    hosted = Case("y", "scenarios", None, "network_ib", culprit_hosts=("gpu-7",))  # type: ignore[arg-type]
    assert hosted.culprit_ok([], ["gpu-7"]) and not hosted.culprit_ok([], [])


def test_report_counts_and_calibration() -> None:
    def o(name: str, ok: bool, conf: str) -> Outcome:
        got = "oom" if ok else "no_failure"
        return Outcome(name, "corpus", "oom", got, [], [], [], conf, ok, True, False)

    text = report("corpus", [o("a", True, "high"), o("b", False, "low"), o("c", True, "low")])
    assert "category right: 2/3 (67%)" in text
    assert "high    1/1 (100%)" in text
    assert "low     1/2 (50%)" in text
    assert "b: expected oom [], got no_failure [] low" in text
