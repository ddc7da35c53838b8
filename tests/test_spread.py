"""Reading and matching on several processes (spread.py) give what one process gives, row for
row and byte for byte in the report; a worker that cannot start, or loads another library, and
input that must be read in one pass cost time and change nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import nccllog
from nccllog import parts, pipeline, spread
from nccllog.match.library import load_library
from nccllog.match.matcher import MatchResult, match_lines
from nccllog.render import render

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
LIB = load_library([])


def _lines(inputs: list[str]) -> pl.DataFrame:
    sources, skipped = pipeline._sources(inputs, None)
    got = parts.collect(
        sources,
        skipped,
        LIB,
        max_decompressed=pipeline.DEFAULT_MAX_DECOMPRESSED,
        max_total_decompressed=pipeline.DEFAULT_MAX_TOTAL_DECOMPRESSED,
    )
    return got.read.lines


@pytest.fixture(scope="module")
def all_fixture_lines() -> pl.DataFrame:
    """Every fixture's candidate lines in one table: many files, every pattern of the library."""
    return _lines(sorted(str(p / "logs") for p in FIXTURES.iterdir() if (p / "logs").is_dir()))


def _same(a: MatchResult, b: MatchResult) -> None:
    assert_frame_equal(a.events, b.events)
    assert (a.templates, a.overflow_fields, a.timed_out, a.thinned_lines) == (
        b.templates,
        b.overflow_fields,
        b.timed_out,
        b.thinned_lines,
    )


def test_runs_of_whole_files_give_the_rows_of_one_process(
    all_fixture_lines: pl.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spread, "RUN_LINES", 500)  # many runs: every file boundary is a cut
    from_workers = _count_worker_results(monkeypatch)
    one = match_lines(all_fixture_lines, LIB)
    many = spread.match_lines_parallel(all_fixture_lines, LIB, processes=3, min_lines_per_process=1)
    assert one.events.height > 5000 and one.templates
    assert from_workers, "no run was matched by a worker"
    _same(one, many)


def _count_worker_results(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that grows by one for each run a worker gives back."""
    got: list[int] = []
    read = spread.read_result

    def counted(*args: Any) -> MatchResult:
        got.append(1)
        return read(*args)

    monkeypatch.setattr(spread, "read_result", counted)
    return got


def test_a_worker_that_cannot_start_changes_nothing(
    all_fixture_lines: pl.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spread.sys, "executable", "/nonexistent/python")
    lines = all_fixture_lines.head(20_000)
    got = spread.match_lines_parallel(lines, LIB, processes=2, min_lines_per_process=1)
    _same(match_lines(lines, LIB), got)


def test_a_worker_with_another_library_changes_nothing(
    all_fixture_lines: pl.DataFrame, tmp_path: Path
) -> None:
    # A user's pattern changes after the caller loaded it: the worker's library has another
    # fingerprint, the worker stops, and the caller matches every run with its own library.
    own = tmp_path / "mine"
    own.mkdir()
    text = (FIXTURES.parent / "patterns" / "nccl" / "bootstrap_interface.toml").read_text()
    (own / "mine.toml").write_text(text.replace('id = "nccl.bootstrap_interface"', 'id = "mine.bootstrap"'))
    library = load_library([own])
    (own / "mine.toml").write_text(text.replace('id = "nccl.bootstrap_interface"', 'id = "mine.other"'))
    lines = all_fixture_lines.head(20_000)
    got = spread.match_lines_parallel(lines, library, processes=2, min_lines_per_process=1)
    assert got.events.get_column("pattern").eq("mine.bootstrap").any()
    _same(match_lines(lines, library), got)


def test_interleaved_files_are_matched_in_one_run() -> None:
    lines = pl.DataFrame({"source": ["a", "b", "a"], "line": [1, 1, 2], "text": ["x", "y", "z"]})
    assert spread._line_runs(lines, 3) == [(0, 3)]
    grouped = lines.sort("source", "line")
    assert spread._line_runs(grouped, 3) == [(0, 2), (2, 1)]


def test_small_jobs_start_no_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_worker(*_a: object, **_k: object) -> None:
        raise AssertionError("a worker started for a small job")

    monkeypatch.setattr(spread, "_Pool", no_worker)
    incident = nccllog.analyze([str(FIXTURES / "crash-oom-rank5-cascade" / "logs")], processes=8)
    assert incident.verdict.category


def _small_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers for the smallest job, and runs of a few files or lines."""
    monkeypatch.setattr(spread, "MIN_LINES_PER_PROCESS", 100)
    monkeypatch.setattr(spread, "MIN_FILES_PER_PROCESS", 1)
    monkeypatch.setattr(spread, "RUN_LINES", 200)
    monkeypatch.setattr(spread, "RUN_BYTES", 64 * 1024)


def _both(inputs: list[str], monkeypatch: pytest.MonkeyPatch, fmt: str = "json") -> tuple[str, str]:
    """The report of one process, then of three reading and matching runs of the files."""
    one = render(nccllog.analyze(inputs, processes=1), fmt)
    _small_runs(monkeypatch)
    return one, render(nccllog.analyze(inputs, processes=3), fmt)


def test_the_report_is_the_same_on_several_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.generate import write_tree

    write_tree(tmp_path / "job", 48, 32 * 1024, "straggler", 3, "flat", gz=False)
    from_workers = _count_worker_results(monkeypatch)
    spread_reads: list[object] = []
    read_and_match = spread.read_and_match

    def recorded(*args: Any, **kwargs: Any) -> Any:
        spread_reads.append(got := read_and_match(*args, **kwargs))
        return got

    monkeypatch.setattr(spread, "read_and_match", recorded)
    one, three = _both([str(tmp_path / "job")], monkeypatch)
    assert json.loads(one)["verdict"]["culprit_ranks"]
    assert spread_reads[0] is None and spread_reads[1] is not None  # one process, then the workers read
    assert from_workers
    assert one == three


def test_every_fixture_read_together_on_several_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every kind of input at once: archives, compressed files, Flight Recorder dumps, torchelastic
    # error files, consoles of many ranks, several jobs in one input.
    inputs = sorted(str(p / "logs") for p in FIXTURES.iterdir() if (p / "logs").is_dir())
    from_workers = _count_worker_results(monkeypatch)
    one, three = _both(inputs, monkeypatch)
    assert from_workers
    assert one == three


def test_parts_among_the_files_are_read_in_one_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    logs = FIXTURES / "crash-oom-rank5-cascade" / "logs"
    names = sorted(p for p in logs.rglob("*") if p.is_file())
    parts.write_part(parts.extract([str(names[0])], library=LIB), tmp_path / "a.parquet")
    inputs = [str(tmp_path / "a.parquet"), *map(str, names[1:])]
    one, three = _both(inputs, monkeypatch, "text")
    assert one == three


def test_past_the_total_decompression_limit_one_pass_decides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gzip

    for i in range(4):
        (tmp_path / f"rank_{i}.log.gz").write_bytes(gzip.compress(b"NCCL WARN some line\n" * 2000))
    kw = {"max_total_decompressed": 50_000}
    one = render(nccllog.analyze([str(tmp_path)], processes=1, **kw), "json")
    _small_runs(monkeypatch)
    monkeypatch.setattr(spread, "RUN_BYTES", 1)
    assert render(nccllog.analyze([str(tmp_path)], processes=3, **kw), "json") == one
    assert "total decompressed size limit" in one
