"""A hostile corpus for every way out of nccllog: file names and log lines that carry OSC 52
(clipboard write), CSI 2J (clear screen), OSC 0 (window title), BEL, C1 CSI, bidi overrides
(``rank9\\u202egol.exe``) and web addresses (``https://``, ``www.``) go through ``analyze`` (text
with and without colour, markdown, HTML, JSON), ``paste``, ``lines`` and the exit-2 error line;
none of the raw sequences reaches the output, and markdown prose links nothing. Then the library's
one exception type and its input rules (bytes, a one-line paste, one ``patterns`` path)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

import nccllog
from nccllog.cli import main
from nccllog.text_safety import UNSAFE_CHARS, clean, defang, one_line

OSC52 = "\x1b]52;c;ZXZpbA==\x07"
CSI_2J = "\x1b[2J"
OSC0 = "\x1b]0;pwned\x07"
RLO = "\u202e"
HOSTILE = (OSC52, CSI_2J, OSC0, "\x07", "\x9b31m", RLO, "\u2066", "\x1b")
WATCHDOG = (
    "[rank{rank}]:[E1023 14:02:17.412903117 ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, "
    "Timeout(ms)=600000) ran for 600128 milliseconds before timing out.{tail}"
)
NAMES = (f"rank0-{OSC52}.log", f"rank1-{CSI_2J}.log", f"rank2-{OSC0}.log", f"rank9{RLO}gol.exe")
TAILS = (
    f" {OSC52} see https://evil.example/a",
    f" {CSI_2J} www.evil.example",
    f" {OSC0}\x07 {RLO}gol.exe",
    " \x9b31m\u2066x",
)
# Any character a terminal or a reader's eye would act on; the newline is the only one allowed.
RAW = re.compile(f"(?!\n)[{UNSAFE_CHARS}]")
SGR = re.compile(r"\x1b\[[0-9;]*m")
# What GitHub's markdown turns into a link by itself, in text after escapes are resolved.
AUTOLINK = re.compile(r"(?i)(?:https?|ftp)://|www\.")


def _tree(root: Path) -> Path:
    logs = root / "logs"
    logs.mkdir()
    for rank, (name, tail) in enumerate(zip(NAMES, TAILS, strict=True)):
        (logs / name).write_text(
            WATCHDOG.format(rank=rank, tail=tail)
            + f"\n[rank{rank}]:NCCL WARN https://evil.example/warn www.evil.example {OSC52}\n",
            encoding="utf-8",
        )
    (logs / "pdsh.log").write_text("www.evil.example: " + WATCHDOG.format(rank=3, tail=f" {RLO}x") + "\n")
    (logs / f"www.evil.example{CSI_2J}.bin").write_bytes(b"\x00\x01\x02core\x00\x00")
    return logs


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _tree(tmp_path_factory.mktemp("escapes"))


def cli(*args: str, stdin: bytes | None = None) -> Result:
    return CliRunner().invoke(main, list(args), input=stdin, catch_exceptions=False)


def assert_inert(out: str, color: bool = False, tabs: bool = False) -> None:
    """No raw control, escape or bidi character (rich's own colours aside when ``color``, the
    column-separating tabs of ``lines`` when ``tabs``)."""
    shown = SGR.sub("", out) if color else out
    shown = shown.replace("\t", " ") if tabs else shown
    found = RAW.findall(shown)
    assert not found, f"raw characters reach the output: {sorted(set(found))!r}"


def prose_text(markdown: str) -> str:
    """The markdown's prose as a renderer sees it (escapes resolved), without code and fences."""
    md = MarkdownIt("commonmark").enable("table")
    parts = []
    for token in md.parse(markdown):
        for child in token.children or []:
            if child.type == "text":
                parts.append(child.content)
    return "\n".join(parts)


# ---------------------------------------------------------------------------------------------
# every format of analyze


@pytest.mark.parametrize("fmt", ["text", "markdown", "html", "json"])
def test_analyze_output_is_inert(logs: Path, fmt: str) -> None:
    r = cli("analyze", str(logs), "-f", fmt, "-q", "https://evil.example/missing")
    assert r.exit_code == 0, r.stderr
    assert_inert(r.stdout)
    assert_inert(r.stderr)
    if fmt != "json":  # the hostile names and lines are there, visibly escaped
        assert "\\x1b" in r.stdout and "\\u202e" in r.stdout
    if fmt == "json":  # the data is unchanged; only its writing is escaped
        data = json.loads(r.stdout)
        sources = {e["source"] for e in data["findings"]}
        assert any(RLO in s for s in sources) and any(OSC52 in s for s in sources)


def test_coloured_terminal_report_keeps_only_its_own_colours(logs: Path) -> None:
    r = cli("analyze", str(logs), "--color", "always", "-q")
    assert r.exit_code == 0
    assert SGR.search(r.stdout)
    assert_inert(r.stdout, color=True)
    assert "\x1b]" not in r.stdout and CSI_2J not in r.stdout


def test_markdown_prose_links_nothing(logs: Path) -> None:
    r = cli("analyze", str(logs), "-f", "markdown", "-q", "https://evil.example/missing")
    prose = prose_text(r.stdout)
    assert "evil.example" in prose  # the hostile text is in the prose, and inert
    assert not AUTOLINK.search(prose), AUTOLINK.findall(prose)
    assert "www[.]evil.example" in prose


def test_html_shows_bidi_and_escapes_visibly(logs: Path) -> None:
    out = nccllog.render(nccllog.analyze(str(logs)), "html")
    assert_inert(out)
    assert "rank9\\u202egol.exe" in out and RLO not in out
    assert "rank1-\\x1b[2J.log" in out


def test_library_render_of_every_format_is_inert(logs: Path) -> None:
    incident = nccllog.analyze([str(logs)])
    for fmt in nccllog.FORMATS:
        assert_inert(nccllog.render(incident, fmt))
    assert_inert(nccllog.render(incident, "text", color=True), color=True)


# ---------------------------------------------------------------------------------------------
# paste, lines, patterns


def test_paste_is_inert(logs: Path) -> None:
    blob = "".join(p.read_text(encoding="utf-8") for p in sorted(logs.glob("*.log")))
    blob += f"> quoted {OSC0} line https://evil.example/q\n"
    for redact in ("--redact", "--no-redact"):
        r = cli("paste", redact, stdin=blob.encode())
        assert r.exit_code == 0, r.stderr
        assert_inert(r.stdout)
        assert not AUTOLINK.search(prose_text(r.stdout))


@pytest.mark.parametrize("as_json", [False, True])
def test_lines_is_inert(logs: Path, as_json: bool) -> None:
    r = cli("lines", str(logs), *(["--json"] if as_json else []))
    assert r.exit_code == 0, r.stderr
    assert_inert(r.stdout, tabs=not as_json)
    assert ("\\u001b" if as_json else "\\x1b") in r.stdout and "\\u202e" in r.stdout
    if as_json:
        texts = [json.loads(line)["source"] for line in r.stdout.splitlines()]
        assert any(RLO in t for t in texts)


def test_user_pattern_text_is_inert(tmp_path: Path) -> None:
    pats = tmp_path / "pats"
    pats.mkdir()
    (pats / "evil.toml").write_text(
        "\n".join(
            [
                'id = "user.evil"',
                'title = "evil \\u001b]0;pwned\\u0007 title"',
                'producer = "user"',
                'family = "user"',
                'versions = "any"',
                'severity = "info"',
                'signal = "info"',
                'keywords = ["EVILMARK"]',
                "regex = 'EVILMARK'",
                'meaning = "clears \\u001b[2J the screen"',
                "[[examples]]",
                'line = "EVILMARK here"',
                "[[near_misses]]",
                'line = "nothing here"',
            ]
        ),
        encoding="utf-8",
    )
    listed = cli("patterns", "--patterns", str(pats))
    assert listed.exit_code == 0, listed.stderr
    assert "evil \\x1b]0;pwned\\x07 title" in listed.stdout
    assert_inert(listed.stdout)
    explained = cli("explain", "user.evil", "--patterns", str(pats))
    assert explained.exit_code == 0 and "\\x1b[2J" in explained.stdout
    assert_inert(explained.stdout)


# ---------------------------------------------------------------------------------------------
# the exit-2 line


def _refused(*args: str) -> str:
    r = cli(*args)
    assert r.exit_code == 2, r.stdout
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("nccllog: error: ")
    assert_inert(r.stderr)
    return r.stderr.rstrip("\n")


@pytest.mark.parametrize("name", [OSC52, CSI_2J, OSC0, f"rank9{RLO}gol.exe", "\x9b2J\x07"])
def test_error_line_escapes_the_file_name(tmp_path: Path, name: str) -> None:
    line = _refused("analyze", str(tmp_path / f"x{name}y.log"))
    assert line.endswith((": no such file or directory)", ": no file matches this pattern)"))
    assert clean(name) in line


def test_error_line_keeps_its_reason_when_the_name_is_long(tmp_path: Path) -> None:
    long = tmp_path / ("d" * 200) / ((OSC0 * 300) + ".log")
    line = _refused("analyze", str(long))
    assert line.endswith("\\x07.log: no such file or directory)") and "…" in line
    assert len(line) < 400
    binary = tmp_path / (("x" * 200) + OSC52 + ".log")
    binary.write_bytes(b"\x00\x01\x02\x00" * 8)
    line = _refused("analyze", str(binary))
    assert line.endswith(": binary file (not text))") and "\\x1b]52" in line


def test_many_skipped_inputs_are_counted_not_cut(tmp_path: Path) -> None:
    missing = [str(tmp_path / f"missing-{i}-{'q' * 90}.log") for i in range(9)]
    line = _refused("analyze", *missing)
    assert line.endswith("no such file or directory; and 4 more)")


def test_usage_error_echoes_argument_inert() -> None:
    line = _refused("explain", f"nccl.{OSC52}{RLO}")
    assert "no pattern, category or setting named" in line and "\\u202e" in line


# ---------------------------------------------------------------------------------------------
# the cleaner itself


@given(st.text())
def test_clean_leaves_nothing_raw_and_is_idempotent(text: str) -> None:
    once = clean(text)
    assert not RAW.search(once) and "\n" not in once
    assert clean(once) == once
    kept = clean(text, newlines=True)
    assert not RAW.search(kept) and kept.count("\n") == text.count("\n")


@given(st.text(alphabet=st.sampled_from(["h", "t", "p", "s", ":", "/", "w", ".", "_", "W", "x", " "])))
def test_defang_leaves_no_autolink(text: str) -> None:
    assert not AUTOLINK.search(defang(text))


def test_defang_form() -> None:
    assert defang("see https://a.example/x, WWW.b.example and tcp://h:1") == (
        "see https[:]//a.example/x, WWW[.]b.example and tcp[:]//h:1"
    )


def test_one_line_cuts_names_not_the_reason() -> None:
    msg = "nothing to analyse (" + "/very" * 200 + "/rank.log: permission denied)\nsecond line"
    out = one_line(msg)
    assert out.endswith("/rank.log: permission denied)") and "second" not in out and len(out) <= 300
    assert one_line(f"a {OSC52} b") == "a \\x1b]52;c;ZXZpbA==\\x07 b"


# ---------------------------------------------------------------------------------------------
# the library: one exception type, bytes, a one-line paste, one patterns path


def test_every_library_error_is_an_nccllog_error() -> None:
    from nccllog.match.library import LibraryError
    from nccllog.pipeline import InputError

    assert InputError is nccllog.InputError
    assert LibraryError is nccllog.PatternLibraryError
    for exc in (nccllog.InputError, nccllog.PatternLibraryError, nccllog.UsageError):
        assert issubclass(exc, nccllog.Error)
    assert issubclass(nccllog.UsageError, ValueError)  # what render raised before


def test_missing_path_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(nccllog.InputError, match="no such file or directory") as info:
        nccllog.analyze(str(tmp_path / f"gone{OSC0}"))
    assert info.value.skipped[0].reason == "no such file or directory"
    assert OSC0 in info.value.skipped[0].source  # raw for programs; the message is escaped
    assert "\x1b" not in str(info.value)
    with pytest.raises(nccllog.Error):
        nccllog.analyze("no-such-dir/")


def test_wrong_argument_types_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(nccllog.UsageError, match="got int"):
        nccllog.analyze(123)  # type: ignore[arg-type]
    with pytest.raises(nccllog.UsageError):
        nccllog.analyze([str(tmp_path), 5])  # type: ignore[list-item]
    with pytest.raises(nccllog.UsageError, match="patterns must be"):
        nccllog.analyze(b"x\n", patterns=7)  # type: ignore[arg-type]
    with pytest.raises(nccllog.UsageError, match="unknown format"):
        nccllog.render(nccllog.analyze(b"x\n"), "pdf")


def test_bytes_are_log_text() -> None:
    line = WATCHDOG.format(rank=1, tail="")
    from_bytes = nccllog.analyze(line.encode() + b"\n")
    from_text = nccllog.analyze_text(line + "\n")
    assert from_bytes.inputs == ("<paste>",)
    assert nccllog.render(from_bytes, "json") == nccllog.render(from_text, "json")
    assert from_bytes.verdict.category == "straggler_hang"


def test_one_line_paste_is_text_and_a_path_word_is_a_path(tmp_path: Path) -> None:
    line = WATCHDOG.format(rank=1, tail="")
    assert nccllog.analyze(line).inputs == ("<paste>",)
    assert nccllog.analyze(line).verdict.category == "straggler_hang"
    assert nccllog.pipeline.is_log_text(line)
    assert not nccllog.pipeline.is_log_text("logs/rank_1.log")  # a missing path stays a path
    assert nccllog.pipeline.is_log_text("*a " * 3000) and not nccllog.pipeline.is_log_text("a" * 5000)
    spaced = tmp_path / "my logs"
    spaced.mkdir()
    (spaced / "r.log").write_text(line + "\n", encoding="utf-8")
    assert not nccllog.pipeline.is_log_text(str(spaced))  # an existing path with a space
    assert nccllog.analyze(str(spaced)).inputs == (str(spaced),)


def test_patterns_string_is_one_directory(tmp_path: Path) -> None:
    nccllog.analyze(b"x\n", patterns=str(tmp_path))  # an empty directory adds nothing
    with pytest.raises(nccllog.PatternLibraryError) as info:
        nccllog.analyze(b"x\n", patterns=str(tmp_path / "nope"))
    assert len(info.value.problems) == 1 and info.value.problems[0].endswith("nope: not a directory")
