"""The HTML report in a real headless Chromium (Debian's `chromium`; .ci/run installs it): the page
loads offline with no console message at all (no script, no blocked load, no CSP violation), log
text shows as text, and a screenshot is produced for a small and a 1024-rank incident.

Set NCCLLOG_SCREENSHOT_DIR to keep the screenshots (and the HTML) for a look."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from headless import ABSENT, CHROMIUM, chromium, console
from synth import straggler

import nccllog
from nccllog.render import render

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=ABSENT)


def _keep(*files: Path) -> None:
    target = os.environ.get("NCCLLOG_SCREENSHOT_DIR")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        for f in files:
            shutil.copy(f, Path(target) / f.name)


def test_console_scan_catches_errors(tmp_path: Path) -> None:
    """Control: a page that logs a console error and throws is caught by the scan."""
    page = tmp_path / "bad.html"
    page.write_text(
        "<!DOCTYPE html><p>x</p><script>console.error('boom'); nope();</script>", encoding="utf-8"
    )
    res = chromium(tmp_path, page.as_uri(), "--dump-dom")
    lines = console(res.stderr)
    assert any("boom" in line for line in lines), res.stderr[-2000:]
    assert any("Uncaught" in line for line in lines)


def _check_page(tmp_path: Path, name: str, html: str, must_show: list[str]) -> Path:
    page = tmp_path / f"{name}.html"
    page.write_text(html, encoding="utf-8")
    res = chromium(tmp_path, page.as_uri(), "--dump-dom")
    assert res.returncode == 0, res.stderr[-2000:]
    assert not console(res.stderr), console(res.stderr)
    dom = res.stdout
    assert "<script" not in dom.lower()
    for text in must_show:
        assert text in dom, text
    shot = tmp_path / f"{name}.png"
    res = chromium(tmp_path, page.as_uri(), f"--screenshot={shot}", "--window-size=1400,2000")
    assert res.returncode == 0, res.stderr[-2000:]
    assert not console(res.stderr), console(res.stderr)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    _keep(page, shot)
    return shot


def test_small_hostile_incident(tmp_path: Path) -> None:
    html = render(straggler(8, culprit=3, hostile=True), "html")
    _check_page(
        tmp_path,
        "report-8-ranks",
        html,
        [
            "rank 3 on host node-a00.cluster.local",
            "&lt;script&gt;alert(1)&lt;/script&gt;",  # shown as text
            "{{ 7*7 }}",
            "[bold red]markup[/bold red]",
            "Collective alignment",
        ],
    )


def test_1024_rank_incident(tmp_path: Path) -> None:
    html = render(straggler(1024, culprit=517), "html")
    _check_page(tmp_path, "report-1024-ranks", html, ["rank 517 on host", "1023 ranks", "All 1024 ranks"])


def test_redacted_fixture_report(tmp_path: Path) -> None:
    folder = FIXTURES / "net-ib-err12-one-bad-host"
    if not folder.is_dir():
        pytest.skip("fixture not present")
    incident = nccllog.analyze(folder / "logs")
    _check_page(tmp_path, "report-fixture-redacted", render(incident, "html", redact=True), ["host-"])
