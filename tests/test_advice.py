"""Advice: framework detection, the settings lint, version consistency, the known-variable check
of every remediation string, and the seed systems end to end."""

from __future__ import annotations

import re
import tomllib
from functools import cache
from pathlib import Path

import polars as pl
import pytest

from bench.cases import fixture_cases
from nccllog import analyze
from nccllog.advice import advise, explain_setting, version_consistency, violations
from nccllog.advice.detect import Detected, detect
from nccllog.advice.remedy import tables
from nccllog.advice.variables import parse_version
from nccllog.correlate.frame import whole_versions
from nccllog.match.library import load_library
from nccllog.model import EVENT_BASE_COLUMNS, Incident

ROOT = Path(__file__).resolve().parent.parent
# Sealed real-thread fixtures are read by `bench/accuracy.py --sealed` alone (bench/cases.py).
FIXTURES = [c.inputs.parent for c in fixture_cases()]
# The `framework` of a real-thread fixture says what the thread's job ran, not what its pasted
# lines show; detection is checked on the scenarios written to show it.
SCENARIOS = [c.inputs.parent for c in fixture_cases() if c.group == "scenarios"]


@cache
def incident(name: str) -> Incident:
    return analyze(ROOT / "fixtures" / name / "logs")


def expect(fixture: Path) -> dict:
    return tomllib.loads((fixture / "expect.toml").read_text())


# The framework of these fixtures shows only in lines no pattern matches (traceback frames,
# launcher banners), so nothing in the events names it. Reported to the pattern owners.
# Fixtures whose expect.toml names a framework that leaves no line of its own in the logs: the
# framework is known from the thread, not from anything a pattern could match. Their expectation is
# not checked here (the logs are never edited to add one).
NO_TRACE = {
    "net-ib-port-error-flapping": "Lightning: no line of the logs names or is printed by Lightning",
    "crash-ddp-nsys-sigsegv-nccl-2-14-3": "DDP: only the user script's own print and its file name (elastic_ddp.py)",
    "net-ib-err12-one-bad-host": "DDP: only a conda env path and the script name (train_ddp.py)",
    "net-rdzv-slurm-localhost-master": "DDP: no line mentions DDP or DistributedDataParallel",
    "net-socket-veth-init-hang": "DDP: only the user script's own 'wrapping model in ...' log line",
    "ts-clean-ddp-2x8-normal-exit": "DDP: no line mentions DDP or DistributedDataParallel",
    "ts-swift-minicpmv-bucket-numel-mismatch": "DDP: no line mentions DDP, its reducer or its buckets",
    "net-rdzv-staggered-node-setup-900s": "DeepSpeed: only a setup script's echo of a YAML config and a pip install",
}


def _framework_cases() -> list[object]:
    return [
        pytest.param(f.name, fw, id=f.name)
        for f in SCENARIOS
        if (fw := expect(f).get("framework")) and f.name not in NO_TRACE
    ]


@pytest.mark.parametrize("name", sorted(NO_TRACE))
def test_no_trace_fixtures_are_real(name: str) -> None:
    assert any(f.name == name and expect(f).get("framework") for f in SCENARIOS)


@pytest.mark.parametrize(("name", "framework"), _framework_cases())
def test_framework_detected(name: str, framework: str) -> None:
    assert framework in incident(name).environment.frameworks


def _events(rows: list[dict]) -> pl.DataFrame:
    """A minimal events table (base columns plus the few fields the advice reads)."""
    cols = {
        **EVENT_BASE_COLUMNS,
        "env_var": pl.String,
        "env_value": pl.String,
        "nccl_version": pl.String,
        "cuda_driver": pl.Int64,
        "framework": pl.String,
        "op": pl.String,
    }
    full = [{c: r.get(c) for c in cols} for r in rows]
    return pl.DataFrame(full, schema=cols)


def _row(i: int, **kw: object) -> dict:
    return {
        "source": "train.log",
        "line": i,
        "text": kw.get("message", ""),
        "repeat": 1,
        "severity": "info",
        **kw,
    }


USER_PATTERN = """
id = "site.export_env"
title = "A launcher script's echo of an exported variable"
producer = "shell"
family = "nccl_env"
versions = "any shell"
severity = "info"
signal = "env_setting"
keywords = ["export "]
regex = \'\'\'^\\+?\\s*export (?P<env_var>[A-Z][A-Z0-9_]*)=(?P<env_value>\\S*)\'\'\'
meaning = "The job script exported this variable."
[fields]
env_var = "str"
env_value = "str"
[[examples]]
line = "+ export NCCL_TIMEOUT=3600"
fields = { env_var = "NCCL_TIMEOUT", env_value = "3600" }
[[near_misses]]
line = "exporting model"
"""


def test_lint_folk_renamed_and_torch_variables(tmp_path: Path) -> None:
    # No built-in pattern matches `export NCCL_X=Y` echoes; a user pattern (--patterns) does.
    pats = tmp_path / "patterns"
    pats.mkdir()
    (pats / "export_env.toml").write_text(USER_PATTERN)
    log = tmp_path / "train.log"
    log.write_text(
        "+ export NCCL_TIMEOUT=3600\n"
        "+ export NCCL_MAX_RINGS=8\n"
        "+ export NCCL_ASYNC_ERROR_HANDLING=1\n"
        "[rank0]:[W1023 14:00:01.412903117 ProcessGroupNCCL.cpp:1007] Warning: Environment variable "
        "NCCL_ASYNC_ERROR_HANDLING is deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING instead (function operator())\n"
    )
    inc = analyze(log, patterns=[pats])
    by = {f.name: f for f in inc.environment.setting_findings}
    assert by["NCCL_TIMEOUT"].status == "unknown"
    assert "init_process_group(timeout=" in (by["NCCL_TIMEOUT"].replacement or "")
    assert by["NCCL_MAX_RINGS"].status == "unknown"
    assert by["NCCL_MAX_RINGS"].replacement == "NCCL_MAX_NCHANNELS"
    assert by["NCCL_ASYNC_ERROR_HANDLING"].status == "deprecated"
    assert by["NCCL_ASYNC_ERROR_HANDLING"].replacement == "TORCH_NCCL_ASYNC_ERROR_HANDLING"
    assert inc.environment.settings["NCCL_TIMEOUT"] == "3600"


def test_lint_version_and_performance() -> None:
    lib = load_library(())
    ev = _events(
        [
            _row(
                1,
                pattern="nccl.version",
                signal="version",
                nccl_version="2.4.8",
                message="NCCL version 2.4.8+cuda10.1",
            ),
            _row(2, pattern="site.env", signal="env_setting", env_var="NCCL_ALGO", env_value="Ring"),
            _row(
                3, pattern="nccl.env_setting", signal="env_setting", env_var="NCCL_P2P_DISABLE", env_value="1"
            ),
            _row(4, pattern="site.env", signal="env_setting", env_var="NCCL_IBEXT_DISABLE", env_value="1"),
            _row(5, pattern="site.env", signal="env_setting", env_var="NCCL_MAX_NRINGS", env_value="4"),
        ]
    )
    from nccllog.advice.lint import collect, lint

    det = detect(ev, lib)
    found = {(f.name, f.status) for f in lint(collect(ev), det)}
    assert ("NCCL_ALGO", "unknown") in found  # read from NCCL 2.5.6 only
    assert ("NCCL_P2P_DISABLE", "performance") in found
    assert ("NCCL_IBEXT_DISABLE", "misplaced") in found
    assert ("NCCL_MAX_NRINGS", "deprecated") not in found  # the current name before NCCL 2.5.6


def test_ib_disable_only_hurts_on_an_ib_cluster() -> None:
    from nccllog.advice.lint import collect, ib_present, lint

    base = [
        _row(1, pattern="nccl.env_setting", signal="env_setting", env_var="NCCL_IB_DISABLE", env_value="1")
    ]
    ib = [
        *base,
        _row(2, pattern="nccl.net_ib_devices", signal="bootstrap", message="NET/IB : Using [0]mlx5_0:1/IB"),
    ]
    for rows, expected in ((base, False), (ib, True)):
        ev = _events(rows)
        got = any(f.status == "performance" for f in lint(collect(ev), Detected(), ib=ib_present(ev)))
        assert got is expected


def test_version_consistency_splits_by_process() -> None:
    ev = _events(
        [
            _row(1, pattern="nccl.version", rank=0, host="a", nccl_version="2.21.5"),
            _row(2, pattern="nccl.version", rank=1, host="a", nccl_version="2.21.5"),
            _row(3, pattern="nccl.version", rank=2, host="b", nccl_version="2.18.1"),
            _row(4, pattern="nccl.cuda_driver_version", rank=0, host="a", cuda_driver=12040),
            _row(5, pattern="nccl.cuda_driver_version", rank=2, host="b", cuda_driver=12040),
            _row(
                6,
                pattern="vllm.using_nccl",
                rank=None,
                host="b",
                pid=7,
                nccl_version="2.20.5",
                framework="vLLM",
            ),
        ]
    )
    splits = version_consistency(ev)
    assert [s.component for s in splits] == ["NCCL"]
    assert splits[0].groups == {"2.21.5": ("rank 0", "rank 1"), "2.18.1": ("rank 2",)}


def test_explain_setting() -> None:
    text = explain_setting("NCCL_TIMEOUT") or ""
    assert "nothing reads it" in text
    assert "NCCL_MAX_NCHANNELS" in (explain_setting("NCCL_MAX_RINGS") or "")
    assert explain_setting("NOT_A_VARIABLE") is None


def test_explain_cli_falls_back_to_settings() -> None:
    from click.testing import CliRunner

    from nccllog.cli import main

    res = CliRunner().invoke(main, ["explain", "NCCL_IBEXT_DISABLE"])
    assert res.exit_code == 0 and "plugin" in res.output


# --------------------------------------------------------------------------- variable check


def _table_texts() -> list[tuple[str, str, Detected]]:
    """Every string of remediation.toml with the versions its entry is written for."""
    out = []
    t = tables()
    for e in t["timeout"]:
        for s in (e["why"], *e["steps"]):
            out.append((f"timeout.{e['framework']}", s, Detected()))
    for cat, e in t["check"].items():
        for s in (e["why"], *e["steps"]):
            out.append((f"check.{cat}", s, Detected()))
    for e in t["performance"]:
        out.append((f"performance.{e['name']}", e.get("replacement", ""), Detected()))
    return out


def test_advice_tables_name_only_real_variables() -> None:
    bad = [
        (where, [v.name for v in violations(s, det)])
        for where, s, det in _table_texts()
        if violations(s, det)
    ]
    assert not bad


def test_collect_next_time_per_version() -> None:
    from nccllog.advice.remedy import collect_next_time

    for torch in ((1, 10), (1, 13), (2, 2), (2, 6), (2, 8), None):
        for nccl in ((2, 4, 8), (2, 14, 3), (2, 21, 5), (2, 27, 3), None):
            det = Detected(torch=torch, torch_max=torch, nccl=nccl)
            for s in collect_next_time(det, False):
                assert not violations(s, det), (torch, nccl, s)


def _pattern_versions(text: str) -> Detected:
    """The versions a pattern's remediation is shown for: its own `versions` range."""
    m = re.match(r"(torch|NCCL) (\d+\.\d+(?:\.\d+)?)(?:-(\d+\.\d+(?:\.\d+)?))?", text)
    if not m:
        return Detected()
    lo = parse_version(m.group(2))
    hi = parse_version(m.group(3)) if m.group(3) else None
    if m.group(1) == "NCCL":
        return Detected(nccl=lo)
    return Detected(torch=lo, torch_max=hi)


def test_pattern_remediation_names_only_known_variables() -> None:
    lib = load_library(())
    found = set()
    for p in lib.patterns:
        det = _pattern_versions(p.versions)
        for r in p.remediation:
            for v in violations(r, det):
                found.add((p.id, v.name))
    assert found == set()


@pytest.mark.parametrize("name", [f.name for f in FIXTURES])
def test_fixture_remediation_fits_detected_versions(name: str) -> None:
    inc = incident(name)
    det = detect(inc.events, load_library(()))
    texts = [s for h in inc.hypotheses for s in (*h.remediation, *h.collect_next_time)]
    texts += [s for a in inc.advice for s in (a.why, *a.steps) if not a.title.startswith("Fix ")]
    bad = {(v.name, v.why) for s in texts for v in violations(s, det)}
    assert not bad


# --------------------------------------------------------------------------- seed systems


def _advice_text(inc: Incident) -> str:
    return "\n".join(f"{a.title}\n{a.why}\n" + "\n".join(a.steps) for a in inc.advice)


SEEDS = [
    ("rl-verl-validation-rollout-dedup-timeout", "verl", "actor_rollout_ref.nccl_timeout"),
    ("ts-verl-mesh-tp-subgroup-600s-timeout", "verl", "actor_rollout_ref.nccl_timeout"),
    ("ts-seed-llama3-8b-fsdp-lora-resume-seq-skew", "fsdp", "init_process_group(timeout="),
    ("crash-vlmr1-grpo-sigsegv-remote-timeouts", "deepspeed", "deepspeed.init_distributed(timeout="),
    ("rl-openrlhf-packed-engines-weight-sync-store-timeout", "openrlhf", "weight-sync group"),
]


@pytest.mark.parametrize(("name", "framework", "needle"), SEEDS, ids=[s[0] for s in SEEDS])
def test_seed_system_advice_fits_framework(name: str, framework: str, needle: str) -> None:
    if not (ROOT / "fixtures" / name).is_dir():
        pytest.skip(f"fixture {name} not present")
    inc = incident(name)
    assert framework in inc.environment.frameworks
    assert needle in _advice_text(inc)
    assert "NCCL_TIMEOUT=" not in _advice_text(inc)


def test_advise_is_idempotent_and_keeps_the_verdict() -> None:
    inc = incident("crash-vlmr1-grpo-sigsegv-remote-timeouts")
    again = advise(inc)
    assert again.verdict.category == inc.verdict.category
    assert again.advice == inc.advice


# --------------------------------------------------------------------------- advice fits the verdict


def _report(name: str, fmt: str) -> str:
    from click.testing import CliRunner

    from nccllog.cli import main

    res = CliRunner().invoke(main, ["analyze", str(ROOT / "fixtures" / name / "logs"), "-f", fmt])
    assert res.exit_code in (0, 1), res.output
    return res.output


def test_straggler_shown_idle_gets_no_timeout_advice() -> None:
    """The verdict rules out long work on the late rank: a larger timeout only lengthens the hang."""
    name = "ts-accelerate-eval-rank0-silent-broadcast"
    inc = incident(name)
    assert inc.verdict.category == "straggler_hang" and inc.verdict.culprit_ranks
    for fmt in ("markdown", "text"):
        out = _report(name, fmt)
        assert "Raise accelerate's timeout" not in out and "Raise the process-group timeout" not in out
        assert "Find what the late rank was doing" in out


def test_unknown_verdict_leads_with_collection_steps() -> None:
    name = "ts-lmeval-rank0-lone-timeout-unknown"
    inc = incident(name)
    assert inc.verdict.category == "unknown"
    titles = [a.title for a in inc.advice]
    assert titles[0] == "Collect next time" and "Catch the hang in the act next time" in titles
    md = _report(name, "markdown")
    assert "first step: While the job hangs, run py-spy dump" in md
    assert md.index("Collect next time") < md.index("Raise accelerate's timeout")


def test_deepspeed_launch_gets_no_torchrun_wording() -> None:
    name = "rt-qwenvlft-79-deepspeed-exit-9-host-ram"
    inc = incident(name)
    assert inc.environment.launcher == "deepspeed"
    text = _advice_text(inc) + "\n".join(inc.verdict.collect_next_time)
    assert "torchrun" not in text
    assert "--enable_each_rank_log" in text


@pytest.mark.parametrize("fmt", ["markdown", "text"])
def test_every_advice_shows_its_first_step_uncut(fmt: str) -> None:
    name = "ts-lmeval-rank0-lone-timeout-unknown"
    # markdown escapes ([, <, edge _) undone: the whole first step and why are there, uncut
    out = " ".join(_report(name, fmt).split()).replace("\\", "").replace("&lt;", "<")
    for a in incident(name).advice:
        assert a.steps
        assert " ".join(a.steps[0].split()) in out, a.steps[0]
        if fmt == "markdown":
            assert " ".join(a.why.split()) in out, a.why


def test_collect_next_time_flight_recorder_per_torch() -> None:
    from nccllog.advice.remedy import collect_next_time

    def first(torch: tuple[int, ...] | None, off: bool = False, nccl: tuple[int, ...] | None = None) -> str:
        return " ".join(collect_next_time(Detected(torch=torch, torch_max=torch, nccl=nccl), off))

    assert "TORCH_FR_DUMP_TEMP_FILE=<shared dir>/fr_rank_" in first((2, 8, 0))
    assert "comm_lib_trace_rank_" in first((2, 8, 0)) and "nccllog analyze logs/ dumps/" in first((2, 8, 0))
    assert "TORCH_NCCL_DEBUG_INFO_TEMP_FILE=<shared dir>/fr_rank_" in first((2, 7, 1))
    assert "TORCH_NCCL_DUMP_ON_TIMEOUT=1" not in first((2, 7, 1))
    assert "TORCH_NCCL_DUMP_ON_TIMEOUT=1" in first((2, 6, 0))
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE" not in first((2, 6, 0))
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE=2000" in first((2, 4, 0))
    assert "this run had the flight recorder off" in first((2, 8, 0), off=True)
    assert "flight recorder" not in first((1, 13))
    assert "NCCL_WARN_ENABLE_DEBUG_INFO" in first(None, nccl=(2, 21, 5))
    assert "NCCL_WARN_ENABLE_DEBUG_INFO" not in first(None, nccl=(2, 18, 3))
    assert "ncclras" in first(None, nccl=(2, 26, 2)) and "ncclras" not in first(None, nccl=(2, 21, 5))


def test_pattern_framework_key_is_validated_and_read(tmp_path: Path) -> None:
    from nccllog.errors import PatternLibraryError

    lib = load_library(())
    assert lib.get("pytorch.ddp_buckets_rebuilt").framework == "ddp"  # type: ignore[union-attr]
    assert (
        lib.get("verl.init_process_group") is None or lib.get("verl.init_process_group").framework == "verl"
    )  # type: ignore[union-attr]
    bad = tmp_path / "site"
    bad.mkdir()
    text = (ROOT / "patterns" / "pytorch" / "ddp_buckets_rebuilt.toml").read_text(encoding="utf-8")
    (bad / "ddp_bad.toml").write_text(
        text.replace('id = "pytorch.ddp_buckets_rebuilt"', 'id = "site.ddp_bad"').replace(
            'framework = "ddp"', 'framework = "Distributed Data Parallel"'
        ),
        encoding="utf-8",
    )
    with pytest.raises(PatternLibraryError, match="framework must be a lower-case name"):
        load_library([bad])


@pytest.mark.parametrize(
    ("text", "framework"),
    [
        ("(WorkerDict pid=4411) worker started", "verl"),
        ("INFO main_ppo.TaskRunner: run", "verl"),
        ("(CriticModelRayActor pid=12) step 3", "openrlhf"),
        ('File "/opt/app/megatron/core/parallel.py", line 9', "megatron"),
        ("  File /env/pytorch_lightning/trainer.py", "lightning"),
        ('File "/venv/torch/distributed/fsdp/api.py", line 3', "fsdp"),
        ("plain line about nothing", None),
    ],
)
def test_framework_words_from_text(text: str, framework: str | None) -> None:
    # the polars literal prefilter lets every line through that one of the text regexes matches
    det = detect(_events([_row(1, message=text), _row(2, message="NCCL INFO init done")]))
    assert list(det.frameworks) == ([framework] if framework else [])


def test_a_version_cut_with_its_line_is_the_whole_one() -> None:
    # The paste ends in the middle of rank 1's version line: `2.1` is the start of `2.19.3`, not a
    # second NCCL (no version split, and advice gated on 2.19.3).
    text = (
        "gpu-a:5101:5101 [0] NCCL INFO NCCL version 2.19.3+cuda12.3\n"
        "gpu-a:5102:5102 [1] NCCL INFO NCCL version 2.1"
    )
    inc = analyze(text)
    assert inc.environment.versions["nccl"] == ("2.19.3",)
    ev = pl.DataFrame({"nccl_version": ["2.1", "2.19.3", "2.7.8", None]})
    assert whole_versions(ev)["nccl_version"].to_list() == ["2.19.3", "2.19.3", "2.7.8", None]


def test_a_version_cut_with_its_line_splits_no_ranks() -> None:
    # The same cut in the error line torch raises on one rank of three: no rank runs another NCCL.
    line = (
        "[rank{r}]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:1691, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version {v}\n"
    )
    text = line.format(r=0, v="2.19.3") + line.format(r=2, v="2.19.3") + line.format(r=1, v="2.1")
    assert all(h.category != "version_mismatch" for h in analyze(text).hypotheses)
