"""The command line's helpers, kept apart from ``cli`` (which owns the commands and the exit
codes): what ``lines``, ``patterns`` and ``explain`` print, the size option type, and the
progress shown on stderr (phases and a bar for large inputs, only on a terminal).

Everything printed from a log, a pattern or a user's file goes through ``clean``; JSON output is
one object per line (``lines``) or one document (``patterns``), deterministic.
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from importlib import resources
from typing import Any, TextIO

import click
import polars as pl

from nccllog.match.library import Library, Pattern
from nccllog.render.view import CATEGORY_TITLES
from nccllog.text_safety import clean, json_safe

_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*", re.IGNORECASE)


class ByteSize(click.ParamType):
    """A byte count: ``8589934592``, ``8G``, ``512M``, ``1.5GiB``, ``100k`` (units of 1024)."""

    name = "size"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        m = _SIZE.fullmatch(str(value))
        if m is None:
            self.fail(f"{value!r} is not a size (e.g. 8G, 512M, 100K or a number of bytes)", param, ctx)
        return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def size_label(n: int) -> str:
    """``1536`` -> ``1.5 KiB`` (binary units, as the size options read them)."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


# ---- progress on stderr (only on a terminal) ----------------------------------------------------
PROGRESS_MIN_BYTES = 32 * 1024 * 1024  # below this, reading is too quick for a progress bar


def is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


@contextmanager
def phase_lines(enabled: bool) -> Iterator[Callable[[str], None] | None]:
    """``nccllog: matching…`` on stderr, one transient line per phase (only on a terminal)."""
    if not enabled or not is_tty(sys.stderr):
        yield None
        return

    def show(name: str) -> None:
        sys.stderr.write(f"\r\x1b[Knccllog: {name}…")
        sys.stderr.flush()
        _SHOWN[0] = True

    try:
        yield show
    finally:
        clear_phase()


_SHOWN = [False]  # a phase line is on the terminal (a note printed now must erase it first)


def clear_phase() -> None:
    """Erase the phase line, if one is shown, so that a note on stderr starts on a clean line."""
    if _SHOWN[0]:
        sys.stderr.write("\r\x1b[K")
        sys.stderr.flush()
        _SHOWN[0] = False


@contextmanager
def progress_bar(enabled: bool) -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar on stderr (only on a terminal, only for large inputs); yields the callback."""
    if not enabled or not is_tty(sys.stderr):
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


# ---- lines ------------------------------------------------------------------------------------
LINE_COLUMNS = ("source", "line", "rank", "host", "pattern", "attribution", "text")


def print_lines(rows: pl.DataFrame, as_json: bool) -> None:
    """One line per log line: ``source:line  rank  host  reason  text`` (the reason: how the rank
    was found, or why it could not be), or one JSON object per line."""
    for r in rows.select(*LINE_COLUMNS).iter_rows(named=True):
        if as_json:
            click.echo(json_safe(json.dumps(r, ensure_ascii=False, sort_keys=True)))
            continue
        who = "-" if r["rank"] is None else f"rank {r['rank']}"
        click.echo(
            f"{clean(r['source'])}:{r['line']}\t{who}\t{clean(r['host'] or '-')}"
            f"\t{clean(r['attribution'] or '-', 200)}\t{clean(r['text'], 2000)}"
        )


def redact_lines(rows: pl.DataFrame) -> pl.DataFrame:
    """The rows with hosts, addresses, users, e-mails and secrets replaced by aliases in their
    source, host, attribution and text (the same aliases as ``analyze --redact`` would give)."""
    from nccllog.attribution.paths import attrs_from_path
    from nccllog.redact import Redactor

    r = Redactor()
    for host in rows.get_column("host").drop_nulls().unique().sort().to_list():
        r.add("host", host)
    for source in rows.get_column("source").drop_nulls().unique().sort().to_list():
        r.add("host", attrs_from_path(source).host)
        r.scan(source)
    for col in ("text", "attribution"):
        for text in rows.get_column(col).drop_nulls().unique().sort().to_list():
            r.scan(text)
    exprs = []
    for col in ("source", "host", "attribution", "text"):
        old = rows.get_column(col).drop_nulls().unique().sort().to_list()
        new = [r.apply(x) for x in old]
        exprs.append(pl.col(col).replace(old, new))
    return rows.with_columns(exprs)


# ---- patterns ---------------------------------------------------------------------------------
def select_patterns(
    lib: Library, producers: Sequence[str], signals: Sequence[str], severities: Sequence[str]
) -> list[Pattern]:
    """The library's patterns of the given producers, signals and severities (each: any of)."""

    def wanted(value: str, choices: Sequence[str]) -> bool:
        return not choices or value.lower() in {c.lower() for c in choices}

    return [
        p
        for p in lib.patterns
        if wanted(p.producer, producers) and wanted(p.signal, signals) and wanted(p.severity, severities)
    ]


def print_patterns(patterns: list[Pattern], as_json: bool) -> None:
    if as_json:
        doc = [
            {
                "id": p.id,
                "title": p.title,
                "producer": p.producer,
                "severity": p.severity,
                "signal": p.signal,
                "category": p.category,
                "versions": p.versions,
                "fields": sorted(p.fields),
            }
            for p in patterns
        ]
        click.echo(json_safe(json.dumps(doc, ensure_ascii=False, indent=2)))
        return
    for p in patterns:
        click.echo(clean(f"{p.id:<48} {p.severity:<8} {p.signal:<20} {p.title}"))


# ---- explain ----------------------------------------------------------------------------------
@cache
def _categories() -> dict[str, dict[str, str]]:
    text = resources.files("nccllog.render").joinpath("categories.toml").read_text(encoding="utf-8")
    return {k: {f: str(v) for f, v in d.items()} for k, d in tomllib.loads(text).items()}


def explain_category(name: str, lib: Library) -> str | None:
    """What a verdict category means (``nccllog explain collective_mismatch``), or None."""
    doc = _categories().get(name.strip().lower())
    if doc is None:
        return None
    key = name.strip().lower()
    pointing = sorted(p.id for p in lib.patterns if p.category == key)
    out = [
        f"{key}: {CATEGORY_TITLES.get(key, key)}",
        "",
        "Meaning",
        f"  {doc['meaning']}",
        "",
        "What nccllog looks for",
        f"  {doc['shows']}",
        "",
        "First thing to check",
        f"  {doc['first']}",
    ]
    if pointing:
        shown = ", ".join(pointing[:12]) + (f", … ({len(pointing) - 12} more)" if len(pointing) > 12 else "")
        out += ["", f"Patterns that point to it ({len(pointing)})", f"  {shown}"]
    out += ["", "See `nccllog patterns` for every pattern and `nccllog explain PATTERN_ID` for one."]
    return "\n".join(out)


def explain_pattern(p: Pattern) -> str:
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
    return "\n".join(out)


def categories() -> tuple[str, ...]:
    return tuple(_categories())
