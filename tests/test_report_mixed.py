"""Mixed input: lines of several jobs are said so at the top of every format, and the largest
coherent job is the one analysed."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timedelta

import polars as pl
import pytest
from click.testing import CliRunner

import nccllog
from nccllog.cli import main
from nccllog.correlate import jobs
from tests.report_lines import mismatch_job, mixed_jobs, rerun_jobs

SENTENCE = (
    "The input mixes 3 jobs (lines that cannot be one run: different world sizes or dates far apart); "
    "analysed the largest, 07-19 09:00 to 07-19 09:40 (world size 32, 32 ranks, 63 lines); left out "
    "03-02 09:00 to 03-02 09:40 (world size 8, 8 ranks, 15 lines); 11-05 09:00 to 11-05 09:40 "
    "(world size 10, 10 ranks, 19 lines). Give each job's logs separately to analyse the others."
)


@pytest.fixture(scope="module")
def incident() -> nccllog.Incident:
    return nccllog.analyze_text(mixed_jobs())


def test_largest_job_is_analysed(incident: nccllog.Incident) -> None:
    assert incident.mixed_input == SENTENCE
    assert incident.world_size == 32
    assert incident.verdict.category == "straggler_hang" and incident.verdict.culprit_ranks == (17,)


def test_every_format_says_so_at_the_top(incident: nccllog.Incident) -> None:
    text = nccllog.render(incident, "text", width=400)
    assert text.startswith("Mixed input: The input mixes 3 jobs")
    md = nccllog.render(incident, "markdown")
    assert md.splitlines()[2].startswith("> **Mixed input:** The input mixes 3 jobs")
    doc = json.loads(nccllog.render(incident, "json"))
    assert doc["mixed_input"] == SENTENCE and list(doc)[:3] == ["schema_version", "verdict", "mixed_input"]
    html = nccllog.render(incident, "html")
    banner = (
        '<p class="mixed" id="mixed-input" role="note"><strong>Mixed input:</strong> The input mixes 3 jobs'
    )
    assert html.index(banner) < html.index('id="verdict"')
    assert SENTENCE.replace("'", "&#39;") in html


def test_one_job_has_no_banner() -> None:
    assert 'class="mixed"' not in nccllog.render(nccllog.analyze_text(mismatch_job()), "html")


def test_html_banner_is_escaped(incident: nccllog.Incident) -> None:
    """The sentence names jobs from log text: markup, terminal escapes and bidi overrides in it
    stay inert text in the banner."""
    evil = 'x <script>alert(1)</script><img src=x onerror="y"> \x1b]52;c;QUFB\x07 \u202eexe.log'
    html = nccllog.render(dataclasses.replace(incident, mixed_input=evil), "html")
    start = html.index('<p class="mixed"')
    banner = html[start : html.index("</p>", start)]
    assert banner == (
        '<p class="mixed" id="mixed-input" role="note"><strong>Mixed input:</strong> x &lt;script&gt;'
        "alert(1)&lt;/script&gt;&lt;img src=x onerror=&#34;y&#34;&gt; \\x1b]52;c;QUFB\\x07 \\u202eexe.log"
    )
    assert "<script" not in html and "\x1b" not in html and "\u202e" not in html


def test_one_job_is_not_mixed() -> None:
    assert nccllog.analyze_text(mismatch_job()).mixed_input == ""


def test_paste_cli_reports_it() -> None:
    r = CliRunner().invoke(main, ["paste"], input=mixed_jobs())
    assert r.exit_code == 0 and "**Mixed input:** The input mixes 3 jobs" in r.stdout


def test_sequence_numbers_that_start_over_are_another_run() -> None:
    """Same world size, same day, 7 hours apart: the counters going from 90,412 back to 40 mean a
    new run; the two are alike in size, so the later one is analysed."""
    incident = nccllog.analyze_text(rerun_jobs(90412, 40, 17))
    assert incident.mixed_input == (
        "The input mixes 2 jobs (lines that cannot be one run: collective sequence numbers that start "
        "over); analysed the largest, 03-02 17:00 to 03-02 17:40 (world size 8, 8 ranks, 15 lines); "
        "left out 03-02 09:00 to 03-02 09:40 (world size 8, 8 ranks, 15 lines). Give each job's logs "
        "separately to analyse the others."
    )
    assert incident.verdict.culprit_ranks == (5,)


@pytest.mark.parametrize(
    ("first", "second", "hour"),
    [
        (40, 90412, 17),  # forward across a gap: a quiet run gets there
        (90412, 40, 11),  # back down after 80 minutes: a restart within the job (torchrun's)
    ],
)
def test_sequence_numbers_do_not_split_alone(first: int, second: int, hour: int) -> None:
    assert nccllog.analyze_text(rerun_jobs(first, second, hour)).mixed_input == ""


T0 = datetime(2025, 3, 2, 9)


def _events(rows: list[tuple[int, str | None, int, float]]) -> pl.DataFrame:
    """(rank, pg, seq, hours after T0) rows as an events table, one file, in line order."""
    return pl.DataFrame(
        {
            "source": ["a.log"] * len(rows),
            "line": list(range(1, len(rows) + 1)),
            "rank": [r[0] for r in rows],
            "pg": [r[1] for r in rows],
            "seq": [r[2] for r in rows],
            "time": [T0 + timedelta(hours=r[3]) for r in rows],
        },
        schema_overrides={"pg": pl.String},
    )


@pytest.mark.parametrize(
    ("rows", "split_by"),
    [
        ([(0, None, 9000, 0), (0, None, 40, 7)], [(), ("sequence",)]),
        ([(0, "1", 9000, 0), (1, "1", 9001, 0), (1, "1", 12, 7)], [(), ("sequence",)]),
        ([(0, "1", 9000, 0), (0, "2", 40, 7)], []),  # another process group has its own counter
        ([(0, "1", 9000, 0), (1, "1", 40, 7)], []),  # another rank: not this rank's counter
        ([(0, "1", 9000, 0), (0, "1", 8999, 5.9)], []),  # under SPLIT_GAP: never a split
        ([(0, "1", 9000, 0), (0, "1", 9000, 7)], []),  # the same number again
    ],
)
def test_sequence_split_is_per_rank_and_group(
    rows: list[tuple[int, str | None, int, float]], split_by: list[tuple[str, ...]]
) -> None:
    _, found, _ = jobs.split(_events(rows))
    assert [j.split_by for j in found] == split_by


def test_sequence_after_a_merged_stretch_compares_with_its_last_number() -> None:
    """Three stretches 7 hours apart: 100, then 5,000 (one run going on), then 4,000 (a new one)."""
    _, found, keep = jobs.split(_events([(0, None, 100, 0), (0, None, 5000, 7), (0, None, 4000, 14)]))
    assert [(j.start, j.end, j.split_by) for j in found] == [
        (T0, T0 + timedelta(hours=7), ()),
        (T0 + timedelta(hours=14), T0 + timedelta(hours=14), ("sequence",)),
    ]
    assert keep == 0  # the one with more lines
