"""The command line through click's runner: exit codes, one-line errors, every output format,
paste mode on shuffled multi-rank blobs, redaction, colour and progress-bar rules."""

from __future__ import annotations

import io
import json
import random
import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import nccllog.cli as cli
from nccllog.cli import main, unquote_paste
from nccllog.cli_inspect import PROGRESS_MIN_BYTES

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
OOM = FIXTURES / "crash-oom-rank5-cascade"
ANSI = re.compile(r"\x1b\[")

pytestmark = pytest.mark.skipif(
    not (OOM / "logs").is_dir(), reason="fixture crash-oom-rank5-cascade not present"
)


def run(args: list[str], input: bytes | str | None = None, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, args, input=input, env=env, catch_exceptions=True)


def _oom_logs() -> str:
    return str(OOM / "logs")


def _shuffled(folder: Path, seed: int = 7) -> bytes:
    lines: list[bytes] = []
    for f in sorted(p for p in (folder / "logs").rglob("*") if p.is_file()):
        lines.extend(f.read_bytes().splitlines())
    random.Random(seed).shuffle(lines)
    return b"\n".join(lines) + b"\n"


# ---------------------------------------------------------------------------------------------
# analyze


def test_analyze_text_default_is_plain_when_piped() -> None:
    r = run(["analyze", _oom_logs()])
    assert r.exit_code == 0, r.output
    assert "oom" in r.stdout and "Culprit: rank 5" in r.stdout
    assert not ANSI.search(r.stdout)


def test_color_always_and_never() -> None:
    assert ANSI.search(run(["analyze", _oom_logs(), "--color", "always"]).stdout)
    assert not ANSI.search(run(["analyze", _oom_logs(), "--color", "never"]).stdout)


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_color_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert cli._color_wanted("auto", _Tty()) is True
    assert cli._color_wanted("auto", io.StringIO()) is False  # not a terminal
    monkeypatch.setenv("NO_COLOR", "1")
    assert cli._color_wanted("auto", _Tty()) is False
    assert cli._color_wanted("always", io.StringIO()) is True
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("TERM", "dumb")
    assert cli._color_wanted("auto", _Tty()) is False


@pytest.mark.parametrize(
    ("name", "marker"),
    [
        ("r.html", "<!DOCTYPE html>"),
        ("r.md", "### nccllog:"),
        ("r.json", '"schema_version": 1'),
        ("r.txt", "╭─"),
    ],
)
def test_output_format_from_extension(tmp_path: Path, name: str, marker: str) -> None:
    out = tmp_path / name
    r = run(["analyze", _oom_logs(), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert r.stdout == ""
    assert out.read_text(encoding="utf-8").startswith(marker) or marker in out.read_text(encoding="utf-8")
    assert f"wrote {cli._EXTENSIONS[out.suffix]} report to {out}" in r.stderr
    assert not list(tmp_path.glob("*.tmp"))


def test_unknown_extension_is_a_usage_error(tmp_path: Path) -> None:
    r = run(["analyze", _oom_logs(), "-o", str(tmp_path / "r.pdf")])
    assert r.exit_code == 2
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("nccllog: error: cannot tell the format")


def test_format_flag_wins_over_extension(tmp_path: Path) -> None:
    out = tmp_path / "r.txt"
    assert run(["analyze", _oom_logs(), "-f", "json", "-o", str(out)]).exit_code == 0
    assert json.loads(out.read_text(encoding="utf-8"))["verdict"]["category"] == "oom"


def test_fail_on(tmp_path: Path) -> None:
    assert run(["analyze", _oom_logs(), "--fail-on", "error", "-q"]).exit_code == 1
    assert run(["analyze", _oom_logs(), "--fail-on", "critical", "-q"]).exit_code in (0, 1)
    clean = tmp_path / "ok.log"
    clean.write_text("epoch 1 loss 0.5\nepoch 2 loss 0.4\n", encoding="utf-8")
    # Nothing recognised is no all-clear: the verdict is unknown, and a warning says what was read.
    r = run(["analyze", str(clean), "-f", "json"])
    assert r.exit_code == 0
    assert r.stderr.startswith("nccllog: warning: nothing recognised: read 1 file(s), 2 line(s)")
    data = json.loads(r.stdout)
    assert data["verdict"]["category"] == "unknown"
    assert any(n.startswith("nothing recognised") for n in data["coverage"]["notes"])
    # An input without a single line is nothing to analyse: exit 2.
    empty = tmp_path / "empty.log"
    empty.write_text("", encoding="utf-8")
    assert run(["analyze", str(empty)]).exit_code == 2


def test_missing_input_is_one_line_exit_2(tmp_path: Path) -> None:
    r = run(["analyze", str(tmp_path / "nope")])
    assert r.exit_code == 2
    assert r.stderr.startswith("nccllog: error: nothing to analyse")
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_traceback_flag_shows_the_exception(tmp_path: Path) -> None:
    r = run(["analyze", str(tmp_path / "nope"), "--traceback"])
    assert isinstance(r.exception, nccllog_input_error())


def nccllog_input_error() -> type:
    from nccllog.pipeline import InputError

    return InputError


def test_internal_error_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_a: object, **_k: object) -> str:
        raise RuntimeError("renderer exploded\nsecond line")

    monkeypatch.setattr(cli, "render", boom)
    r = run(["analyze", _oom_logs()])
    assert r.exit_code == 2
    assert r.stderr == (
        "nccllog: error: internal error: RuntimeError: renderer exploded (run again with --traceback to see where)\n"
    )


def test_usage_error_exit_2() -> None:
    assert run(["analyze"]).exit_code == 2
    assert run(["analyze", _oom_logs(), "--format", "pdf"]).exit_code == 2


def test_analyze_stdin_dash() -> None:
    data = (OOM / "logs" / "sft_llama31_8b_run3.log").read_bytes()
    r = run(["analyze", "-", "-f", "json"], input=data)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["verdict"]["category"] == "oom" and doc["verdict"]["culprit_ranks"] == [5]
    assert doc["inputs"] == ["-"] and doc["redacted"] is False


def test_cli_output_is_deterministic(tmp_path: Path) -> None:
    for fmt in ("text", "markdown", "html", "json"):
        a = run(["analyze", _oom_logs(), "-f", fmt]).stdout
        b = run(["analyze", _oom_logs(), "-f", fmt]).stdout
        assert a == b, fmt


# ---------------------------------------------------------------------------------------------
# paste mode and redaction

PASTE_CASES = [
    ("crash-oom-rank5-cascade", "oom", [5]),
    ("ts-accelerate-epoch-end-broadcast-vs-allreduce", "collective_mismatch", [7]),
    ("ts-torchtune-gemma-epoch-end-rank0-silent", "straggler_hang", [0]),
    ("ts-trl-asyncgrpo-rank0-enqueue-skew", "collective_mismatch", [0]),
]


@pytest.mark.parametrize(("name", "category", "culprits"), PASTE_CASES, ids=[c[0] for c in PASTE_CASES])
def test_paste_shuffled_blob(name: str, category: str, culprits: list[int]) -> None:
    folder = FIXTURES / name
    if not folder.is_dir():
        pytest.skip(f"fixture {name} not present")
    blob = _shuffled(folder)
    r = run(["paste", "-f", "json"], input=blob)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["verdict"]["category"] == category, doc["verdict"]["summary"]
    assert doc["verdict"]["culprit_ranks"] == culprits
    assert doc["redacted"] is True
    md = run(["paste"], input=blob)
    assert md.exit_code == 0 and md.stdout.startswith("### nccllog: ")


def test_paste_is_markdown_and_redacted_by_default() -> None:
    folder = FIXTURES / "net-ib-err12-one-bad-host"
    if not folder.is_dir():
        pytest.skip("fixture not present")
    blob = _shuffled(folder)
    plain = run(["paste", "--no-redact", "-f", "json"], input=blob)
    hosts = {f["host"] for f in json.loads(plain.stdout)["findings"] if f["host"]}
    assert hosts, "the fixture names hosts"
    red = run(["paste"], input=blob)
    assert red.exit_code == 0
    assert red.stdout.startswith("### nccllog: ")
    for h in hosts:
        assert h not in red.stdout
    assert "redacted" in red.stdout


def test_paste_accepts_quoted_text() -> None:
    blob = b"".join(b"> " + line + b"\n" for line in _shuffled(OOM).splitlines())
    r = run(["paste", "-f", "json"], input=blob)
    assert json.loads(r.stdout)["verdict"]["culprit_ranks"] == [5]
    assert unquote_paste(b"> a\n>b\n\nc\n> d\n") == b"a\nb\n\nc\nd\n"
    assert unquote_paste(b"a > b\nc\n") == b"a > b\nc\n"


def test_redact_map_and_quiet(tmp_path: Path) -> None:
    folder = FIXTURES / "net-ib-err12-one-bad-host"
    if not folder.is_dir():
        pytest.skip("fixture not present")
    amap = tmp_path / "aliases.json"
    r = run(["analyze", str(folder / "logs"), "--redact-map", str(amap), "-f", "markdown"])
    assert r.exit_code == 0
    aliases = json.loads(amap.read_text(encoding="utf-8"))
    assert any(k.startswith("host-") for k in aliases)
    for alias, original in aliases.items():
        assert original not in r.stdout, (alias, original)
    assert "keep it private" in r.stderr
    q = run(["analyze", str(folder / "logs"), "--redact", "-q", "-o", str(tmp_path / "r.html")])
    assert q.exit_code == 0 and q.stderr == ""


def test_hostile_log_through_the_cli(tmp_path: Path) -> None:
    log = tmp_path / "rank3.log"
    hostile = "[bold red]x[/bold red] \x1b]0;pwned\x07 \x1b[2J <script>alert(1)</script> {{ 7*7 }}"
    log.write_text(
        "[rank3]:[E1023 14:02:17.412903117 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) "
        f"ran for 600128 milliseconds before timing out. {hostile}\n",
        encoding="utf-8",
    )
    text = run(["analyze", str(log), "--color", "always"]).stdout
    assert "\x1b]" not in text and "\x1b[2J" not in text
    html = run(["analyze", str(log), "-f", "html"]).stdout
    assert "<script>" not in html and "{{ 7*7 }}" in html


# ---------------------------------------------------------------------------------------------
# progress bar


def test_progress_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli.sys, "stderr", io.StringIO())
    with cli._progress(True) as cb:
        assert cb is None
    monkeypatch.setattr(cli.sys, "stderr", _Tty())
    with cli._progress(False) as cb:
        assert cb is None  # --quiet
    with cli._progress(True) as cb:
        assert cb is not None
        cb(0, 10)  # small inputs: no bar
        cb(10, 10)


def test_progress_bar_draws_on_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    err = _Tty()
    monkeypatch.setattr(cli.sys, "stderr", err)
    with cli._progress(True) as cb:
        assert cb is not None
        total = PROGRESS_MIN_BYTES * 2
        cb(0, total)
        cb(total // 2, total)
        cb(total, total)
    assert "reading logs" in err.getvalue()


def test_analyze_reports_progress(tmp_path: Path) -> None:
    import nccllog

    seen: list[tuple[int, int]] = []
    nccllog.analyze(str(OOM / "logs"), progress=lambda done, total: seen.append((done, total)))
    assert seen[0][0] == 0 and seen[-1][0] == seen[-1][1] > 0


def test_lines_lists_one_ranks_lines_with_their_attribution() -> None:
    r = run(["lines", _oom_logs(), "--rank", "5", "--json"])
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    assert rows and all(row["rank"] == 5 for row in rows)
    assert any("CUDA out of memory" in row["text"] for row in rows)
    assert all(row["attribution"] for row in rows)
    assert run(["lines", "/no/such/dir"]).exit_code == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["analyze"], "Missing argument 'INPUTS...' (see 'nccllog analyze --help')"),
        (["analyze", "x", "--format", "pdf"], "Invalid value for '--format' / '-f': 'pdf' is not one of"),
        (["analyze", "x", "--bogus"], "No such option '--bogus'"),
        (["analyze", "x", "--width", "5"], "Invalid value for '--width'"),
        (["anlyze", "x"], "No such command 'anlyze'"),
        (["lines"], "Missing argument 'INPUTS...' (see 'nccllog lines --help')"),
        (["analyze", "x", "--bogus\x1b]0;t\x07"], "No such option '--bogus\\x1b]0;t\\x07'"),
    ],
)
def test_usage_errors_are_one_line(args: list[str], message: str) -> None:
    r = CliRunner().invoke(main, args, prog_name="nccllog")
    assert r.exit_code == 2
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("nccllog: error: " + message), r.stderr
    assert "Usage:" not in r.stderr and "\x1b" not in r.stderr and r.stdout == ""


def test_help_and_version_still_work() -> None:
    assert run(["--version"]).exit_code == 0
    helped = CliRunner().invoke(main, ["analyze", "--help"], prog_name="nccllog")
    assert helped.exit_code == 0 and helped.stdout.startswith("Usage: nccllog analyze")
    bare = run([])
    assert "Commands:" in bare.output and "error" not in bare.output
