"""Layout that keeps the meaning: statuses never cut, message bodies not raw prefixes, timeline rows
folded across ranks, first errors as messages, the rank state vocabulary with its legend."""

from __future__ import annotations

import json

import pytest

import nccllog
from nccllog.model import RankStatus
from nccllog.render.layout import timeline_rows
from tests.report_lines import mismatch_job, watchdog


@pytest.fixture(scope="module")
def incident() -> nccllog.Incident:
    return nccllog.analyze_text(mismatch_job())


@pytest.mark.parametrize("width", [80, 120, 200])
def test_status_is_never_truncated(incident: nccllog.Incident, width: int) -> None:
    text = nccllog.render(incident, "text", width=width)
    ranks = text[text.index("\nRanks") :]
    row7 = ranks[ranks.index("\n 7 ◀") :].split("\n")[1:4]
    assert "BROADCAST #4410" in " ".join(" ".join(row7).split()), row7
    assert "…" not in "".join(line[:45] for line in ranks.splitlines())  # rank, host, status: never cut


def test_timeline_rows_show_messages_and_fold_across_ranks(incident: nccllog.Incident) -> None:
    rows, _before, _after = timeline_rows(incident, before=4, after=7)
    folded = [r for r in rows if len(r.ranks) == 9]
    assert folded, "the nine ALLREDUCE timeouts are one row"
    text = nccllog.render(incident, "text", width=200)
    tl = text[text.index("Timeline around the failure") : text.index("\nRanks")]
    assert "×9 ranks: Watchdog caught collective operation timeout" in tl
    assert "[rank" not in tl and "ProcessGroupNCCL.cpp:607]" not in tl  # the prefix layers are gone


def test_first_error_is_the_message_not_a_pattern_id(incident: nccllog.Incident) -> None:
    text = nccllog.render(incident, "text", width=200)
    ranks = text[text.index("\nRanks") :]
    assert "torch.watchdog_timeout" not in ranks
    assert "Watchdog caught collective" in ranks


def test_rank_states_and_flags(incident: nccllog.Incident) -> None:
    by = {r.rank: r for r in incident.ranks}
    assert by[7].state == RankStatus.TIMED_OUT and by[7].culprit and not by[7].outlier
    assert all(not r.culprit for k, r in by.items() if k != 7)
    doc = json.loads(nccllog.render(incident, "json"))
    row = doc["per_rank"][7]
    assert (row["state"], row["culprit"], row["status"]) == (
        "timed_out",
        True,
        "timed out at BROADCAST #4410",
    )


def test_library_and_json_use_the_same_names(incident: nccllog.Incident) -> None:
    import dataclasses

    doc = json.loads(nccllog.render(incident, "json"))
    assert set(doc["per_rank"][0]) == {f.name for f in dataclasses.fields(nccllog.RankInfo)}


def test_legend_explains_the_words_shown(incident: nccllog.Incident) -> None:
    text = nccllog.render(incident, "text", width=200)
    assert "◀ culprit · timed out at X: its watchdog gave up waiting in that collective" in text
    md = nccllog.render(incident, "markdown")
    assert "<sub>◀ culprit · timed out at X: its watchdog gave up waiting in that collective" in md


def test_a_job_that_did_not_finish_never_reads_ok() -> None:
    lines = [
        watchdog(r, "1014", f"11:47:00.{100000 + r:06d}000", 9, "ALLREDUCE", 64, 600000) for r in (1, 2, 3)
    ]
    lines.append(
        "[rank0]:[I1014 11:30:00.000000000 ProcessGroupNCCL.cpp:2000] [PG 0 Rank 0] ProcessGroupNCCL initialized"
    )
    inc = nccllog.analyze_text("\n".join(lines) + "\n")
    for fmt in ("text", "markdown", "json"):
        out = nccllog.render(inc, fmt, width=200)
        assert "| ok |" not in out and " ok " not in out.replace("Look", "")
    assert all(r.state != RankStatus.FINISHED for r in inc.ranks)


def test_one_line_coverage_is_singular() -> None:
    from nccllog.render.view import coverage_line

    inc = nccllog.analyze_text(mismatch_job(world=2, odd=1).splitlines()[0] + "\n")
    assert "1 line," in coverage_line(inc) and "1 lines" not in coverage_line(inc)
