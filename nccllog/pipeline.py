"""The library entry point: inputs -> Incident. Each stage is a function of the previous one's table."""

from __future__ import annotations

import dataclasses
import functools
import gc
import glob
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, ParamSpec, TypeVar

import polars as pl

from nccllog import parts, spread
from nccllog.advice import advise
from nccllog.attribution import resolve
from nccllog.correlate import flight, jobs
from nccllog.correlate.diagnose import diagnose
from nccllog.correlate.rank_status import classify
from nccllog.correlate.timeline import unaligned_hosts
from nccllog.errors import InputError, UsageError
from nccllog.ingest import flight as flight_dumps
from nccllog.ingest.flight import Dump
from nccllog.ingest.reader import (
    DEFAULT_MAX_DECOMPRESSED,
    DEFAULT_MAX_TOTAL_DECOMPRESSED,
    ReadResult,
    read_sources,
)
from nccllog.ingest.sources import Source, display_name, expand_inputs
from nccllog.match.keywords import prefilter_keywords, sampled_keywords
from nccllog.match.library import Library, load_library
from nccllog.match.matcher import KEEP_FIRST, MatchResult, match_lines
from nccllog.model import Coverage, Incident, Skipped

PathLike = str | Path
Inputs = PathLike | bytes | Sequence[PathLike]
PASTE_NAME = "<paste>"
PATH_MAX = 4096  # Linux's limit on a path's length
__all__ = ["PASTE_NAME", "InputError", "analyze", "analyze_text", "attribute", "is_log_text"]
_P = ParamSpec("_P")
_R = TypeVar("_R")


def _no_cycle_collection(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Run ``fn`` with Python's cycle collector paused (reference counting still frees memory).

    An analysis holds millions of small objects (rows, line attributes) while it allocates more,
    and each pass of the collector walks all of them: about a sixth of the time of a large job.
    What it frees is cycles, which an analysis makes few of; they go once the collector resumes.
    """

    @functools.wraps(fn)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        if not gc.isenabled():
            return fn(*args, **kwargs)
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            gc.enable()

    return run


@_no_cycle_collection
def analyze(
    inputs: Inputs,
    *,
    patterns: PathLike | Sequence[PathLike] | None = None,
    stdin: bytes | IO[bytes] | None = None,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
    max_total_decompressed: int = DEFAULT_MAX_TOTAL_DECOMPRESSED,
    library: Library | None = None,
    progress: Callable[[int, int], None] | None = None,
    phase: Callable[[str], None] | None = None,
    processes: int | None = None,
) -> Incident:
    """Analyse log files, directories, globs or ``-`` (standard input) and return the Incident.

    ``bytes`` are log text. A ``str`` is log text when it holds a line break, or when it names no
    existing path (nor a glob that matches one) and contains a space; any other ``str``, a ``Path``
    and every item of a list is a path. ``patterns`` is one directory of user patterns or a list
    of them, added to the built-in library. ``stdin`` may be bytes or a binary stream (read in
    chunks, at most ``max_decompressed`` bytes of it); ``max_decompressed`` bounds each compressed
    file or archive member, ``max_total_decompressed`` all of them together. ``phase`` is called
    with the name of each stage as it starts (``reading``, ``matching``, ``correlating``). Raises
    ``nccllog.Error`` (``InputError`` when nothing is analysable, ``PatternLibraryError``,
    ``UsageError``). ``processes`` is how many processes read and match (None: the cores this
    process may use, at most 8; workers start only for a large job and change no result:
    spread.py).
    """
    lib = library or load_library(_pattern_dirs(patterns))
    sources, skipped = _sources(inputs, stdin)
    names = tuple(s.name for s in sources) if sources and sources[0].name == PASTE_NAME else _names(inputs)
    if not sources:
        raise InputError.nothing(skipped)
    limits = {"max_decompressed": max_decompressed, "max_total_decompressed": max_total_decompressed}
    read, dumps, skipped, matched = _read_and_match(sources, skipped, lib, limits, processes, progress, phase)
    if phase is not None:
        phase("correlating")
    mtimes = {st.source: st.mtime for st in read.stats if st.mtime}
    events, topology = resolve(matched.events, mtimes)
    kept, found, keep = jobs.split(events)
    mixed = jobs.describe(found, keep) if found else ""
    if found:  # resolve the kept job's lines alone: its world size, pids and years are its own
        spots = kept.select("source", "line").unique()
        events, topology = resolve(matched.events.join(spots, on=["source", "line"], how="semi"), mtimes)
    # Resolved: the matcher's own table (its internal columns) is not read again (memory).
    matched = dataclasses.replace(matched, events=matched.events.clear())
    events, dump_notes = flight.join(events, flight.assign_ranks(dumps, events))
    notes = [*([mixed] if mixed else []), *topology.notes, *dump_notes]
    coverage = _coverage(read, matched, events, skipped, notes)
    incident = diagnose(
        events,
        topology,
        coverage=coverage,
        templates=matched.templates,
        library=lib,
        inputs=names,
    )
    incident = dataclasses.replace(incident, mixed_input=mixed)
    why = nothing_recognised(incident)
    if why is not None:  # said in the report, beside a verdict that then rests on no known line
        incident = dataclasses.replace(
            incident, coverage=dataclasses.replace(coverage, notes=(*incident.coverage.notes, why))
        )
    return classify(advise(_with_unaligned_hosts(incident), lib))


def _read_and_match(
    sources: list[Source],
    skipped: list[Skipped],
    lib: Library,
    limits: dict[str, int],
    processes: int | None,
    progress: Callable[[int, int], None] | None,
    phase: Callable[[str], None] | None,
) -> tuple[ReadResult, list[Dump], list[Skipped], MatchResult]:
    """The per-file stages: the files' statistics (their candidate lines let go once matched),
    dumps, what was skipped, and the matched lines; on several processes for a large job."""
    if phase is not None:
        phase("reading")
    both = spread.read_and_match(sources, skipped, lib, **limits, processes=processes, progress=progress)
    if both is not None:
        got, matched = both.extraction, both.matched
    else:
        # Parts (nccllog extract), dumps and logs, told apart by content; parts merged per file.
        got = parts.collect(sources, skipped, lib, **limits, progress=progress)
    read, dumps, skipped = got.read, list(got.dumps), list(got.skipped)
    del got  # it holds the candidate lines too
    if not dumps and not any(st.lines or not st.skipped for st in read.stats):
        # Every source was skipped whole while reading (binary, unreadable, corrupt archive).
        raise InputError.nothing([*skipped, *(s for st in read.stats for s in st.skipped)])
    if phase is not None:
        phase("matching")
    if both is None:
        matched = spread.match_lines_parallel(read.lines, lib, processes=processes)
    # Matched: from here on only the files' statistics are read, not their lines (memory).
    return ReadResult(lines=read.lines.clear(), stats=read.stats), dumps, skipped, matched


def attribute(
    inputs: Inputs,
    *,
    patterns: PathLike | Sequence[PathLike] | None = None,
    stdin: bytes | IO[bytes] | None = None,
    skipped: list[Skipped] | None = None,
) -> pl.DataFrame:
    """Every line of the inputs with its attribution (and its pattern where one matched).

    Reads everything (no prefilter), so it is meant for inspecting a rank's lines, not for speed.
    Flight Recorder dumps, torchelastic error files and saved ncclras output are read as
    ``analyze`` reads them (a dump's rows, the lines a JSON file stands for); inputs refused or
    unreadable are appended to ``skipped`` when a list is given.
    """
    lib = load_library(_pattern_dirs(patterns))
    sources, refused = _sources(inputs, stdin)
    if not sources:
        raise InputError.nothing(refused)
    sources, dumps, not_dumps = flight_dumps.partition(sources)
    read = read_sources(sources, prefilter_keywords(lib), sampled=sampled_keywords(lib), keep_all=True)
    events, _topology = resolve(
        match_lines(read.lines, lib, keep_unmatched=True).events,
        {st.source: st.mtime for st in read.stats if st.mtime},
    )
    events, _notes = flight.join(events, flight.assign_ranks(dumps, events))
    if skipped is not None:
        skipped.extend([*refused, *not_dumps, *(s for st in read.stats for s in st.skipped)])
    return events.sort("source", "line")


def analyze_text(text: str | bytes, **kwargs: object) -> Incident:
    """Analyse one pasted blob of interleaved log lines (never taken for a path)."""
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    return analyze(data, **kwargs)  # type: ignore[arg-type]


def is_log_text(item: str) -> bool:
    """The rule for a ``str`` given to ``analyze``: log text when it holds a line break, or when it
    names no existing path (nor a glob that matches one) and contains whitespace or is empty."""
    if "\n" in item or "\r" in item:
        return True
    # Longer than any path can be: not looked up (a glob of a long pasted line costs time).
    fits = len(item) <= PATH_MAX
    if fits and (item == "-" or os.path.lexists(item) or (glob.has_magic(item) and glob.glob(item))):
        return False
    return not item or any(c.isspace() for c in item)


def _names(inputs: Inputs) -> tuple[str, ...]:
    if isinstance(inputs, bytes):
        return (PASTE_NAME,)
    items = [inputs] if isinstance(inputs, str | Path) else list(inputs)
    return tuple(display_name(i) for i in items)


def _sources(inputs: Inputs, stdin: bytes | IO[bytes] | None) -> tuple[list[Source], list[Skipped]]:
    """Log text (bytes, or a str by ``is_log_text``) becomes one source; the rest are paths."""
    if isinstance(inputs, bytes | bytearray | memoryview):
        return [Source(name=PASTE_NAME, data=bytes(inputs))], []
    if isinstance(inputs, str) and is_log_text(inputs):
        return [Source(name=PASTE_NAME, data=inputs.encode("utf-8", "surrogatepass"))], []
    items = [inputs] if isinstance(inputs, str | Path) else _path_list(inputs, "inputs")
    return expand_inputs(items, stdin=stdin)


def _pattern_dirs(patterns: PathLike | Sequence[PathLike] | None) -> list[PathLike]:
    """``patterns`` as a list of directories: one ``str`` or ``Path`` is one directory."""
    if patterns is None:
        return []
    if isinstance(patterns, str | Path):
        return [patterns]
    return _path_list(patterns, "patterns")


def _path_list(items: object, what: str) -> list[PathLike]:
    """A list of paths from an iterable of ``str``/``Path``; anything else is a usage error."""
    if isinstance(items, Iterable) and not isinstance(items, str | bytes | bytearray | memoryview):
        out = list(items)
        if all(isinstance(i, str | Path) for i in out):
            return out
    raise UsageError(
        f"{what} must be a path (str or Path) or a list of paths"
        + (", or log text (str or bytes)" if what == "inputs" else "")
        + f"; got {type(items).__name__}"
    )


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
    all_skipped.extend(matched.timed_out)  # lines whose pattern matching ran out of time
    lines_total = sum(st.lines for st in read.stats)
    # rows without a pattern are files' last lines, kept to date each writer's last sign of life
    # only the columns counted: a filter of the whole table would copy every column
    spots = events.select("source", "line", "pattern", "rank")
    hits = spots.filter(pl.col("pattern").is_not_null()) if events.height else spots
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
    if matched.thinned_lines:
        reason = (
            f"repeats of one writer's pattern beyond its first and last {KEEP_FIRST} lines, counted, not kept"
        )
        reasons.append((reason, matched.thinned_lines))
        notes.append(
            f"{matched.thinned_lines} repeated matched line(s) of one writer and pattern were counted, not kept"
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
    unaligned = unaligned_hosts(incident.events, incident.host_offsets)
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
    recognises, other than progress bars (an empty paste, a non-log file, only tqdm output, a
    producer nccllog does not know yet). Its verdict is then `unknown` unless the lines show the
    run's end; the CLI refuses an input with no line at all and says this beside any other."""
    ev = incident.events
    known = pl.col("pattern").is_not_null() & (pl.col("signal") != "progress")
    if ev.height and ev.select(known.any()).item():  # not a filter: that would copy every column
        return None
    c = incident.coverage
    progress = ev.filter(pl.col("signal") == "progress").height if ev.height else 0
    what = f"{c.files} file(s), {c.lines:,} line(s)" + (
        f", {progress} progress-bar line(s)" if progress else ""
    )
    skipped = f"; skipped: {c.skipped[0].source}: {c.skipped[0].reason}" if c.skipped else ""
    return f"nothing recognised: read {what}, and no line is an NCCL, PyTorch, launcher or kernel log line nccllog knows{skipped}"
