"""The library entry point: inputs -> Incident. Each stage is a function of the previous one's table."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

import polars as pl

from nccllog.advice import advise
from nccllog.correlate.diagnose import diagnose
from nccllog.correlate.ranks import resolve
from nccllog.ingest.reader import (
    DEFAULT_MAX_DECOMPRESSED,
    DEFAULT_MAX_TOTAL_DECOMPRESSED,
    ReadResult,
    read_sources,
)
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
    stdin: bytes | IO[bytes] | None = None,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
    max_total_decompressed: int = DEFAULT_MAX_TOTAL_DECOMPRESSED,
    library: Library | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Incident:
    """Analyse log files, directories, globs or ``-`` (standard input) and return the Incident.

    A string that contains a newline is taken as pasted log text rather than a path.
    ``patterns`` adds directories of user patterns to the built-in library. ``stdin`` may be
    bytes or a binary stream (read in chunks, at most ``max_decompressed`` bytes of it);
    ``max_decompressed`` bounds each compressed file or archive member, ``max_total_decompressed``
    all of them together.
    """
    lib = library or load_library(patterns or ())
    sources, skipped = _sources(inputs, stdin)
    names = tuple(s.name for s in sources) if sources and sources[0].name == PASTE_NAME else _names(inputs)
    if not sources:
        raise InputError(_nothing(skipped))
    read = read_sources(
        sources,
        prefilter_keywords(lib),
        sampled=sampled_keywords(lib),
        keep=sampled_keep(lib),
        max_decompressed=max_decompressed,
        max_total_decompressed=max_total_decompressed,
        progress=progress,
    )
    if not any(st.lines or not st.skipped for st in read.stats):
        # Every source was skipped whole while reading (binary, unreadable, corrupt archive).
        raise InputError(_nothing([*skipped, *(s for st in read.stats for s in st.skipped)]))
    matched = match_lines(read.lines, lib)
    events, topology = resolve(matched.events, {st.source: st.mtime for st in read.stats if st.mtime})
    coverage = _coverage(read, matched, events, skipped, topology.notes)
    incident = diagnose(
        events,
        topology,
        coverage=coverage,
        templates=matched.templates,
        library=lib,
        inputs=names,
    )
    return advise(_with_unaligned_hosts(incident), lib)


def attribute(
    inputs: PathLike | Sequence[PathLike],
    *,
    patterns: Sequence[PathLike] | None = None,
    stdin: bytes | IO[bytes] | None = None,
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
    inputs: PathLike | Sequence[PathLike], stdin: bytes | IO[bytes] | None
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
    reasons: list[tuple[str, int]] = []
    if sampled_out:
        reason = "high-volume progress lines (e.g. NCCL opCount) counted, not matched one by one"
        reasons.append((reason, sampled_out))
        notes.append(
            f"{sampled_out} high-volume progress line(s) (e.g. NCCL opCount) were counted but not analysed;"
            " the last lines of each writer were analysed"
        )
    truncated = sum(st.truncated_lines for st in read.stats)
    if truncated:
        notes.append(f"{truncated} line(s) longer than 1 MiB were cut to 1 MiB for analysis")
    for st in read.stats:
        if st.encoding != "utf-8":
            notes.append(f"{st.source}: decoded as {st.encoding}")
    skipped_lines = sum(n for _, n in reasons)
    return Coverage(
        files=len(read.stats),
        lines=lines_total,
        matched=matched_lines,
        unattributed=unattributed,
        skipped=tuple(sorted(all_skipped, key=lambda s: (s.source, s.reason))),
        bytes_read=sum(st.bytes for st in read.stats),
        decode_replacements=sum(st.decode_replacements for st in read.stats),
        skipped_lines=skipped_lines,
        truncated_lines=truncated,
        notes=tuple(notes),
        unmatched=lines_total - matched_lines - skipped_lines,
        skipped_line_reasons=tuple(reasons),
    )


def _with_unaligned_hosts(incident: Incident) -> Incident:
    """Name the hosts with timed lines whose clocks no sync point tied to the others' (their times
    are as logged, so order across hosts involving them is not established)."""
    ev = incident.events
    if not ev.height or "host" not in ev.columns:
        return incident
    timed = ev.filter(pl.col("time").is_not_null() & pl.col("host").is_not_null())
    hosts = sorted(set(timed.get_column("host").to_list()))
    if len(hosts) < 2:
        return incident
    unaligned = tuple(h for h in hosts if h not in incident.host_offsets)
    if not unaligned:
        return incident
    c = incident.coverage
    shown = ", ".join(unaligned[:8]) + (f" and {len(unaligned) - 8} more" if len(unaligned) > 8 else "")
    note = (
        f"clock of {len(unaligned)} host(s) could not be aligned with the others (no shared sync point): "
        f"{shown}; their times are as logged"
    )
    coverage = dataclasses.replace(c, unaligned_hosts=unaligned, notes=(*c.notes, note))
    return dataclasses.replace(incident, coverage=coverage)


def nothing_recognised(incident: Incident) -> str | None:
    """Why the analysis found nothing to stand on, or None: no line read is one that nccllog
    recognises, other than progress bars (an empty paste, a non-log file, only tqdm output).
    The verdict of such an input would be an all-clear on no evidence, so the CLI refuses it."""
    ev = incident.events
    if ev.height and ev.filter(pl.col("pattern").is_not_null() & (pl.col("signal") != "progress")).height:
        return None
    c = incident.coverage
    progress = ev.filter(pl.col("signal") == "progress").height if ev.height else 0
    what = f"{c.files} file(s), {c.lines:,} line(s)" + (
        f", {progress} progress-bar line(s)" if progress else ""
    )
    skipped = f"; skipped: {c.skipped[0].source}: {c.skipped[0].reason}" if c.skipped else ""
    return f"nothing recognised: read {what}, and no line is an NCCL, PyTorch, launcher or kernel log line nccllog knows{skipped}"
