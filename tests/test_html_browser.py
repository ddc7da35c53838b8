"""The on-call HTML report in a real headless Chromium at 8, 512 and 4,096 ranks: the page renders
(a screenshot with content, light and dark), loads nothing and runs nothing, and its size stays
bounded however many ranks the job had. Skipped where /usr/bin/chromium is absent.

Set NCCLLOG_SCREENSHOT_DIR to keep the pages and screenshots for a look; the sizes and times are
printed (``pytest -s``)."""

from __future__ import annotations

import os
import re
import shutil
import struct
import time
import zlib
from pathlib import Path

import pytest
from headless import ABSENT, CHROMIUM, chromium, console
from html_synth import job

from nccllog.render import render

EXTERNAL = re.compile(
    r"""(?:src|href|xlink:href)\s*=\s*["']?\s*(?:https?:|//|ftp:|file:)|url\(|@import""", re.I
)
MAX_BYTES = 400_000  # the page of a 4,096-rank job is about 100 KB

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=ABSENT)


def _shoot(tmp: Path, page: Path, png: Path, *extra: str) -> tuple[float, str]:
    start = time.perf_counter()
    res = chromium(tmp, page.as_uri(), "--window-size=1400,2400", f"--screenshot={png}", *extra)
    assert res.returncode == 0, res.stderr[-2000:]
    return time.perf_counter() - start, res.stderr


def _pixels(png: Path) -> bytes:
    """The decompressed image data of a PNG (filtered rows: enough to tell blank from drawn)."""
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        if kind == b"IDAT":
            idat += data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    return zlib.decompress(idat)


@pytest.mark.parametrize("world", [8, 512, 4096])
def test_report_renders_in_chromium(tmp_path: Path, world: int) -> None:
    incident = job(world)
    start = time.perf_counter()
    html = render(incident, "html")
    render_s = time.perf_counter() - start
    size = len(html.encode())
    assert size < MAX_BYTES, size
    assert "<script" not in html.lower() and not EXTERNAL.search(html)
    page = tmp_path / f"report-{world}-ranks.html"
    page.write_text(html, encoding="utf-8")
    shots = {}
    for mode, extra in (("light", ()), ("dark", ("--force-dark-mode",))):
        png = tmp_path / f"report-{world}-ranks-{mode}.png"
        load_s, stderr = _shoot(tmp_path, page, png, *extra)
        assert not console(stderr)
        pixels = _pixels(png)
        assert png.stat().st_size > 20_000 and len(set(pixels)) > 64  # drawn, not blank
        shots[mode] = pixels
        print(
            f"{world} ranks: {size:,} bytes, rendered in {render_s:.2f} s, {mode} screenshot in {load_s:.2f} s"
        )
    assert shots["light"] != shots["dark"]  # prefers-color-scheme: dark restyles the page
    target = os.environ.get("NCCLLOG_SCREENSHOT_DIR")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        for f in tmp_path.glob("report-*"):
            shutil.copy(f, Path(target) / f.name)


def test_evidence_link_opens_its_excerpt(tmp_path: Path) -> None:
    """Following a link to a raw line inside a closed excerpt opens it (the line is the :target)."""
    html = render(job(8), "html")
    closed = re.search(r'<details class="excerpt-box">.*?id="(l-[a-z0-9-]+)"', html, re.S)
    assert closed is not None
    page = tmp_path / "report.html"
    page.write_text(html, encoding="utf-8")
    url = f"{page.as_uri()}#{closed.group(1)}"
    dom = chromium(tmp_path, url, "--dump-dom").stdout
    at = dom.index(f'id="{closed.group(1)}"')
    assert dom[dom.rindex("<details", 0, at) :].startswith('<details class="excerpt-box" open')
