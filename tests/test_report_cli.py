"""Small things a user notices: explain takes categories, patterns filters and prints JSON, lines
shows the reason and has -f json and --redact, the verdict on stderr with -o, progress phases,
sizes like 8G, FORCE_COLOR, KiB."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import nccllog.cli as cli
from nccllog.cli import main
from nccllog.cli_inspect import ByteSize, size_label
from nccllog.model import CATEGORIES
from tests.report_lines import mismatch_job


def run(args: list[str], input: str | None = None, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, args, input=input, env=env)


def test_explain_every_category() -> None:
    for cat in CATEGORIES:
        r = run(["explain", cat])
        assert r.exit_code == 0, (cat, r.output)
        assert r.stdout.startswith(f"{cat}: ") and "\nMeaning\n" in r.stdout


def test_explain_suggests_close_names() -> None:
    r = run(["explain", "straggler"])
    assert r.exit_code == 2
    assert (
        r.stderr
        == "nccllog: error: no pattern, category or setting named 'straggler' (did you mean: straggler_hang)\n"
    )


def test_patterns_filters_and_json() -> None:
    r = run(["patterns", "--signal", "collective_timeout", "-f", "json"])
    doc = json.loads(r.stdout)
    assert doc and all(p["signal"] == "collective_timeout" for p in doc)
    r = run(["patterns", "--producer", "pytorch", "--severity", "critical"])
    assert r.exit_code == 0
    assert all(line.split()[1] == "critical" for line in r.stdout.splitlines())


def test_lines_reason_column_json_and_redact(tmp_path: Path) -> None:
    log = tmp_path / "node-secret-42_rank3.log"
    log.write_text("[rank3]:[E1014 11:47:00.100000000 socket.cpp:1]  connect to 10.9.8.7:29500 failed\n")
    r = run(["lines", str(log)])
    cols = r.stdout.splitlines()[0].split("\t")
    assert cols[1] == "rank 3" and cols[3].startswith("prefix [rank3]")
    r = run(["lines", str(log), "-f", "json"])
    assert json.loads(r.stdout.splitlines()[0])["rank"] == 3
    r = run(["lines", str(log), "--redact"])
    assert "10.9.8.7" not in r.stdout and "ip-1" in r.stdout


def test_verdict_on_stderr_when_the_report_goes_to_a_file(tmp_path: Path) -> None:
    r = run(["analyze", "-", "-o", str(tmp_path / "r.md")], input=mismatch_job())
    assert r.exit_code == 0
    assert r.stderr.splitlines()[0] == "nccllog: collective_mismatch: rank 7 (confidence high)"
    assert r.stderr.splitlines()[1].endswith(" KiB)")


def test_sizes_accept_units() -> None:
    size = ByteSize()
    assert [size.convert(x, None, None) for x in ("8G", "512M", "100k", "1.5GiB", "42")] == [
        8 * 1024**3,
        512 * 1024**2,
        100 * 1024,
        int(1.5 * 1024**3),
        42,
    ]
    assert run(["analyze", "-", "--max-decompressed", "512M"], input=mismatch_job()).exit_code == 0
    assert size_label(1536) == "1.5 KiB" and size_label(12) == "12 B"


def test_md_is_short_for_markdown() -> None:
    r = run(["analyze", "-", "-f", "md"], input=mismatch_job())
    assert r.stdout.startswith("### nccllog:")


def test_force_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert cli._color_wanted("auto", io.StringIO()) is True
    monkeypatch.setenv("NO_COLOR", "1")
    assert cli._color_wanted("auto", io.StringIO()) is False


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_phases_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    import nccllog

    monkeypatch.setattr(cli.sys, "stderr", io.StringIO())
    with cli._phases(True) as phase:
        assert phase is None
    err = _Tty()
    monkeypatch.setattr(cli.sys, "stderr", err)
    seen: list[str] = []
    with cli._phases(True) as phase:
        assert phase is not None
        nccllog.analyze_text(mismatch_job(), phase=lambda name: (seen.append(name), phase(name)))
    assert seen == ["reading", "matching", "correlating"]
    assert "nccllog: correlating…" in err.getvalue() and err.getvalue().endswith("\r\x1b[K")


def test_a_note_erases_the_phase_line_first(monkeypatch: pytest.MonkeyPatch) -> None:
    err = _Tty()
    monkeypatch.setattr(cli.sys, "stderr", err)
    with cli._phases(True) as phase:
        assert phase is not None
        phase("matching")
        cli._err("nccllog: warning: x")
    assert "nccllog: matching…\r\x1b[K" in err.getvalue()
