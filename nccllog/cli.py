"""The command line: parses options, calls the library, picks the renderer, owns the exit codes.

Exit codes: 0 analysed; 1 a finding at or above --fail-on; 2 unusable input or usage error.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import click

from nccllog.match.library import LibraryError, load_library
from nccllog.model import SEVERITIES, Incident
from nccllog.pipeline import InputError, analyze
from nccllog.render import FORMATS, render

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
_EXTENSIONS = {".json": "json", ".md": "markdown", ".markdown": "markdown", ".html": "html", ".htm": "html"}


def _fail(message: str) -> NoReturn:
    click.echo(f"nccllog: error: {message}", err=True)
    sys.exit(EXIT_USAGE)


def _guarded(fn: Callable[..., Any], traceback: bool, *args: Any, **kwargs: Any) -> Any:
    """Run ``fn``; user-actionable errors become one line and exit 2 (``--traceback`` shows all)."""
    try:
        return fn(*args, **kwargs)
    except (InputError, LibraryError, OSError, ValueError) as exc:
        if traceback:
            raise
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if isinstance(exc, LibraryError):
            for problem in exc.problems:
                click.echo(f"nccllog: {problem}", err=True)
        _fail(first)


def _output_format(fmt: str | None, output: str | None) -> str:
    if fmt:
        return fmt
    if output and output != "-":
        return _EXTENSIONS.get(Path(output).suffix.lower(), "text")
    return "text"


def _emit(text: str, output: str | None) -> None:
    if output and output != "-":
        Path(output).write_text(text, encoding="utf-8")
    else:
        click.echo(text, nl=False)


def _exit_code(incident: Incident, fail_on: str | None) -> int:
    if fail_on is None:
        return EXIT_OK
    floor = SEVERITIES.index(fail_on)
    worst = max((SEVERITIES.index(f.severity) for f in incident.findings if f.severity in SEVERITIES), default=-1)
    return EXIT_FINDINGS if worst >= floor else EXIT_OK


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="nccllog")
def main() -> None:
    """Read every rank's logs of a crashed NCCL / torch.distributed job and name the culprit."""


@main.command("analyze")
@click.argument("inputs", nargs=-1, required=True)
@click.option("--format", "-f", "fmt", type=click.Choice(FORMATS), help="Output format (default: text).")
@click.option("--output", "-o", help="Write the report here; the format follows the extension.")
@click.option("--patterns", "pattern_dirs", multiple=True, type=click.Path(), help="Add a directory of patterns.")
@click.option("--fail-on", type=click.Choice(SEVERITIES), help="Exit 1 if a finding is at least this severe.")
@click.option("--max-decompressed", type=int, default=8 * 1024**3, show_default=True, help="Bytes per .gz file.")
@click.option("--traceback", is_flag=True, help="Show Python tracebacks of errors (for debugging nccllog).")
def analyze_cmd(
    inputs: Sequence[str],
    fmt: str | None,
    output: str | None,
    pattern_dirs: Sequence[str],
    fail_on: str | None,
    max_decompressed: int,
    traceback: bool,
) -> None:
    """Analyse log files, directories, globs, .gz files, or - for standard input."""
    stdin = sys.stdin.buffer.read() if "-" in inputs else None
    incident: Incident = _guarded(
        analyze,
        traceback,
        list(inputs),
        patterns=list(pattern_dirs),
        stdin=stdin,
        max_decompressed=max_decompressed,
    )
    text = _guarded(render, traceback, incident, _output_format(fmt, output))
    _emit(text, output)
    sys.exit(_exit_code(incident, fail_on))


@main.command("patterns")
@click.option("--patterns", "pattern_dirs", multiple=True, type=click.Path(), help="Add a directory of patterns.")
def patterns_cmd(pattern_dirs: Sequence[str]) -> None:
    """List the patterns of the library."""
    lib = _guarded(load_library, False, list(pattern_dirs))
    for p in lib.patterns:
        click.echo(f"{p.id:<48} {p.severity:<8} {p.title}")


@main.command("explain")
@click.argument("pattern_id")
@click.option("--patterns", "pattern_dirs", multiple=True, type=click.Path(), help="Add a directory of patterns.")
def explain_cmd(pattern_id: str, pattern_dirs: Sequence[str]) -> None:
    """Print the documentation of one pattern."""
    lib = _guarded(load_library, False, list(pattern_dirs))
    p = lib.get(pattern_id)
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
    click.echo("\n".join(out))
