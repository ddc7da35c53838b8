"""The post-mortem example in examples/ runs as documented and says what the README says it does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "examples" / "postmortem.py"
FOLDER = ROOT / "fixtures" / "crash-oom-rank5-cascade" / "logs"


@pytest.mark.skipif(not FOLDER.is_dir(), reason="fixture crash-oom-rank5-cascade not present")
def test_postmortem_example(tmp_path: Path) -> None:
    html = tmp_path / "report.html"
    res = subprocess.run(
        [sys.executable, str(SCRIPT), str(FOLDER), str(html)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "verdict:    oom (high confidence)" in out
    assert "culprit:    ranks [5]" in out
    assert "errors per rank:" in out and "last time heard of" in out
    assert "matched lines of ranks [5]:" in out and "cuda.cuda_oom" in out
    page = html.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "redacted" in page


def test_postmortem_usage_message() -> None:
    res = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120, check=False
    )
    assert res.returncode == 1
    assert "postmortem.py" in res.stderr
