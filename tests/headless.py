"""Debian's headless Chromium for the browser tests (.ci/run installs it): one way to run it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
CONSOLE = re.compile(r":CONSOLE[:(]")
ABSENT = "/usr/bin/chromium is absent (apt-get install chromium; .ci/run installs it)"


def chromium(tmp: Path, url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """Load ``url`` in a fresh headless profile under ``tmp`` (offline: no sync, no updates)."""
    profile = tmp / "profile"
    profile.mkdir(exist_ok=True)
    cmd = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        *extra,
        url,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)


def console(stderr: str) -> list[str]:
    """The page's console messages in Chromium's log (there should be none)."""
    return [line for line in stderr.splitlines() if CONSOLE.search(line)]
