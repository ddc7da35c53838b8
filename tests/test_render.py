"""Every renderer on synthetic incidents (8 and 1024 ranks, hostile log text) and on every fixture:
deterministic, inert log text, large jobs folded, the JSON contract complete."""

from __future__ import annotations

import json
import re
from contextlib import chdir
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt
from synth import HOSTILE, straggler

import nccllog
from bench.cases import fixture_cases
from nccllog.model import Incident
from nccllog.render import FORMATS, render, view
from nccllog.render.markdown import code, esc, fence
from nccllog.render.text import render_text

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SCENARIOS = [c.inputs.parent for c in fixture_cases()]  # sealed fixtures: bench/accuracy.py --sealed only
# What may never reach a terminal raw: C0 controls except newline, DEL, C1, bidi/line separators.
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


@pytest.fixture(scope="module")
def small() -> Incident:
    return straggler(8, culprit=3)


@pytest.fixture(scope="module")
def hostile() -> Incident:
    return straggler(8, culprit=3, hostile=True)


@pytest.fixture(scope="module")
def large() -> Incident:
    return straggler(1024, culprit=517)


# ---------------------------------------------------------------------------------------------
# determinism


@pytest.mark.parametrize("fmt", FORMATS)
def test_deterministic_synthetic(fmt: str) -> None:
    a = render(straggler(64, culprit=9, hostile=True), fmt)
    b = render(straggler(64, culprit=9, hostile=True), fmt)
    assert a == b


@pytest.mark.parametrize("folder", SCENARIOS, ids=[p.name for p in SCENARIOS])
def test_every_fixture_every_format_deterministic(folder: Path) -> None:
    with chdir(folder):
        first = nccllog.analyze("logs")
        second = nccllog.analyze("logs")
    for fmt in FORMATS:
        a, b = render(first, fmt), render(second, fmt)
        assert a == b, f"{folder.name}: {fmt} differs between two runs"
        assert a.endswith("\n")
        assert str(folder) not in a, f"{folder.name}: {fmt} contains an absolute path"
        assert "/pytest-of-" not in a  # no temporary directory of the test run (logs may name /tmp/ray/…)
    # the redacted forms are deterministic too
    assert render(first, "markdown", redact=True) == render(second, "markdown", redact=True)


def test_no_wall_clock_in_reports(small: Incident) -> None:
    for fmt in FORMATS:
        out = render(small, fmt)
        assert "2025-10-23" not in out or fmt == "json"  # only the log's own times, never today's
        for year in ("2026", "2027"):
            assert year not in out


# ---------------------------------------------------------------------------------------------
# terminal


def test_text_report_sections(small: Incident) -> None:
    out = render(small, "text")
    for part in ("straggler_hang", "Culprit: rank 3", "Key evidence", "Timeline around the failure", "Ranks"):
        assert part in out
    assert "What to do" in out and "Coverage" in out
    assert "\x1b" not in out  # plain unless asked for colour


def test_text_color_is_opt_in(small: Incident) -> None:
    assert "\x1b[" in render_text(small, color=True)
    assert "\x1b[" not in render_text(small, color=False)


def test_text_hostile_is_inert(hostile: Incident) -> None:
    for color in (False, True):
        out = render_text(hostile, color=color)
        stripped = re.sub(r"\x1b\[[0-9;]*m", "", out) if color else out  # our own SGR styling only
        assert not RAW_CONTROL.search(stripped), repr(RAW_CONTROL.search(stripped))
        assert "\x1b]" not in out  # no OSC (title, hyperlink) from the log
        assert "[bold red]markup[/bold red]" in stripped  # rich markup shown literally
        assert ":smile:" in stripped and "😄" not in stripped  # no emoji substitution
        assert "\\x1b[31mred" in stripped  # the escape is shown, visibly


def test_text_large_job_fits_one_screen(large: Incident) -> None:
    out = render(large, "text")
    lines = out.splitlines()
    assert len(lines) <= 70, len(lines)
    assert "517 ◀" in out
    assert "1023 ranks" in out
    assert max(len(line) for line in lines) <= 100


def test_text_narrow_terminal(small: Incident) -> None:
    out = render_text(small, width=60)
    assert max(len(line) for line in out.splitlines()) <= 60


# ---------------------------------------------------------------------------------------------
# markdown


def _md_tokens(text: str) -> list[Any]:
    md = MarkdownIt("commonmark").enable("table")
    tokens = md.parse(text)
    flat = []
    for t in tokens:
        flat.append(t)
        flat.extend(t.children or [])
    return flat


def test_markdown_sections(small: Incident) -> None:
    out = render(small, "markdown")
    assert out.startswith("### nccllog: ")
    for part in (
        "**Culprit:** rank 3",
        "#### Evidence",
        "#### Timeline",
        "#### Ranks",
        "#### Environment seen",
    ):
        assert part in out
    assert "`NCCL_SOCKET_IFNAME=eth0`" in out and "nccl 2.20.5" in out


def test_markdown_hostile_cannot_break_out(hostile: Incident) -> None:
    out = render(hostile, "markdown")
    tokens = _md_tokens(out)
    blocks = [t.content.strip() for t in tokens if t.type == "html_block"]
    assert all(
        b in ("<details><summary>Other explanations considered</summary>", "</details>") for b in blocks
    ), blocks
    html_inline = [t.content for t in tokens if t.type == "html_inline"]
    assert all(c in ("<sub>", "</sub>") for c in html_inline), html_inline
    assert not any(t.type == "link_open" for t in tokens)
    assert not any(t.type == "image" for t in tokens)
    # headings are ours only
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert all(
        h.startswith(("nccllog:", "Evidence", "Timeline", "Ranks", "Environment", "What to do"))
        for h in headings
    )
    # each evidence line sits whole inside one fenced block
    fences = [t for t in tokens if t.type == "fence"]
    assert len(fences) == 2
    for f in fences:
        assert "<script>alert(1)</script>" in f.content and f.content.count("\n") == 1
    # rendered by a markdown engine, the log text stays text
    html = MarkdownIt("commonmark").enable("table").render(out).lower()
    assert "<script" not in html and "<img" not in html and "<a " not in html
    assert not RAW_CONTROL.search(out)


def test_markdown_fence_longer_than_any_backtick_run() -> None:
    body = ["a ``` b", "````` c"]
    f = fence(body)
    assert f.startswith("``````text\n") and f.endswith("\n``````")
    assert code("x ` y") == "``x ` y``"
    assert code("`edge`") == "`` `edge` ``"
    assert code("a|b") == "`a\\|b`"


def test_markdown_escape() -> None:
    assert esc("<b>x</b>") == "&lt;b>x&lt;/b>"
    assert esc("*a* _b_ [c](d) `e`") == "\\*a\\* \\_b\\_ \\[c\\](d) \\`e\\`"
    assert esc("# h", line_start=True) == "\\# h" and esc("- l", line_start=True) == "\\- l"
    assert esc("1. n", line_start=True) == "1\\. n" and esc("2.20.5") == "2.20.5"
    assert esc("@alice") == "@\u200dalice"
    assert esc("snake_case_name") == "snake_case_name"


def test_markdown_short_for_1000_ranks(large: Incident) -> None:
    out = render(large, "markdown")
    assert len(out.splitlines()) <= 80, len(out.splitlines())
    assert len(out.encode()) <= 6000, len(out.encode())
    assert "**517** ◀" in out and "1023 ranks: 0-516, 518-1023" in out


# ---------------------------------------------------------------------------------------------
# HTML


def test_html_self_contained(small: Incident) -> None:
    out = render(small, "html")
    assert out.startswith("<!DOCTYPE html>")
    low = out.lower()
    assert "<script" not in low and "<link" not in low and "<iframe" not in low and "<img" not in low
    assert "@import" not in low and "url(" not in low
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", low)
    assert "content-security-policy" in low and "default-src 'none'" in out
    assert "<svg" in out and "Collective alignment" in out and "<details" in out


def test_html_hostile_is_escaped(hostile: Incident) -> None:
    out = render(hostile, "html")
    low = out.lower()
    assert "<script" not in low
    assert "<img" not in low
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out
    assert "&#34;&gt;&lt;img src=x onerror=alert(2)&gt;" in out
    assert "{{ 7*7 }}" in out and "{% if 1 %}" in out and ">49<" not in out
    assert "\\x1b[31mred" in out and "\x1b" not in out and "\u202e" not in out
    assert not RAW_CONTROL.search(out)


def test_html_evidence_links_to_excerpt(small: Incident) -> None:
    out = render(small, "html")
    anchor = view.anchor_id("logs/node-a00.cluster.local/rank3.log", 480)
    assert f'href="#{anchor}"' in out
    assert f'id="{anchor}"' in out


def test_html_collective_grid_marks_odd_rank(small: Incident) -> None:
    out = render(small, "html")
    grid = out[out.index('id="collectives"') :]
    assert 'class="odd"' in grid
    row = grid[grid.index("rank 3 ◀") :]
    assert "c-silent" in row[: row.index("</tr>")]


def test_html_large_job_collapses(large: Incident) -> None:
    out = render(large, "html")
    assert len(out.encode()) < 1_500_000
    start = out.index('aria-label="Timeline')
    svg = out[start : out.index("</svg>", start)]
    assert svg.count("<g") <= 40  # lanes
    assert "rank 517" in svg and "1023 ranks" in svg
    assert "All 1024 ranks" in out


# ---------------------------------------------------------------------------------------------
# JSON

CONTRACT_V1 = {"schema_version", "verdict", "hypotheses", "ranks", "findings", "coverage"}


def test_json_contract_and_extensions(small: Incident) -> None:
    doc = json.loads(render(small, "json"))
    assert set(doc) >= CONTRACT_V1
    assert doc["schema_version"] == 1
    assert set(doc["verdict"]) >= {"category", "culprit_ranks", "culprit_hosts", "confidence", "summary"}
    assert set(doc["ranks"]) >= {"world_size", "seen", "missing"}
    assert set(doc["coverage"]) >= {"files", "lines", "matched", "unattributed", "skipped"}
    for key in ("timeline", "collectives", "per_rank", "environment", "advice", "host_offsets", "inputs"):
        assert key in doc
    assert doc["per_rank"][3]["status"] == "silent"
    assert doc["collectives"][-1]["silent"] == [3]
    assert doc["environment"]["versions"] == {"nccl": ["2.20.5"], "torch": ["2.4.1"]}


def test_json_documented() -> None:
    """Every key the JSON renderer writes appears in docs/json.md."""
    doc_text = (Path(__file__).resolve().parent.parent / "docs" / "json.md").read_text(encoding="utf-8")
    data = json.loads(render(straggler(4, culprit=1), "json"))
    keys: set[str] = set()

    def walk(obj: object, parent: str = "") -> None:
        if isinstance(obj, dict):
            for k, v in obj.items():
                if parent in ("fields", "ops", "numel", "elapsed_ms", "host_offsets", "settings", "versions"):
                    continue
                keys.add(k)
                walk(v, k)
        elif isinstance(obj, list):
            for x in obj:
                walk(x, parent)

    walk(data)
    missing = sorted(k for k in keys if f"`{k}`" not in doc_text)
    assert not missing, f"undocumented JSON keys: {missing}"


def test_json_hostile_is_terminal_safe(hostile: Incident) -> None:
    out = render(hostile, "json")
    assert not RAW_CONTROL.search(out)
    doc = json.loads(out)
    assert HOSTILE in doc["verdict"]["summary"]  # the data itself is unchanged


# ---------------------------------------------------------------------------------------------
# views


def test_rank_ranges() -> None:
    assert view.rank_ranges([5, 0, 1, 2, 7, 8]) == "0-2, 5, 7-8"
    assert view.rank_ranges([]) == ""
    assert view.rank_ranges(range(0, 20, 2), limit=3) == "0, 2, 4, …"
    assert view.rank_ranges([3, 4, 9], limit=1) == "3-4, …"


def test_clean() -> None:
    assert view.clean("a\x1b[31mb\tc\x9b\u202e") == "a\\x1b[31mb    c\\x9b\\u202e"
    assert view.clean("x" * 50, 10) == "x" * 10 + "… [+40 chars]"
    assert view.clean(None) == ""


def test_rank_rows_fold_large_jobs(large: Incident) -> None:
    rows, folded = view.rank_rows(large, 10)
    assert [r.ranks for r in rows if not r.group] == [(517,)]
    assert rows[0].culprit
    groups = [r for r in rows if r.group]
    assert len(groups) == 1 and len(groups[0].ranks) == 1023
    assert folded == 1023


def test_rank_rows_list_outliers() -> None:
    inc = straggler(256, culprit=100)
    ranks = list(inc.ranks)
    ranks[7] = type(ranks[7])(rank=7, host="x", status="OOM")
    ranks[200] = type(ranks[200])(rank=200, host="y", status="exited -6")
    import dataclasses

    inc = dataclasses.replace(inc, ranks=tuple(ranks))
    rows, _ = view.rank_rows(inc, 10)
    singles = [r.ranks[0] for r in rows if not r.group]
    assert singles == [7, 100, 200]
    assert sum(len(r.ranks) for r in rows) == 256


def test_timeline_folds_repeats(large: Incident) -> None:
    rows, before, after = view.timeline_window(large, before=4, after=7)
    assert [len(r.entries) for r in rows] == [1024, 1, 1023]
    assert rows[-1].anchor and before == 0 and after == 0


def test_collective_grid_folds_and_marks(large: Incident) -> None:
    (grid,) = view.collective_grids(large)
    assert len(grid.rows) == 2
    odd = [r for r in grid.rows if r.odd]
    assert [r.ranks for r in odd] == [(517,)]
    assert odd[0].cells[-1] == view.SILENT


def test_render_rejects_unknown_format(small: Incident) -> None:
    with pytest.raises(ValueError, match="unknown format"):
        render(small, "pdf")


def test_generated_1024_rank_log_tree(tmp_path: Path) -> None:
    """The real pipeline on a generated 1024-rank torchrun log tree: every format renders, twice
    the same, folded to one screen / a short markdown, and redaction leaves no host name."""
    from synth import write_log_tree

    logs = write_log_tree(tmp_path, world=1024, per_host=8, culprit=517)
    with chdir(tmp_path):
        incident = nccllog.analyze(logs.name)
    outs = {fmt: render(incident, fmt) for fmt in FORMATS}
    for fmt in FORMATS:
        assert render(incident, fmt) == outs[fmt]
    assert len(outs["text"].splitlines()) <= 70
    assert len(outs["markdown"].splitlines()) <= 80
    assert len(outs["html"].encode()) < 1_500_000
    assert str(tmp_path) not in outs["html"]
    red = {fmt: render(incident, fmt, redact=True) for fmt in FORMATS}
    for fmt, text in red.items():
        assert not re.search(r"gpu-\d{3}", text), fmt
        assert not re.search(r"\b10\.0\.\d+\.\d+\b", text), fmt
