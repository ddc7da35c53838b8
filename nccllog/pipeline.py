"""The library entry point: inputs -> Incident. Each stage is a function of the previous one's table."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import polars as pl

from nccllog.advice import advise
from nccllog.correlate import flight
from nccllog.correlate.diagnose import diagnose
from nccllog.correlate.ranks import resolve
from nccllog.ingest import flight as flight_dumps
from nccllog.ingest.reader import DEFAULT_MAX_DECOMPRESSED, ReadResult, read_sources
from nccllog.ingest.sources import Source, display_name, expand_inputs
from nccllog.match.library import Library, load_library
from nccllog.match.matcher import MatchResult, match_lines, prefilter_keywords, sampled_keep, sampled_keywords
from nccllog.model import Coverage, Incident, Skipped

PathLike = str | Path
PASTE_NAME = "<paste>"


class InputError(Exception):
    """Nothing analysable was given (the CLI prints this as one line and exits 2)."""


def analyze(
    inputs: PathLike | Sequence[PathLike],
    *,
    patterns: Sequence[PathLike] | None = None,
    stdin: bytes | None = None,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
    library: Library | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Incident:
    """Analyse log files, directories, globs or ``-`` (standard input) and return the Incident.

    A string that contains a newline is taken as pasted log text rather than a path.
    ``patterns`` adds directories of user patterns to the built-in library.
    """
    lib = library or load_library(patterns or ())
    sources, skipped = _sources(inputs, stdin)
    names = tuple(s.name for s in sources) if sources and sources[0].name == PASTE_NAME else _names(inputs)
    if not sources:
        raise InputError(_nothing(skipped))
    sources, dumps, refused = flight_dumps.partition(sources)
    skipped.extend(refused)
    read = read_sources(
        sources,
        prefilter_keywords(lib),
        sampled=sampled_keywords(lib),
        keep=sampled_keep(lib),
        max_decompressed=max_decompressed,
        progress=progress,
    )
    if not dumps and not any(st.lines or not st.skipped for st in read.stats):
        # Every source was skipped whole while reading (binary, unreadable, corrupt archive).
        raise InputError(_nothing([*skipped, *(s for st in read.stats for s in st.skipped)]))
    matched = match_lines(read.lines, lib)
    events, topology = resolve(matched.events, {st.source: st.mtime for st in read.stats if st.mtime})
    events, dump_notes = flight.join(events, flight.assign_ranks(dumps, events))
    coverage = _coverage(read, matched, events, skipped, [*topology.notes, *dump_notes])
    incident = diagnose(
        events,
        topology,
        coverage=coverage,
        templates=matched.templates,
        library=lib,
        inputs=names,
    )
    return advise(incident, lib)


def attribute(
    inputs: PathLike | Sequence[PathLike],
    *,
    patterns: Sequence[PathLike] | None = None,
    stdin: bytes | None = None,
) -> pl.DataFrame:
    """Every line of the inputs with its attribution (and its pattern where one matched).

    Reads everything (no prefilter), so it is meant for inspecting a rank's lines, not for speed.
    """
    lib = load_library(patterns or ())
    sources, skipped = _sources(inputs, stdin)
    if not sources:
        raise InputError(_nothing(skipped))
    read = read_sources(sources, prefilter_keywords(lib), sampled=sampled_keywords(lib), keep_all=True)
    events, _topology = resolve(
        match_lines(read.lines, lib, keep_unmatched=True).events,
        {st.source: st.mtime for st in read.stats if st.mtime},
    )
    return events.sort("source", "line")


def analyze_text(text: str, **kwargs: object) -> Incident:
    """Analyse one pasted blob of interleaved log lines."""
    return analyze(text if "\n" in text else text + "\n", **kwargs)  # type: ignore[arg-type]


def _nothing(skipped: Sequence[Skipped]) -> str:
    reasons = "; ".join(f"{s.source}: {s.reason}" for s in skipped) or "no input given"
    return f"nothing to analyse ({reasons})"


def _names(inputs: PathLike | Sequence[PathLike]) -> tuple[str, ...]:
    items = [inputs] if isinstance(inputs, str | Path) else list(inputs)
    return tuple(display_name(i) for i in items)


def _sources(
    inputs: PathLike | Sequence[PathLike], stdin: bytes | None
) -> tuple[list[Source], list[Skipped]]:
    """Pasted text (a string with a newline) becomes one source; anything else is expanded as paths."""
    if isinstance(inputs, str) and "\n" in inputs:
        return [Source(name=PASTE_NAME, data=inputs.encode("utf-8", "surrogatepass"))], []
    items = [inputs] if isinstance(inputs, str | Path) else list(inputs)
    return expand_inputs(items, stdin=stdin)


def _coverage(
    read: ReadResult,
    matched: MatchResult,
    events: pl.DataFrame,
    skipped: list[Skipped],
    resolver_notes: Sequence[str] = (),
) -> Coverage:
    all_skipped = list(skipped)
    for st in read.stats:
        all_skipped.extend(st.skipped)
    lines_total = sum(st.lines for st in read.stats)
    # rows without a pattern are files' last lines, kept to date each writer's last sign of life
    hits = events.filter(pl.col("pattern").is_not_null()) if events.height else events
    matched_lines = hits.select("source", "line").unique().height if hits.height else 0
    unattributed = (
        hits.filter(pl.col("rank").is_null()).select("source", "line").unique().height if hits.height else 0
    )
    notes = list(resolver_notes)
    if matched.overflow_fields:
        notes.append(f"{matched.overflow_fields} numeric field(s) did not fit in 64 bits and were left empty")
    sampled_out = sum(st.sampled_out for st in read.stats)
    if sampled_out:
        notes.append(
            f"{sampled_out} high-volume progress line(s) (e.g. NCCL opCount) were counted but not analysed;"
            " the last of each file were"
        )
    truncated = sum(st.truncated_lines for st in read.stats)
    if truncated:
        notes.append(f"{truncated} line(s) longer than 1 MiB were cut to 1 MiB for analysis")
    for st in read.stats:
        if st.encoding != "utf-8":
            notes.append(f"{st.source}: decoded as {st.encoding}")
    return Coverage(
        files=len(read.stats),
        lines=lines_total,
        matched=matched_lines,
        unattributed=unattributed,
        skipped=tuple(sorted(all_skipped, key=lambda s: (s.source, s.reason))),
        bytes_read=sum(st.bytes for st in read.stats),
        decode_replacements=sum(st.decode_replacements for st in read.stats),
        truncated_lines=truncated,
        notes=tuple(notes),
    )
