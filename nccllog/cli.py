"""The command line: parses options, calls the library, picks the renderer, owns the exit codes.

Exit codes: 0 analysed; 1 a finding at or above --fail-on; 2 unusable input or usage error.
Errors are one line on stderr (``--traceback`` shows the Python traceback instead).
"""

from __future__ import annotations

import io
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, NoReturn, TextIO

import click

from nccllog.advice import explain_setting
from nccllog.attribution.paste import unwrap_fixed_width
from nccllog.errors import Error, PatternLibraryError
from nccllog.ingest.sources import unreadable
from nccllog.match.library import load_library
from nccllog.model import SEVERITIES, Incident
from nccllog.pipeline import analyze, nothing_recognised
from nccllog.redact import alias_table_json, redact_with_map
from nccllog.render import FORMATS, render
from nccllog.text_safety import clean, json_safe, one_line

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
PROGRESS_MIN_BYTES = 32 * 1024 * 1024  # below this, reading is too quick for a progress bar


def _fail(message: str) -> NoReturn:
    """``nccllog: error: …`` on stderr, exit 2. The message is cleaned (a file name's escape
    sequences never reach the terminal) and cut in its names, not its reason."""
    click.echo(f"nccllog: error: {one_line(message)}", err=True)
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


def _output_format(fmt: str | None, output: str | None, default: str) -> str:
    if fmt:
        return fmt
    if output and output != "-":
        suffix = Path(output).suffix.lower()
        if suffix not in _EXTENSIONS:
            _fail(f"cannot tell the format from {output!r}; use --format ({', '.join(FORMATS)})")
        return _EXTENSIONS[suffix]
    return default


def _color_wanted(choice: str, stream: TextIO) -> bool:
    """Colour on a terminal unless NO_COLOR is set (https://no-color.org) or TERM is dumb."""
    if choice == "always":
        return True
    if choice == "never":
        return False
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("TERM") == "dumb":
        return False
    return _isatty(stream)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _emit(text: str, output: str | None, quiet: bool, fmt: str) -> None:
    if output and output != "-":
        path = Path(output)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8", newline="\n")
        tmp.replace(path)
        if not quiet:
            click.echo(
                f"nccllog: wrote {fmt} report to {clean(output)} ({_size(len(text.encode('utf-8')))})",
                err=True,
            )
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


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"


def _exit_code(incident: Incident, fail_on: str | None) -> int:
    if fail_on is None:
        return EXIT_OK
    floor = SEVERITIES.index(fail_on)
    worst = max(
        (SEVERITIES.index(f.severity) for f in incident.findings if f.severity in SEVERITIES), default=-1
    )
    return EXIT_FINDINGS if worst >= floor else EXIT_OK


def _check_inputs(incident: Incident, strict: bool) -> None:
    """Warn about each named input that could not be read (``--strict``: exit 2 instead), and
    refuse an input in which nothing was recognised (its verdict would be an all-clear on nothing)."""
    from nccllog.parts import REJECTED
    from nccllog.render.view import clean

    bad = [s for s in incident.coverage.skipped if unreadable(s.reason)]
    for s in bad:
        click.echo(f"nccllog: warning: {clean(s.source, 200)}: {clean(s.reason, 200)}", err=True)
    for s in incident.coverage.skipped:
        if s.reason.startswith(REJECTED):  # a .parquet given as a part that is not one
            click.echo(f"nccllog: skipped {clean(s.source, 200)}: {clean(s.reason, 300)}", err=True)
    if strict and bad:
        _fail(
            f"{len(bad)} input(s) could not be read (--strict): {clean(bad[0].source, 200)}: {bad[0].reason}"
        )
    why = nothing_recognised(incident)
    if why is not None:
        _fail(clean(why, 600))


@contextmanager
def _progress(enabled: bool) -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar on stderr (only on a terminal, only for large inputs); yields the callback."""
    if not enabled or not _isatty(sys.stderr):
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    console = Console(stderr=True, markup=False, emoji=False, highlight=False)
    bar = Progress(
        TextColumn("reading logs"),
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        auto_refresh=True,
    )
    task: list[Any] = []

    def update(done: int, total: int) -> None:
        if total < PROGRESS_MIN_BYTES:
            return
        if not task:
            bar.start()
            task.append(bar.add_task("read", total=total))
        bar.update(task[0], completed=done, total=total)

    try:
        yield update
    finally:
        if task:
            bar.stop()


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
) -> None:
    if redact or redact_map:
        incident, aliases = _guarded(redact_with_map, traceback, incident)
        if redact_map:
            _guarded(Path(redact_map).write_text, traceback, alias_table_json(aliases), encoding="utf-8")
            if not quiet:
                click.echo(
                    f"nccllog: wrote the alias table ({len(aliases)} aliases) to {clean(redact_map)};"
                    " keep it private",
                    err=True,
                )
    to_terminal = not output or output == "-"
    use_color = fmt == "text" and to_terminal and _color_wanted(color, sys.stdout)
    if width is None and fmt == "text" and to_terminal and _isatty(sys.stdout):
        width = max(min(shutil.get_terminal_size((100, 40)).columns, 160), 60)
    text = _guarded(render, traceback, incident, fmt, color=use_color, width=width)
    _guarded(_emit, traceback, text, output, quiet, fmt)


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


# What a tracker's markdown makes of `net_ib.cc:101` or `10.1.3.201` in a pasted log: a link whose
# text is its own address, `[net_ib.cc:101](http://net_ib.cc:101/)`.
_AUTOLINK = re.compile(rb"\[([^\]\s()]{1,200})\]\((?:https?://)?\1/?\)")


def unquote_paste(data: bytes) -> bytes:
    """Undo what chat, e-mail and trackers do to a pasted blob: when most lines start with ``>``,
    drop one ``> `` from each (line numbers stay the same); turn autolinks back into their text.
    Code-fence lines stay and simply match nothing."""
    if b"](" in data:
        data = _AUTOLINK.sub(rb"\1", data)
    lines = data.split(b"\n")
    filled = [ln for ln in lines if ln.strip()]
    if filled and sum(ln.startswith(b">") for ln in filled) * 2 >= len(filled):
        lines = [ln[2:] if ln.startswith(b"> ") else ln[1:] if ln.startswith(b">") else ln for ln in lines]
    return b"\n".join(_unwrap(unwrap_fixed_width(lines)))


def _unwrap(lines: list[bytes]) -> list[bytes]:
    """Re-join lines a tracker or terminal wrapped inside a bracket: a line with an unclosed ``[``
    followed by an indented line is one line (an empty line keeps the numbering)."""
    out = list(lines)
    for i in range(1, len(out)):
        prev, cur = out[i - 1], out[i]
        if cur[:1] in (b" ", b"\t") and prev.count(b"[") > prev.count(b"]") and len(prev) < 4096:
            out[i - 1], out[i] = prev.rstrip() + b" " + cur.lstrip(), b""
    return out


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
    click.option(
        "--max-decompressed",
        type=click.IntRange(min=0),
        default=8 * 1024**3,
        show_default=True,
        help="Read at most this many decompressed bytes per compressed file or archive member,"
        " and at most this many bytes of standard input.",
    ),
    click.option(
        "--max-total-decompressed",
        type=click.IntRange(min=0),
        default=32 * 1024**3,
        show_default=True,
        help="Read at most this many decompressed bytes over all compressed inputs together.",
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


def _report_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(_common_report_options):
        fn = option(fn)
    return fn


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
@click.option("--format", "-f", "fmt", type=click.Choice(FORMATS), help="Output format (default: text).")
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
@click.option("--format", "-f", "fmt", type=click.Choice(FORMATS), help="Output format (default: markdown).")
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
    strict: bool,
    traceback: bool,
    paste: bool = False,
) -> None:
    out_fmt = _output_format(fmt, output, default_fmt)
    stdin = _stdin_stream() if "-" in inputs else None
    if paste and stdin is not None:
        stdin = io.BufferedReader(_Unquoting(stdin))
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
    )
    sys.exit(_exit_code(incident, fail_on))


@main.command("lines")
@click.argument("inputs", nargs=-1, required=True)
@click.option("--rank", "ranks", type=int, multiple=True, help="Only lines of this global rank (repeatable).")
@click.option("--host", "hosts", multiple=True, help="Only lines of this host (repeatable).")
@click.option("--unattributed", is_flag=True, help="Only lines no rank could be given to.")
@click.option("--matched", is_flag=True, help="Only lines that matched a pattern.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line (source, line, rank, ...).")
@click.option("--traceback", is_flag=True, help="Show Python tracebacks of errors.")
def lines_cmd(
    inputs: Sequence[str],
    ranks: Sequence[int],
    hosts: Sequence[str],
    unattributed: bool,
    matched: bool,
    as_json: bool,
    traceback: bool,
) -> None:
    """List every line with the rank and host it was attributed to (and why), e.g. one rank's lines."""
    import json

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
    for r in rows.select("source", "line", "rank", "host", "pattern", "attribution", "text").iter_rows(
        named=True
    ):
        if as_json:
            click.echo(json_safe(json.dumps(r, ensure_ascii=False, sort_keys=True)))
        else:
            who = "-" if r["rank"] is None else f"rank {r['rank']}"
            click.echo(
                f"{clean(r['source'])}:{r['line']}\t{who}\t{clean(r['host'] or '-')}\t{clean(r['text'], 2000)}"
            )


@main.command("patterns")
@click.option(
    "--patterns", "pattern_dirs", multiple=True, type=click.Path(), help="Add a directory of patterns."
)
def patterns_cmd(pattern_dirs: Sequence[str]) -> None:
    """List the patterns of the library."""
    lib = _guarded(load_library, False, list(pattern_dirs))
    for p in lib.patterns:
        click.echo(clean(f"{p.id:<48} {p.severity:<8} {p.title}"))


@main.command("explain")
@click.argument("pattern_id")
@click.option(
    "--patterns", "pattern_dirs", multiple=True, type=click.Path(), help="Add a directory of patterns."
)
def explain_cmd(pattern_id: str, pattern_dirs: Sequence[str]) -> None:
    """Print the documentation of one pattern."""
    lib = _guarded(load_library, False, list(pattern_dirs))
    p = lib.get(pattern_id)
    if p is None and (setting := explain_setting(pattern_id)) is not None:
        click.echo(clean(setting, newlines=True))
        return
    if p is None:
        close = [q.id for q in lib.patterns if pattern_id.split(".")[-1] in q.id][:5]
        hint = f" (did you mean: {', '.join(close)})" if close else ""
        _fail(f"no pattern with id {pattern_id!r}{hint}")
    out = [
        f"{p.id}: {p.title}",
        f"producer: {p.producer}  versions: {p.versions}",
        f"severity: {p.severity}  signal: {p.signal}  category: {p.category or '-'}",
        "",
        "Meaning",
        f"  {p.meaning}",
    ]
    if p.causes:
        out += ["", "Likely causes", *[f"  - {c}" for c in p.causes]]
    if p.remediation:
        out += ["", "Remediation", *[f"  - {r}" for r in p.remediation]]
    out += ["", "Example", f"  {p.examples[0].line}" if p.examples else "  -", "", f"File: {p.path}"]
    click.echo(clean("\n".join(out), newlines=True))


# The two-phase commands (extract, ray-extract) live in their own module; registered here so that
# `nccllog` lists them.
from nccllog.cli_scale import extract_cmd, ray_extract_cmd  # noqa: E402

main.add_command(extract_cmd)
main.add_command(ray_extract_cmd)
