"""Mixed input: lines of several jobs are said so at the top of every format, and the largest
coherent job is the one analysed."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import nccllog
from nccllog.cli import main
from tests.report_lines import mismatch_job, mixed_jobs

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


def test_one_job_is_not_mixed() -> None:
    assert nccllog.analyze_text(mismatch_job()).mixed_input == ""


def test_paste_cli_reports_it() -> None:
    r = CliRunner().invoke(main, ["paste"], input=mixed_jobs())
    assert r.exit_code == 0 and "**Mixed input:** The input mixes 3 jobs" in r.stdout
