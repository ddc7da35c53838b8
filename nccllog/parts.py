"""Two phases: a *part* (one Parquet file) holds what reading some of a job's files found, and
``analyze`` merges parts (and plain logs) as if every file had been read in one pass.

A part carries only what is decided per file: each file's candidate lines (the reader's
``source, line, text, kw``: keyword hits and the file's last lines), its statistics (lines,
bytes, decoding, cut lines, counted high-volume lines, modification time for missing years), the
inputs and files skipped with their reasons, and the Flight Recorder dumps, typed. Everything
that needs the whole data set (ranks from pid maps, hosts, world size, node blocks, years, clock
offsets, the dumps' ranks) and the pattern matching itself run after the merge, so any split of
the files into parts gives the same analysis as one pass. The format is in docs/scale.md.

A part is untrusted input like any log: it is recognised by content (``PAR1``), its schema
version, columns and types are checked, and its values are validated (the dumps through the
same checks as a dump file) before anything else sees them; a part that fails is skipped with
one reason. Parts written with other prefilter keywords (other ``--patterns``, another nccllog)
are refused, since the lines they kept are not the lines this analysis would keep.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import polars as pl

from nccllog.errors import UsageError
from nccllog.ingest import flight as flight_dumps
from nccllog.ingest.flight import Dump, NotADump
from nccllog.ingest.reader import (
    CANDIDATE_SCHEMA,
    DEFAULT_MAX_DECOMPRESSED,
    DEFAULT_MAX_TOTAL_DECOMPRESSED,
    MAX_LINE_BYTES,
    SAMPLED_KEEP,
    TAIL_LINES,
    FileStats,
    ReadResult,
    read_sources,
)
from nccllog.ingest.sources import Source, expand_inputs
from nccllog.ingest.unpack import sniff
from nccllog.match.keywords import prefilter_keywords, sampled_first, sampled_keep, sampled_keywords
from nccllog.match.library import Library, load_library
from nccllog.model import Skipped

PART_VERSION = 1
TABLE = "part.table"
# What a rejected part's reason starts with; the command line shows these as `skipped <file>: …`.
REJECTED = "not read as an nccllog part: "
_MIN_TIME, _MAX_TIME = datetime(1900, 1, 1), datetime(2200, 1, 1)

# One table, one row kind per value of `part.table`; each kind fills its own columns (the rest null).
PART_SCHEMA: dict[str, Any] = {
    TABLE: pl.String,  # meta | file | line | skip | dump
    "part.version": pl.Int64,  # meta: PART_VERSION
    "part.keywords": pl.String,  # meta: digest of the prefilter the lines were kept with
    "source": pl.String,  # file, line, skip, dump: the file's display name
    "line": pl.Int64,  # line: 1-based line number
    "text": pl.String,  # line: the line (cut at MAX_LINE_BYTES characters)
    "kw": pl.List(pl.String),  # line: the prefilter keywords in it
    "file.index": pl.Int64,  # file: read order within the part
    "file.lines": pl.Int64,
    "file.bytes": pl.Int64,
    "file.decode_replacements": pl.Int64,
    "file.truncated_lines": pl.Int64,
    "file.sampled_out": pl.Int64,
    "file.mtime": pl.Datetime("us"),  # local time, as the reader records it
    "file.encoding": pl.String,
    "skip.reason": pl.String,
    "skip.lines": pl.String,
    "skip.file": pl.Int64,  # skip: the file row it belongs to; null for an input skipped before reading
    "dump.json": pl.String,  # dump: the typed dump as Flight Recorder JSON (read back by ingest.flight)
    "dump.format": pl.String,  # dump: pickle | json, the format of the original file
}
_TABLES = ("meta", "file", "line", "skip", "dump")
_FILE_COUNTS = ("lines", "bytes", "decode_replacements", "truncated_lines", "sampled_out")


@dataclass(frozen=True)
class Extraction:
    """What reading some inputs found, before any pattern is matched: the reader's candidate lines
    and per-file statistics, the Flight Recorder dumps, and the inputs skipped before reading."""

    read: ReadResult
    dumps: tuple[Dump, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    keywords: str = ""  # keyword_digest of the library the lines were kept with


def keyword_digest(library: Library) -> str:
    """What decides which lines a reader keeps: the prefilter's keywords and the reader's limits."""
    facts = {
        "keywords": prefilter_keywords(library),
        "sampled": sampled_keywords(library),
        "keep": sampled_keep(library),
        "first": sampled_first(library),
        "tail": TAIL_LINES,
        "sampled_keep": SAMPLED_KEEP,
        "max_line": MAX_LINE_BYTES,
    }
    data = json.dumps(facts, sort_keys=True, ensure_ascii=True).encode()
    return "sha256:" + hashlib.sha256(data).hexdigest()


def collect(
    sources: Sequence[Source],
    skipped: Sequence[Skipped],
    library: Library,
    *,
    max_decompressed: int,
    max_total_decompressed: int,
    progress: Callable[[int, int], None] | None = None,
) -> Extraction:
    """Read ``sources`` (parts, dumps and logs, told apart by content) into one Extraction."""
    limits = {"max_decompressed": max_decompressed, "max_total_decompressed": max_total_decompressed}
    return merge(*read_apart(sources, skipped, library, **limits, progress=progress))


def read_apart(
    sources: Sequence[Source],
    skipped: Sequence[Skipped],
    library: Library,
    *,
    max_decompressed: int,
    max_total_decompressed: int,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[Extraction, list[Extraction]]:
    """What ``collect`` reads, before it merges: the dumps and logs read here (parts that are not
    valid skipped with the reason) and the valid parts among the sources."""
    digest = keyword_digest(library)
    texts, parts, refused = partition(list(sources), digest)
    texts, dumps, not_dumps = flight_dumps.partition(texts)
    read = read_sources(
        texts,
        prefilter_keywords(library),
        sampled=sampled_keywords(library),
        keep=sampled_keep(library),
        keep_first=sampled_first(library),
        max_decompressed=max_decompressed,
        max_total_decompressed=max_total_decompressed,
        progress=progress,
    )
    return Extraction(read, tuple(dumps), (*skipped, *refused, *not_dumps), digest), parts


def extract(
    inputs: Sequence[str | Path],
    *,
    patterns: Sequence[str | Path] = (),
    library: Library | None = None,
    shard: tuple[int, int] | None = None,
    prefix: str | None = None,
    stdin: bytes | IO[bytes] | None = None,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
    max_total_decompressed: int = DEFAULT_MAX_TOTAL_DECOMPRESSED,
    progress: Callable[[int, int], None] | None = None,
) -> Extraction:
    """Read ``inputs`` (paths, directories, globs, ``-``) into an Extraction, ready for ``write_part``.

    ``shard=(i, n)`` reads only the i-th of n shares of the input files (0 <= i < n): every n-th
    file of the files sorted by name, starting at the i-th, so n array tasks given the same inputs
    read every file once. ``prefix`` goes before every file name (``node7/logs/rank_3.log``), for
    nodes that write the same local paths. ``patterns`` (or a loaded ``library``) must be those the
    analysis will use.
    """
    library = library or load_library(list(patterns))
    sources, skipped = expand_inputs(inputs, stdin=stdin)
    if shard is not None:
        i, n = shard
        if not 0 <= i < n:
            raise UsageError(f"shard {i}/{n}: the index must be at least 0 and below {n}")
        sources = sorted(sources, key=lambda s: s.name)[i::n]
    if prefix:
        sources = [dataclasses.replace(s, name=f"{prefix.rstrip('/')}/{s.name}") for s in sources]
    return collect(
        sources,
        skipped,
        library,
        max_decompressed=max_decompressed,
        max_total_decompressed=max_total_decompressed,
        progress=progress,
    )


def partition(sources: list[Source], keywords: str) -> tuple[list[Source], list[Extraction], list[Skipped]]:
    """Split off the sources that are Parquet files: valid parts are read, others refused."""
    rest: list[Source] = []
    parts: list[Extraction] = []
    refused: list[Skipped] = []
    for src in sources:
        if src.stream is not None or not _is_parquet(src):
            rest.append(src)
            continue
        got = read_part(src, keywords)
        if isinstance(got, Skipped):
            refused.append(got)
        else:
            parts.append(got)
    return rest, parts, refused


def _is_parquet(src: Source) -> bool:
    if src.data is not None:
        return sniff(src.data[:8]) == "parquet"
    assert src.path is not None
    try:
        with open(src.path, "rb") as fh:
            return sniff(fh.read(8)) == "parquet"
    except OSError:
        return False  # the text reader reports it


def merge(base: Extraction, parts: Sequence[Extraction]) -> Extraction:
    """``base`` with the parts added, as one pass over all their files would have read them.

    A file name already read (from a plain log or an earlier part) is read once: a second copy
    with the same statistics is the same file given twice and is dropped, as one pass drops a
    file named twice; a different file of the same name is skipped with the reason (nodes that
    write the same local paths need ``extract --prefix``).
    """
    if not parts:
        return base
    seen: dict[str, tuple[Any, ...]] = {st.source: _identity(st) for st in base.read.stats}
    seen.update((d.source, ("dump",)) for d in base.dumps)
    frames = [base.read.lines]
    stats = list(base.read.stats)
    dumps = list(base.dumps)
    skipped = list(base.skipped)
    for part in parts:
        own = {st.source: _identity(st) for st in part.read.stats}
        own.update((d.source, ("dump",)) for d in part.dumps)
        clash = {name for name in own if name in seen}
        for name in sorted(clash):
            if own[name] != seen[name]:
                reason = "another file of this name was read already; not merged (extract with --prefix)"
                skipped.append(Skipped(source=name, reason=reason))
        frames.append(part.read.lines.filter(~pl.col("source").is_in(sorted(clash))))
        stats.extend(st for st in part.read.stats if st.source not in clash)
        dumps.extend(d for d in part.dumps if d.source not in clash)
        skipped.extend(s for s in part.skipped if s not in skipped)  # shards repeat input-level skips
        seen.update((k, v) for k, v in own.items() if k not in clash)
    lines = pl.concat(frames, how="vertical").sort("source", "line", maintain_order=True)
    dumps.sort(key=lambda d: d.source)
    return Extraction(
        ReadResult(lines=lines, stats=tuple(stats)), tuple(dumps), tuple(skipped), base.keywords
    )


def _identity(st: FileStats) -> tuple[Any, ...]:
    return (st.lines, st.bytes, st.mtime)


# --------------------------------------------------------------------------- writing


def to_frame(ex: Extraction) -> pl.DataFrame:
    """The part of ``ex`` as one table (``PART_SCHEMA``)."""
    stats = ex.read.stats
    tables = [
        pl.DataFrame({"part.version": [PART_VERSION], "part.keywords": [ex.keywords]}).with_columns(
            pl.lit("meta").alias(TABLE)
        ),
        ex.read.lines.select(list(CANDIDATE_SCHEMA)).with_columns(pl.lit("line").alias(TABLE)),
    ]
    if stats:
        files: dict[str, list[Any]] = {
            "source": [st.source for st in stats],
            "file.index": list(range(len(stats))),
            "file.mtime": [st.mtime for st in stats],
            "file.encoding": [st.encoding for st in stats],
        }
        files.update({f"file.{c}": [getattr(st, c) for st in stats] for c in _FILE_COUNTS})
        tables.append(_typed(files).with_columns(pl.lit("file").alias(TABLE)))
    skips = [(s, i) for i, st in enumerate(stats) for s in st.skipped] + [(s, None) for s in ex.skipped]
    if skips:
        rows: dict[str, list[Any]] = {
            "source": [s.source for s, _ in skips],
            "skip.reason": [s.reason for s, _ in skips],
            "skip.lines": [s.lines for s, _ in skips],
            "skip.file": [i for _, i in skips],
        }
        tables.append(_typed(rows).with_columns(pl.lit("skip").alias(TABLE)))
    if ex.dumps:
        dumps: dict[str, list[Any]] = {
            "source": [d.source for d in ex.dumps],
            "dump.json": [dump_json(d) for d in ex.dumps],
            "dump.format": [d.fmt for d in ex.dumps],
        }
        tables.append(_typed(dumps).with_columns(pl.lit("dump").alias(TABLE)))
    full = [
        t.select(
            [
                (pl.col(c) if c in t.columns else pl.lit(None)).cast(dt).alias(c)
                for c, dt in PART_SCHEMA.items()
            ]
        )
        for t in tables
    ]
    return pl.concat(full, how="vertical")


def _typed(columns: dict[str, list[Any]]) -> pl.DataFrame:
    return pl.DataFrame(columns, schema={c: PART_SCHEMA[c] for c in columns})


def to_bytes(ex: Extraction) -> bytes:
    """The part as Parquet bytes (zstd)."""
    buf = io.BytesIO()
    to_frame(ex).write_parquet(buf, compression="zstd", statistics=False)
    return buf.getvalue()


def write_part(ex: Extraction, path: str | Path) -> int:
    """Write the part to ``path`` (atomically: a temporary file renamed); returns its size."""
    data = to_bytes(ex)
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, target)
    return len(data)


def dump_json(d: Dump) -> str:
    """A typed dump as Flight Recorder JSON, which ``ingest.flight.parse`` reads back to the same Dump."""
    obj = {
        "version": d.version,
        "comm_lib_version": d.nccl_version,
        "pg_config": {
            k: {"ranks": "[" + ", ".join(str(r) for r in ranks) + "]", "desc": d.pg_desc.get(k, "")}
            for k, ranks in d.pg_ranks.items()
        },
        "pg_status": {
            k: {
                "last_enqueued_collective": s.last_enqueued,
                "last_started_collective": s.last_started,
                "last_completed_collective": s.last_completed,
            }
            for k, s in d.pg_status.items()
        },
        "entries": [
            {
                **{f.name: getattr(e, f.name) for f in dataclasses.fields(e) if f.name not in ("frames",)},
                "process_group": [e.pg_name, e.pg_desc],
                "frames": [{"name": f.name, "filename": f.filename, "line": f.line} for f in e.frames],
            }
            for e in d.entries
        ],
    }
    return json.dumps(obj, sort_keys=True, ensure_ascii=True, separators=(",", ":"))


# --------------------------------------------------------------------------- reading


class _Corrupt(Exception):
    """The part fails a check; the message says which."""


def read_part(src: Source, keywords: str) -> Extraction | Skipped:
    """The part in ``src``, validated, or a Skipped entry saying why it is not read."""
    try:
        return _read(src, keywords)
    except _Corrupt as exc:
        return Skipped(source=src.name, reason=REJECTED + str(exc))
    except MemoryError:
        return Skipped(source=src.name, reason=REJECTED + "too large to read into memory")
    except (
        Exception,
        pl.exceptions.PanicException,
    ) as exc:  # a damaged file can fail anywhere in the decoder
        detail = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
        return Skipped(source=src.name, reason=REJECTED + f"damaged Parquet file ({detail})")


def _read(src: Source, keywords: str) -> Extraction:
    where: Any = io.BytesIO(src.data) if src.data is not None else src.path
    schema = dict(pl.read_parquet_schema(where))
    if TABLE not in schema:
        raise _Corrupt(f"a Parquet file without a '{TABLE}' column (not written by nccllog extract)")
    version = schema.get("part.version")
    if version is not None and version.is_integer():  # any later version says which it is
        versions = pl.read_parquet(_rewind(where), columns=["part.version"]).get_column("part.version")
        found = sorted({v for v in versions.to_list() if v is not None})
        if found and found != [PART_VERSION]:
            raise _Corrupt(
                f"part schema version {found[0]}; this nccllog reads version {PART_VERSION} (extract it again)"
            )
    for name, dtype in PART_SCHEMA.items():
        if name not in schema:
            raise _Corrupt(f"column '{name}' is missing")
        if schema[name] != dtype:
            raise _Corrupt(f"column '{name}' is {schema[name]}, not {dtype}")
    extra = sorted(set(schema) - set(PART_SCHEMA))
    if extra:
        raise _Corrupt(f"unexpected column '{extra[0][:60]}'")
    df = pl.read_parquet(_rewind(where))
    return _validated(df, src.name, keywords)


def _rewind(where: Any) -> Any:
    if isinstance(where, io.BytesIO):
        where.seek(0)
    return where


def _validated(df: pl.DataFrame, name: str, keywords: str) -> Extraction:
    table = df.get_column(TABLE)
    if table.null_count() or not table.is_in(list(_TABLES)).all():
        raise _Corrupt(f"'{TABLE}' holds a value other than {', '.join(_TABLES)}")
    meta = df.filter(pl.col(TABLE) == "meta")
    if meta.height != 1 or meta.item(0, "part.version") != PART_VERSION:
        raise _Corrupt("no single meta row of schema version 1")
    if meta.item(0, "part.keywords") != keywords:
        raise _Corrupt(
            "extracted with other prefilter keywords (other --patterns or another nccllog version);"
            " extract it again with the same patterns"
        )
    files = df.filter(pl.col(TABLE) == "file").sort("file.index")
    lines = df.filter(pl.col(TABLE) == "line").select(list(CANDIDATE_SCHEMA))
    skips = df.filter(pl.col(TABLE) == "skip")
    dump_rows = df.filter(pl.col(TABLE) == "dump")
    _require(files, ["source", "file.index", "file.encoding", *(f"file.{c}" for c in _FILE_COUNTS)], "file")
    if files.get_column("file.index").to_list() != list(range(files.height)):
        raise _Corrupt("file rows are not numbered 0..n-1")
    for c in _FILE_COUNTS:
        if files.height and files.get_column(f"file.{c}").min() < 0:  # type: ignore[operator]
            raise _Corrupt(f"negative file.{c}")
    mtimes = files.get_column("file.mtime").drop_nulls()
    if mtimes.len() and (mtimes.min() < _MIN_TIME or mtimes.max() >= _MAX_TIME):  # type: ignore[operator]
        raise _Corrupt("a file time outside 1900-2200")
    _require(lines, list(CANDIDATE_SCHEMA), "line")
    if lines.height:
        if lines.get_column("line").min() < 1:  # type: ignore[operator]
            raise _Corrupt("a line number below 1")
        if lines.get_column("text").str.len_chars().max() > MAX_LINE_BYTES:  # type: ignore[operator]
            raise _Corrupt("a line longer than the reader keeps")
        if lines.get_column("kw").list.eval(pl.element().is_null().any()).explode().any():
            raise _Corrupt("a null keyword")
        known = set(files.get_column("source").to_list())
        if not set(lines.get_column("source").unique().to_list()) <= known:
            raise _Corrupt("lines of a file the part does not list")
    _require(skips, ["source", "skip.reason"], "skip")
    index = skips.get_column("skip.file").drop_nulls()
    if index.len() and (index.min() < 0 or index.max() >= files.height):  # type: ignore[operator]
        raise _Corrupt("a skip row names no file row")
    _require(dump_rows, ["source", "dump.json", "dump.format"], "dump")
    stats = [
        FileStats(
            source=r["source"],
            mtime=r["file.mtime"],
            encoding=r["file.encoding"],
            **{c: r[f"file.{c}"] for c in _FILE_COUNTS},
        )
        for r in files.iter_rows(named=True)
    ]
    before: list[Skipped] = []
    for source, reason, span, i in skips.select(
        "source", "skip.reason", "skip.lines", "skip.file"
    ).iter_rows():
        entry = Skipped(source=source, reason=reason, lines=span)
        (before if i is None else stats[i].skipped).append(entry)
    dumps = tuple(_dump(*row) for row in dump_rows.select("source", "dump.json", "dump.format").iter_rows())
    lines = lines.sort("source", "line", maintain_order=True)
    return Extraction(ReadResult(lines=lines, stats=tuple(stats)), dumps, tuple(before), keywords)


def _require(rows: pl.DataFrame, columns: list[str], kind: str) -> None:
    for c in columns:
        if rows.get_column(c).null_count():
            raise _Corrupt(f"a {kind} row without '{c}'")


def _dump(source: str, data: str, fmt: str) -> Dump:
    if fmt not in ("pickle", "json"):
        raise _Corrupt(f"dump format {fmt[:20]!r}")
    try:
        dump = flight_dumps.parse(data.encode("utf-8"), source)
    except NotADump as exc:
        raise _Corrupt(f"its Flight Recorder dump {source[:80]!r} is not valid ({exc})") from None
    return dataclasses.replace(dump, fmt=fmt)
