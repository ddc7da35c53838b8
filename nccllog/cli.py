"""The command line: parses options, calls the library, picks the renderer, owns the exit codes.

Exit codes: 0 analysed; 1 a finding at or above --fail-on; 2 unusable input or usage error.
Errors are one line on stderr (``--traceback`` shows the Python traceback instead).
"""

from __future__ import annotations

import difflib
import io
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, NoReturn, TextIO

import click

from nccllog.advice import explain_setting
from nccllog.attribution.paste import unquote_paste
from nccllog.cli_inspect import (
    ByteSize,
    categories,
    clear_phase,
    explain_category,
    explain_pattern,
    print_lines,
    print_patterns,
    redact_lines,
    select_patterns,
    size_label,
)
from nccllog.cli_inspect import (
    is_tty as _isatty,
)
from nccllog.cli_inspect import (
    phase_lines as _phases,
)
from nccllog.cli_inspect import (
    progress_bar as _progress,
)
from nccllog.errors import Error, PatternLibraryError
from nccllog.ingest.sources import unreadable
from nccllog.match.library import load_library
from nccllog.model import SEVERITIES, Incident
from nccllog.pipeline import analyze, nothing_recognised
from nccllog.redact import alias_table_json, redact_with_map
from nccllog.render import FORMATS, render
from nccllog.text_safety import clean, one_line

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
_EXTENSIONS = {
    ".json": "json",
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
    ".txt": "text",
    ".text": "text",
    ".log": "text",
}


def _err(message: str) -> None:
    """A note on stderr, on a line of its own (the phase line is erased first)."""
    clear_phase()
    click.echo(message, err=True)


def _fail(message: str) -> NoReturn:
    """``nccllog: error: …`` on stderr, exit 2. The message is cleaned (a file name's escape
    sequences never reach the terminal) and cut in its names, not its reason."""
    _err(f"nccllog: error: {one_line(message)}")
    sys.exit(EXIT_USAGE)


def _one_line(exc: BaseException) -> str:
    return one_line(str(exc)) or type(exc).__name__


def _guarded(fn: Callable[..., Any], traceback: bool, *args: Any, **kwargs: Any) -> Any:
    """Run ``fn``; errors become one line and exit 2 (``--traceback`` shows the traceback)."""
    try:
        return fn(*args, **kwargs)
    except (Error, OSError, ValueError, UnicodeError) as exc:
        if traceback:
            raise
        if isinstance(exc, PatternLibraryError):
            for problem in exc.problems:
                click.echo(f"nccllog: {one_line(problem, 1000)}", err=True)
        _fail(_one_line(exc))
    except KeyboardInterrupt:
        if traceback:
            raise
        click.echo("nccllog: interrupted", err=True)
        sys.exit(130)
    except MemoryError:
        if traceback:
            raise
        _fail("out of memory (try fewer inputs at once, or a smaller --max-decompressed)")
    except Exception as exc:  # a bug in nccllog: still one line, and how to report it
        if traceback:
            raise
        _fail(
            f"internal error: {type(exc).__name__}: {_one_line(exc)} (run again with --traceback to see where)"
        )


_FORMAT_CHOICES = (*FORMATS, "md")


def _output_format(fmt: str | None, output: str | None, default: str) -> str:
    if fmt:
        return "markdown" if fmt == "md" else fmt
    if output and output != "-":
        suffix = Path(output).suffix.lower()
        if suffix not in _EXTENSIONS:
            _fail(f"cannot tell the format from {output!r}; use --format ({', '.join(FORMATS)})")
        return _EXTENSIONS[suffix]
    return default


def _color_wanted(choice: str, stream: TextIO) -> bool:
    """Colour on a terminal unless NO_COLOR is set (https://no-color.org) or TERM is dumb;
    FORCE_COLOR (https://force-color.org) colours a pipe or file too (NO_COLOR still wins)."""
    if choice == "always":
        return True
    if choice == "never":
        return False
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    if os.environ.get("TERM") == "dumb":
        return False
    return _isatty(stream)


def _emit(text: str, output: str | None, quiet: bool, fmt: str, verdict: str = "") -> None:
    if output and output != "-":
        path = Path(output)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8", newline="\n")
        tmp.replace(path)
        if not quiet:
            if verdict:  # the report is in a file: the verdict still reaches the person at the terminal
                _err(f"nccllog: {verdict}")
            _err(f"nccllog: wrote {fmt} report to {clean(output)} ({size_label(len(text.encode('utf-8')))})")
        return
    data = text.encode("utf-8", "replace")
    try:
        out = sys.stdout.buffer
    except AttributeError:  # a text-only stdout (click's test runner, some IDEs)
        sys.stdout.write(data.decode("utf-8"))
        sys.stdout.flush()
        return
    try:
        out.write(data)
        out.flush()
    except BrokenPipeError:  # `nccllog analyze logs | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(EXIT_OK)


def _verdict_line(incident: Incident) -> str:
    """The verdict in one line: category, culprit, confidence."""
    from nccllog.render.view import culprit_line

    v = incident.verdict
    return one_line(f"{v.category}: {culprit_line(incident)} (confidence {v.confidence})", 300)


def _exit_code(incident: Incident, fail_on: str | None) -> int:
    if fail_on is None:
        return EXIT_OK
    floor = SEVERITIES.index(fail_on)
    worst = max(
        (SEVERITIES.index(f.severity) for f in incident.findings if f.severity in SEVERITIES), default=-1
    )
    return EXIT_FINDINGS if worst >= floor else EXIT_OK


def _check_inputs(incident: Incident, strict: bool) -> None:
    """Warn about each named input that could not be read (``--strict``: exit 2 instead), refuse an
    input without a single line, and warn when no line was recognised."""
    from nccllog.parts import REJECTED
    from nccllog.render.view import clean

    bad = [s for s in incident.coverage.skipped if unreadable(s.reason)]
    for s in bad:
        _err(f"nccllog: warning: {clean(s.source, 200)}: {clean(s.reason, 200)}")
    for s in incident.coverage.skipped:
        if s.reason.startswith(REJECTED):  # a .parquet given as a part that is not one
            _err(f"nccllog: skipped {clean(s.source, 200)}: {clean(s.reason, 300)}")
    if strict and bad:
        _fail(
            f"{len(bad)} input(s) could not be read (--strict): {clean(bad[0].source, 200)}: {bad[0].reason}"
        )
    why = nothing_recognised(incident)
    if why is not None and not incident.coverage.lines:
        _fail(clean(why, 600))
    if why is not None:
        # A paste of a producer nccllog does not know still gets its report (an `unknown` verdict
        # that says so, and what to collect), not a refusal.
        _err(f"nccllog: warning: {clean(why, 600)}")


def _report(
    incident: Incident,
    *,
    fmt: str,
    output: str | None,
    redact: bool,
    redact_map: str | None,
    color: str,
    width: int | None,
    quiet: bool,
    traceback: bool,
    phase: Callable[[str], None] | None = None,
) -> None:
    if phase is not None:
        phase("rendering")
    if redact or redact_map:
        incident, aliases = _guarded(redact_with_map, traceback, incident)
        if redact_map:
            _guarded(Path(redact_map).write_text, traceback, alias_table_json(aliases), encoding="utf-8")
            if not quiet:
                _err(
                    f"nccllog: wrote the alias table ({len(aliases)} aliases) to {clean(redact_map)};"
                    " keep it private"
                )
    to_terminal = not output or output == "-"
    use_color = fmt == "text" and to_terminal and _color_wanted(color, sys.stdout)
    if width is None and fmt == "text" and to_terminal and _isatty(sys.stdout):
        width = max(min(shutil.get_terminal_size((100, 40)).columns, 160), 60)
    text = _guarded(render, traceback, incident, fmt, color=use_color, width=width)
    if phase is not None:
        phase("writing")
    _guarded(_emit, traceback, text, output, quiet, fmt, _verdict_line(incident))


def _stdin_stream() -> IO[bytes]:
    """Standard input as a binary stream, which the reader consumes in chunks (bounded)."""
    if _isatty(sys.stdin):
        click.echo("nccllog: reading logs from standard input; end with Ctrl-D", err=True)
    try:
        return sys.stdin.buffer
    except AttributeError:
        return io.BytesIO(sys.stdin.read().encode("utf-8", "surrogateescape"))


class _Unquoting(io.RawIOBase):
    """A pasted blob, unquoted (``unquote_paste``) a bounded piece of whole lines at a time."""

    PIECE = 8 * 1024 * 1024

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw, self._rest, self._out, self._eof = raw, b"", b"", False

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while not self._out and not self._eof:
            piece = self._raw.read(self.PIECE)
            data = self._rest + piece
            cut = len(data) if not piece or len(data) > 2 * self.PIECE else data.rfind(b"\n") + 1
            data, self._rest = data[:cut], data[cut:]
            self._eof = not piece
            if data:
                self._out = unquote_paste(data)
        n = min(len(b), len(self._out))
        b[:n], self._out = self._out[:n], self._out[n:]
        return n


# The decompression limits: every command that reads logs declares them (extract too).
_read_limit_options = [
    click.option(
        "--max-decompressed",
        type=ByteSize(),
        default="8G",
        show_default=True,
        help="Read at most this many decompressed bytes per compressed file or archive member,"
        " and at most this many bytes of standard input (a size: 8G, 512M, 100K or bytes).",
    ),
    click.option(
        "--max-total-decompressed",
        type=ByteSize(),
        default="32G",
        show_default=True,
        help="Read at most this many decompressed bytes over all compressed inputs together (e.g. 64G).",
    ),
]

_common_report_options = [
    click.option("--output", "-o", help="Write the report to this file; the format follows its extension."),
    click.option(
        "--fail-on", type=click.Choice(SEVERITIES), help="Exit 1 if a finding is at least this severe."
    ),
    click.option(
        "--redact-map", type=click.Path(dir_okay=False), help="Write the alias table (JSON) to this file."
    ),
    click.option(
        "--color",
        type=click.Choice(["auto", "always", "never"]),
        default="auto",
        show_default=True,
        help="Colour in the terminal report (auto: on a terminal unless NO_COLOR is set).",
    ),
    click.option("--width", type=click.IntRange(40, 400), help="Line width of the terminal report."),
    click.option("--quiet", "-q", is_flag=True, help="No progress bar and no notes on stderr (errors only)."),
    click.option(
        "--patterns", "pattern_dirs", multiple=True, type=click.Path(), help="Add a directory of patterns."
    ),
    *_read_limit_options,
    click.option(
        "--processes",
        "-j",
        type=click.IntRange(min=1),
        help="Processes that read and match (default: the cores this one may use, at most 8). Workers "
        "start only for large jobs (2,048 files or 50,000 candidate lines each); the report is the same.",
    ),
    click.option(
        "--strict",
        is_flag=True,
        help="Exit 2 when an input named cannot be read (missing, unreadable), even next to good ones.",
    ),
    click.option(
        "--traceback", is_flag=True, help="Show Python tracebacks of errors (for debugging nccllog)."
    ),
]


def _apply(options: list[Callable[..., Any]], fn: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(options):
        fn = option(fn)
    return fn


def _report_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    return _apply(_common_report_options, fn)


def read_limit_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The decompression limits, as every command that reads logs declares them."""
    return _apply(_read_limit_options, fn)


# click >= 8.2 raises this (a UsageError) for a bare `nccllog`; its help text is the right answer.
_NO_ARGS_IS_HELP: Any = getattr(click.exceptions, "NoArgsIsHelpError", ())


class _OneLineErrors(click.Group):
    """click's usage errors as one line, ``nccllog: error: … (see 'nccllog analyze --help')``,
    exit 2, instead of its usage block: the README's promise for every error."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, False, **extra)
        except _NO_ARGS_IS_HELP as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click.UsageError as exc:
            hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
            _fail(exc.format_message().removesuffix(".") + hint)
        except click.ClickException as exc:
            _fail(exc.format_message())
        except click.Abort:
            click.echo("nccllog: interrupted", err=True)
            sys.exit(130)
        sys.exit(rv if isinstance(rv, int) else EXIT_OK)


@click.group(cls=_OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="nccllog")
def main() -> None:
    """Read every rank's logs of a crashed NCCL / torch.distributed job and name the culprit.

    \b
      nccllog analyze logs/                   terminal report
      nccllog analyze logs/ -o report.html    one self-contained HTML file
      pbpaste | nccllog paste                 markdown for a ticket, redacted
    """


@main.command("analyze")
@click.argument("inputs", nargs=-1, required=True)
@click.option(
    "--format", "-f", "fmt", type=click.Choice(_FORMAT_CHOICES), help="Output format (default: text)."
)
@click.option(
    "--redact/--no-redact", default=False, help="Replace hosts, IPs, users, e-mails and secrets by aliases."
)
@_report_options
def analyze_cmd(inputs: Sequence[str], fmt: str | None, redact: bool, **kw: Any) -> None:
    """Analyse log files, directories, globs, compressed files and archives (gzip, bzip2, xz, tar,
    zip: recognised by content), or - for standard input. An input that cannot be read is a warning
    (--strict: exit 2); input in which no line is recognised is exit 2."""
    _run(list(inputs), fmt=fmt, default_fmt="text", redact=redact, **kw)


@main.command("paste")
@click.option(
    "--format", "-f", "fmt", type=click.Choice(_FORMAT_CHOICES), help="Output format (default: markdown)."
)
@click.option(
    "--redact/--no-redact", default=True, show_default=True, help="Replace hosts, IPs, users, … by aliases."
)
@_report_options
def paste_cmd(fmt: str | None, redact: bool, **kw: Any) -> None:
    """Analyse log lines pasted on standard input (many ranks mixed); prints markdown for a ticket.

    Redaction is on by default: paste the output where others can read it.
    """
    _run(["-"], fmt=fmt, default_fmt="markdown", redact=redact, paste=True, **kw)


def _run(
    inputs: list[str],
    *,
    fmt: str | None,
    default_fmt: str,
    redact: bool,
    output: str | None,
    fail_on: str | None,
    redact_map: str | None,
    color: str,
    width: int | None,
    quiet: bool,
    pattern_dirs: Sequence[str],
    max_decompressed: int,
    max_total_decompressed: int,
    processes: int | None,
    strict: bool,
    traceback: bool,
    paste: bool = False,
) -> None:
    out_fmt = _output_format(fmt, output, default_fmt)
    stdin = _stdin_stream() if "-" in inputs else None
    if paste and stdin is not None:
        stdin = io.BufferedReader(_Unquoting(stdin))
    with _phases(not quiet) as phase:
        with _progress(not quiet) as progress:
            incident: Incident = _guarded(
                analyze,
                traceback,
                inputs,
                patterns=list(pattern_dirs),
                stdin=stdin,
                max_decompressed=max_decompressed,
                max_total_decompressed=max_total_decompressed,
                progress=progress,
                phase=phase,
                processes=processes,
            )
        _check_inputs(incident, strict)
        _report(
            incident,
            fmt=out_fmt,
            output=output,
            redact=redact,
            redact_map=redact_map,
            color=color,
            width=width,
            quiet=quiet,
            traceback=traceback,
            phase=phase,
        )
    sys.exit(_exit_code(incident, fail_on))


@main.command("lines")
@click.argument("inputs", nargs=-1, required=True)
@click.option("--rank", "ranks", type=int, multiple=True, help="Only lines of this global rank (repeatable).")
@click.option("--host", "hosts", multiple=True, help="Only lines of this host (repeatable).")
@click.option("--unattributed", is_flag=True, help="Only lines no rank could be given to.")
@click.option("--matched", is_flag=True, help="Only lines that matched a pattern.")
@click.option(
    "--format",
    "-f",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text: source:line, rank, host, reason, line (tab-separated); json: one object per line.",
)
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option(
    "--redact/--no-redact", default=False, help="Replace hosts, IPs, users, e-mails and secrets by aliases."
)
@click.option("--traceback", is_flag=True, help="Show Python tracebacks of errors.")
def lines_cmd(
    inputs: Sequence[str],
    ranks: Sequence[int],
    hosts: Sequence[str],
    unattributed: bool,
    matched: bool,
    fmt: str,
    as_json: bool,
    redact: bool,
    traceback: bool,
) -> None:
    """List every line with the rank and host it was attributed to and the reason (how the rank
    was found, or why it could not be), e.g. one rank's lines."""
    import polars as pl

    from nccllog.pipeline import attribute

    stdin = _stdin_stream() if "-" in inputs else None
    skipped: list[Any] = []
    rows = _guarded(attribute, traceback, list(inputs), stdin=stdin, skipped=skipped)
    for s in skipped:
        click.echo(f"skipped {clean(s.source)}: {clean(s.reason)}", err=True)
    if ranks:
        rows = rows.filter(pl.col("rank").is_in(list(ranks)))
    if hosts:
        rows = rows.filter(pl.col("host").is_in(list(hosts)))
    if unattributed:
        rows = rows.filter(pl.col("rank").is_null())
    if matched:
        rows = rows.filter(pl.col("pattern").is_not_null())
    if redact:
        rows = _guarded(redact_lines, traceback, rows)
    print_lines(rows, as_json or fmt == "json")


@main.command("patterns")
@click.option("--producer", "producers", multiple=True, help="Only patterns of this producer (repeatable).")
@click.option("--signal", "signals", multiple=True, help="Only patterns of this signal (repeatable).")
@click.option(
    "--severity", "severities", multiple=True, type=click.Choice(SEVERITIES), help="Only this severity."
)
@click.option("--format", "-f", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option(
    "--patterns", "pattern_dirs", multiple=True, type=click.Path(), help="Add a directory of patterns."
)
def patterns_cmd(
    producers: Sequence[str],
    signals: Sequence[str],
    severities: Sequence[str],
    fmt: str,
    pattern_dirs: Sequence[str],
) -> None:
    """List the patterns of the library (id, severity, signal, title), optionally filtered."""
    lib = _guarded(load_library, False, list(pattern_dirs))
    print_patterns(select_patterns(lib, producers, signals, severities), fmt == "json")


@main.command("explain")
@click.argument("name")
@click.option(
    "--patterns", "pattern_dirs", multiple=True, type=click.Path(), help="Add a directory of patterns."
)
def explain_cmd(name: str, pattern_dirs: Sequence[str]) -> None:
    """Explain a pattern id (torch.watchdog_timeout), a verdict category (collective_mismatch) or
    an environment variable (NCCL_SOCKET_IFNAME)."""
    lib = _guarded(load_library, False, list(pattern_dirs))
    p = lib.get(name)
    if p is not None:
        click.echo(clean(explain_pattern(p), newlines=True))
        return
    found = explain_category(name, lib) or explain_setting(name)
    if found is not None:
        click.echo(clean(found, newlines=True))
        return
    key = name.split(".")[-1].lower()
    names = [*categories(), *(q.id for q in lib.patterns)]
    close = [n for n in names if key and key in n][:5] or difflib.get_close_matches(
        name.lower(), names, 5, 0.75
    )
    hint = f" (did you mean: {', '.join(close[:5])})" if close else ""
    _fail(f"no pattern, category or setting named {name!r}{hint}")


# The two-phase commands (extract, ray-extract) live in their own module; registered here so that
# `nccllog` lists them.
from nccllog.cli_scale import extract_cmd, ray_extract_cmd  # noqa: E402

main.add_command(extract_cmd)
main.add_command(ray_extract_cmd)
