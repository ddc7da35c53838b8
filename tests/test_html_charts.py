"""The HTML report's charts and navigation, without a browser: the last-heard chart, the Gantt of the
stuck collective, the enqueued/completed skew per process group, the lines around each evidence
line, the section nav, dark mode and the :target highlight; bounded rows and size at 4,096 ranks."""

from __future__ import annotations

import dataclasses
import re

import polars as pl
import pytest
from html_synth import SEQ, job
from synth import HOSTILE, straggler

from nccllog.model import Evidence, Incident
from nccllog.render import charts, render

EXTERNAL = re.compile(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:|//|ftp:|file:)|url\(|@import""", re.I)


@pytest.fixture(scope="module")
def small() -> Incident:
    return job(8)


@pytest.fixture(scope="module")
def huge() -> Incident:
    return job(4096)


def _ranks(row: charts.Row) -> int:
    return 1 if row.label.startswith("rank ") else int(row.label.split()[0])


def test_last_heard_one_row_per_rank_in_a_small_job(small: Incident) -> None:
    c = charts.last_heard(small)
    assert c is not None
    assert c.rows[0].label == "rank 5"  # the culprit went quiet first
    assert len(c.rows) == 8 and not c.more
    culprit = c.rows[0]
    assert culprit.culprit and culprit.note == "-10m00s"
    assert [s.cls for s in culprit.segs] == ["silence", "heard"]
    assert "silent for 10m00s before the failure" in culprit.segs[0].title
    assert c.markers[0].label == "failure"


def test_last_heard_bands_thousands_of_ranks(huge: Incident) -> None:
    c = charts.last_heard(huge)
    assert c is not None
    assert len(c.rows) <= charts.MAX_ROWS
    culprit = [r for r in c.rows if r.culprit]
    assert [r.label for r in culprit] == ["rank 2049"]
    more = int(c.more.split()[1]) if c.more else 0
    assert sum(_ranks(r) for r in c.rows) + more == 4096
    assert any(r.label == "3 ranks" and r.sub == "7, 1507, …" for r in c.rows)  # the crashed ranks


def test_last_heard_rank_without_time_has_a_row() -> None:
    inc = job(8)
    ranks = tuple(dataclasses.replace(r, last_time=None) if r.rank == 5 else r for r in inc.ranks)
    c = charts.last_heard(dataclasses.replace(inc, ranks=ranks))
    assert c is not None
    row = c.rows[0]  # the culprit's row comes first even without a time
    assert row.label == "rank 5" and row.note == "no time" and not row.segs
    ranks = tuple(dataclasses.replace(r, last_time=None) if r.rank == 2 else r for r in inc.ranks)
    c = charts.last_heard(dataclasses.replace(inc, ranks=ranks))
    assert c is not None and c.rows[-1].label == "rank 2"  # another rank's comes last


def test_gantt_starts_at_elapsed_and_ends_at_the_watchdog(small: Incident) -> None:
    c = charts.stuck_gantt(small)
    assert c is not None
    assert f"ALLREDUCE #{SEQ}" in c.caption and "timeout 600,000 ms" in c.caption
    assert c.rows[0].label == "rank 5" and c.rows[0].note == "never entered"
    rank0 = next(r for r in c.rows if r.label == "rank 0")
    # rank 0 ran for 600000 ms before its watchdog fired at 14:12:30.000
    assert "from 14:02:30.000 to 14:12:30.000" in rank0.segs[0].title
    assert [s.cls for s in rank0.segs] == ["wait"]
    rank1 = next(r for r in c.rows if r.label == "rank 1")  # ran for 600037 ms: 37 ms past the timeout
    assert [s.cls for s in rank1.segs] == ["wait", "late"]
    assert "37ms after the timeout" in rank1.segs[1].title
    widths = {r.label: r.segs[0].x2 - r.segs[0].x for r in c.rows if r.segs}
    assert max(widths.values()) - min(widths.values()) < 2  # everyone waited about 600 s


def test_gantt_estimates_the_start_without_elapsed(small: Incident) -> None:
    colls = tuple(dataclasses.replace(c, elapsed_ms={}) for c in small.collectives)
    inc = dataclasses.replace(small, collectives=colls, events=small.events.drop("elapsed_ms"))
    c = charts.stuck_gantt(inc)
    assert c is not None
    assert all(s.cls == "wait est" for r in c.rows for s in r.segs)
    assert "estimated" in c.rows[1].title


def test_gantt_absent_without_a_timed_out_collective() -> None:
    inc = dataclasses.replace(job(8), collectives=())
    assert charts.stuck_gantt(inc) is None
    assert charts.last_heard(inc) is not None


def test_gantt_bounded_at_4096_ranks(huge: Incident) -> None:
    c = charts.stuck_gantt(huge)
    assert c is not None
    assert len(c.rows) <= charts.MAX_ROWS and c.rows[0].culprit
    more = int(c.more.split()[1]) if c.more else 0
    assert sum(_ranks(r) for r in c.rows) + more == 4096


def test_skew_per_process_group(small: Incident) -> None:
    skews, hidden = charts.skew(small)
    assert [s.pg for s in skews] == ["0", "1"] and hidden == 0
    assert "last enqueued 4811–4812 (skew 1)" in skews[0].summary
    main = skews[0].chart.rows
    assert main[0].label == "rank 5" and main[0].note == f"enq {SEQ - 1} · done {SEQ - 1}"
    assert main[0].sub == "1 behind"
    pp = skews[1].chart.rows
    assert [(r.label, r.sub) for r in pp[:3]] == [
        ("rank 3", "1 behind"),
        ("rank 7", "1 behind"),
        ("rank 0", ""),
    ]
    assert pp[0].title == "rank 3: last enqueued 129, last completed 128"
    assert [s.cls for s in pp[0].segs] == ["inflight"] and [d.cls for d in pp[0].dots] == ["enq", "done"]


def test_skew_bands_identical_state(huge: Incident) -> None:
    skews, _ = charts.skew(huge)
    pp = skews[1].chart.rows
    assert [r.label for r in pp] == ["1015 ranks", "3071 ranks"]  # less the culprit and 9 crashed ranks
    assert pp[0].sub == "3, 11, …" and pp[0].note == "enq 129 · done 128"
    assert pp[0].title.startswith("ranks 3, 11, 15, 19")


def test_skew_caps_the_groups(small: Incident) -> None:
    ev = small.events
    extra = [
        ev.filter(pl.col("last_enqueued").is_not_null() & (pl.col("pg") == "1")).with_columns(
            pg=pl.lit(f"pp{k}")
        )
        for k in range(charts.MAX_GROUPS + 2)
    ]
    skews, hidden = charts.skew(dataclasses.replace(small, events=pl.concat([ev, *extra])))
    assert len(skews) == charts.MAX_GROUPS and hidden == 4


def test_evidence_context_from_kept_lines(small: Incident) -> None:
    ev = small.verdict.evidence[0]  # rank 0's watchdog line, line 900
    ctx = charts.evidence_context(small, [ev])[0]
    assert [(c.line, c.evidence, c.gap) for c in ctx] == [(900, True, 0), (901, False, 0), (902, False, 0)]
    wide = charts.evidence_context(small, [ev], reach=1000)[0]  # line 12 is 887 lines up
    assert [(c.line, c.gap) for c in wide][:2] == [(12, 0), (900, 887)]
    far = Evidence(ev.source, 5000, 0, "x")
    assert [c.line for c in charts.evidence_context(small, [far])[0]] == [5000]


def test_html_sections_nav_and_context(small: Incident) -> None:
    out = render(small, "html")
    nav = out[out.index('<nav class="toc"') : out.index("</nav>")]
    links = re.findall(r'href="#([a-z-]+)"', nav)
    assert links[:4] == ["verdict", "evidence", "charts", "todo"]
    for target in links:
        assert f'id="{target}"' in out, target
    assert 'id="last-heard"' in out and 'id="stuck"' in out and 'id="skew"' in out
    assert "@media (prefers-color-scheme: dark)" in out and "color-scheme: light dark" in out
    assert ":target" in out
    assert 'id="ev-1"' in out and 'class="ctx"' in out
    low = out.lower()
    assert "<script" not in low and not EXTERNAL.search(out)
    assert render(small, "html") == out


def test_html_context_lines_are_escaped() -> None:
    inc = straggler(8, culprit=3, hostile=True)
    ev = inc.events
    near = ev.filter((pl.col("rank") == 0) & (pl.col("line") == 900)).with_columns(
        line=pl.lit(898, pl.Int64), text=pl.lit(HOSTILE)
    )
    out = render(dataclasses.replace(inc, events=pl.concat([ev, near])), "html")
    ctx = out[out.index('class="ctx"') :]
    assert '<span class="no">898</span>' in ctx and "⋯ 1 line not kept" in ctx
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in ctx and "\\x1b[31mred" in ctx
    assert "<script" not in out.lower() and "\x1b" not in out


@pytest.mark.parametrize("world", [8, 512, 4096])
def test_html_size_stays_bounded(world: int) -> None:
    out = render(job(world), "html")
    assert len(out.encode()) < 400_000, len(out.encode())
    assert out.count("<svg") >= 4  # last heard, stuck collective, two skew charts, timeline
