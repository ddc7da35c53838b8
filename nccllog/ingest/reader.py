"""Read sources into candidate lines, keeping memory bounded and never dropping a line silently.

The hot path is vectorised: each chunk of a file becomes a one-column polars frame (one row per
physical line), and only lines containing a pattern keyword (Aho-Corasick in polars) — plus the
last few lines of each file, which tell when a rank was last heard of — leave this module.
Everything else is only counted.
"""

from __future__ import annotations

import contextlib
import functools
import io
import itertools
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, Any, cast

import polars as pl
import regex

from nccllog.ingest.decode import Decoded, normalise
from nccllog.ingest.sources import Source
from nccllog.ingest.unpack import Budget, Leaf, open_leaves
from nccllog.model import Skipped
from nccllog.schema import LINES

CHUNK_BYTES = 32 * 1024 * 1024
MAX_LINE_BYTES = 1024 * 1024  # longer lines are cut here for analysis (and counted)
TAIL_LINES = 3
DEFAULT_MAX_DECOMPRESSED = 8 * 1024**3  # per compressed file or archive member, and for stdin
DEFAULT_MAX_TOTAL_DECOMPRESSED = 32 * 1024**3  # over all inputs together
# Single-byte column separators that log text practically never contains; a chunk that holds
# all of them (binary junk) is split in Python instead.
_SEPARATORS = (b"\x1f", b"\x1e", b"\x1d", b"\x1c", b"\x01")
_REPLACEMENT_UTF8 = "\ufffd".encode()

BATCH_BYTES = 16 * 1024 * 1024  # larger batches cost memory (two are in flight) and gain no speed
SAMPLED_KEEP = 4  # high-volume lines kept per writing process of a file (the last ones), unless
# the line's patterns ask for more (``keep``: NCCL's COLL lines, compared call by call across ranks)
# The writer of an NCCL line (`host:pid:` of its `host:pid:tid [dev]` header), wherever the header
# stands after launcher prefixes; lines without one are thinned per file.
_WRITER = r"([\w.-]+:\d+):\d+ (?:\[\d+\] )?NCCL "
PARALLEL_SLICES = 4  # the keyword test runs over this many slices of a batch at once
CANDIDATE_SCHEMA: dict[str, Any] = LINES
CANDIDATE_COLUMNS = list(CANDIDATE_SCHEMA)
# Bytes that make a file look like text; a first chunk with more than 30% others is binary.
_TEXT_BYTES = bytes(range(0x20, 0x100)) + b"\t\n\r\x0c\x1b"


@dataclass
class FileStats:
    """What reading one source found."""

    source: str
    lines: int = 0
    bytes: int = 0
    decode_replacements: int = 0
    truncated_lines: int = 0
    sampled_out: int = 0  # high-volume progress lines counted but not kept (see read_sources)
    mtime: datetime | None = None  # the file's modification time (local), for years the lines omit
    skipped: list[Skipped] = field(default_factory=list)
    encoding: str = "utf-8"


@dataclass(frozen=True)
class ReadResult:
    """Candidate lines of every source, and per-source statistics."""

    lines: pl.DataFrame  # CANDIDATE_SCHEMA, ordered by source then line
    stats: tuple[FileStats, ...]
    decompressed: int = 0  # bytes inflated, counted against the limit over all inputs


def read_sources(
    sources: Sequence[Source],
    keywords: Sequence[str],
    *,
    sampled: Sequence[str] = (),
    keep: Mapping[str, int] | None = None,
    keep_first: Sequence[str] = (),
    keep_all: bool = False,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
    max_total_decompressed: int = DEFAULT_MAX_TOTAL_DECOMPRESSED,
    progress: Callable[[int, int], None] | None = None,
) -> ReadResult:
    """Read every source and keep the lines that contain any keyword, plus each file's last lines.

    The result has the columns source, line, text and kw (the keywords found in the line).
    Lines whose only keywords are ``sampled`` ones (high-volume progress lines such as NCCL's
    per-collective ``opCount`` lines) are counted, and only the last ``SAMPLED_KEEP`` of each writing
    process of each file (one console may interleave many ranks' NCCL lines)
    are kept: they matter for where each rank stopped, not one by one. ``keep`` gives other counts
    for the lines of some of those keywords (the largest where a line has several); lines of a
    ``keep_first`` keyword also keep each writer's first ``SAMPLED_KEEP``.
    ``keep_all`` keeps every line (for per-line attribution listings, not for analysis).
    ``progress(done, total)`` is called as input bytes (on disk, compressed) are consumed.
    Sources are opened by content (``unpack``): compressed data and archives are read whatever
    their names, inflated against ``max_decompressed`` per file (and per standard input) and
    ``max_total_decompressed`` over all inputs; archive members are read as files of their own.
    Small files are read whole and processed many at a time, so that the per-query cost of
    polars is paid per batch, not per file; large files are read in bounded chunks.
    """
    kw = _Keywords(
        tuple(keywords),
        tuple(k for k in sampled if k not in keywords),
        tuple(sorted((k, n) for k, n in (keep or {}).items() if k in sampled and k not in keywords)),
        tuple(k for k in keep_first if k in sampled and k not in keywords),
    )
    frames: list[pl.DataFrame] = []
    stats: list[FileStats] = []
    batch = _Batch(kw, keep_all)
    on_bytes = _progress_counter(sources, progress) if progress is not None else None
    budget = Budget(per_file=max_decompressed, total=max_total_decompressed)
    # While polars splits and filters one batch (without the GIL), this thread reads the next.
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending: list[Future[list[pl.DataFrame]]] = []
        for src in sources:
            for leaf, st, blocks in _leaves(src, budget, on_bytes):
                stats.append(st)
                if blocks is None:
                    continue
                first = next(blocks, None)
                second = next(blocks, None) if first is not None else None
                if first is not None and second is None:
                    data = _first_chunk(first, st)
                    if data is not None:
                        st.bytes = len(first)
                        batch.add(st.source, data, st)
                        if batch.size >= BATCH_BYTES:
                            if len(pending) >= 2:  # bound the memory held by batches in flight
                                frames.extend(pending.pop(0).result())
                            pending.append(pool.submit(batch.flush))
                            batch = _Batch(kw, keep_all)
                elif first is not None and second is not None:
                    chained = itertools.chain((first, second), blocks)
                    frames.extend(_read_chunked(chained, kw, keep_all, st))
                _finish(leaf, st)
        pending.append(pool.submit(batch.flush))
        for fut in pending:
            frames.extend(fut.result())
    if frames:
        lines = pl.concat(frames, how="vertical")
        if not in_file_order(lines):  # mostly read in that order already: no copy by a sort then
            lines = lines.sort("source", "line", maintain_order=True)
    else:
        lines = pl.DataFrame(schema=CANDIDATE_SCHEMA)
    return ReadResult(lines=lines, stats=tuple(stats), decompressed=budget.used)


def in_file_order(rows: pl.DataFrame) -> bool:
    """Whether the rows are in (source, line) order already, with no null in either (then a
    stable sort by them would leave the table as it is; checking neighbours is cheaper than it)."""
    if rows.height < 2:
        return True
    if rows["source"].null_count() or rows["line"].null_count():
        return False
    src, line = pl.col("source"), pl.col("line")
    step = (src.shift(1) < src) | ((src.shift(1) == src) & (line.shift(1) <= line))
    return bool(rows.select(step.slice(1).all()).item())


def _progress_counter(
    sources: Sequence[Source], progress: Callable[[int, int], None]
) -> Callable[[int], None]:
    total = 0
    for src in sources:
        if src.data is not None:
            total += len(src.data)
        elif src.path is not None:
            with contextlib.suppress(OSError):
                total += src.path.stat().st_size
    done = [0]

    def on_bytes(n: int) -> None:
        done[0] += n
        progress(min(done[0], total), total)

    progress(0, total)
    return on_bytes


class _Batch:
    """Whole small files waiting to be split and filtered together in one polars pass."""

    def __init__(self, keywords: _Keywords, keep_all: bool) -> None:
        self.keywords = keywords
        self.keep_all = keep_all
        self.names: list[str] = []
        self.parts: list[bytes] = []
        self.stats: list[FileStats] = []
        self.size = 0

    def add(self, name: str, data: bytes, st: FileStats) -> None:
        if not data.endswith(b"\n"):
            data += b"\n"
        _count_replacements(data, st)
        st.lines = data.count(b"\n")
        self.names.append(name)
        self.parts.append(data)
        self.stats.append(st)
        self.size += len(data)

    def flush(self) -> list[pl.DataFrame]:
        if not self.parts:
            return []
        counts = [st.lines for st in self.stats]
        df = _split_lines(b"".join(self.parts))
        if df.height != sum(counts):
            # The fast splitter disagreed with the newline count (should not happen); split file by file.
            df = pl.concat([_split_lines(p) for p in self.parts])
        files = pl.DataFrame(
            {"fid": range(len(counts)), "n": counts}, schema={"fid": pl.Int64, "n": pl.Int64}
        )
        per_line = files.select(
            pl.col("fid").repeat_by("n").explode(),
            pl.int_ranges(1, pl.col("n") + 1, dtype=pl.Int64).explode().alias("line"),
            pl.col("n").repeat_by("n").explode(),
        )
        df = pl.concat([df, per_line], how="horizontal")
        kept, frequent = _filter(df, self.keywords, self.keep_all, tail_from=pl.col("n") - TAIL_LINES)
        if not self.keep_all:
            kept = _compact(kept)
        self._count_truncated(df)
        if frequent.height:
            thinned = _thin(frequent, ["fid"], self.keywords)
            for fid, seen in frequent.group_by("fid").len().iter_rows():
                self.stats[fid].sampled_out += seen
            for fid, left in thinned.group_by("fid").len().iter_rows():
                self.stats[fid].sampled_out -= left
            kept = pl.concat([kept, _compact(thinned.select(kept.columns))]).sort("fid", "line")
        out = _with_keywords(kept, self.keywords)
        names = pl.Series("names", self.names, dtype=pl.String)
        out = out.with_columns(pl.lit(names).gather(pl.col("fid")).alias("source"))
        return [out.select(CANDIDATE_COLUMNS)]

    def _count_truncated(self, df: pl.DataFrame) -> None:
        long = df.filter(pl.col("text").str.len_bytes() > MAX_LINE_BYTES)
        for fid in long["fid"].to_list():
            self.stats[fid].truncated_lines += 1


@dataclass(frozen=True)
class _Keywords:
    """Prefilter keywords: lines with ``always`` ones are kept; ``sampled``-only lines are thinned."""

    always: tuple[str, ...]
    sampled: tuple[str, ...] = ()
    keep: tuple[tuple[str, int], ...] = ()  # sampled keywords kept other than SAMPLED_KEEP times
    first: tuple[str, ...] = ()  # sampled keywords whose writers' first lines are kept too

    @property
    def all(self) -> list[str]:
        return [*self.always, *self.sampled]


def _filter(
    df: pl.DataFrame, keywords: _Keywords, keep_all: bool, tail_from: pl.Expr
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Split off the lines worth matching: (keyword and tail lines, sampled-keyword-only lines).

    The test runs as one literal alternation through polars' regex engine (faster here than
    its Aho-Corasick ``contains_any``), over slices evaluated in parallel.
    """
    if keep_all:
        return df, df.clear()
    keep = pl.col("line") > tail_from
    if keywords.always:
        keep = keep | pl.col("text").str.contains(_alternation(keywords.always))
    frequent = pl.lit(False)
    if keywords.sampled:
        frequent = ~pl.col("_keep") & pl.col("text").str.contains(_alternation(keywords.sampled))
    step = max(df.height // PARALLEL_SLICES + 1, 1)
    # The keyword alternation is evaluated once per line: ``_keep`` is a column, not an
    # expression repeated in the filter (that evaluated it twice).
    parts = [
        df.slice(i, step)
        .lazy()
        .with_columns(keep.alias("_keep"))
        .with_columns(frequent.alias("_frequent"))
        .filter(pl.col("_keep") | pl.col("_frequent"))
        .drop("_keep")
        for i in range(0, df.height, step)
    ]
    if not parts:
        return df.clear(), df.clear()
    both = pl.concat(pl.collect_all(parts))
    return (
        both.filter(~pl.col("_frequent")).drop("_frequent"),
        both.filter(pl.col("_frequent")).drop("_frequent"),
    )


def _thin(frequent: pl.DataFrame, by: list[str], keywords: _Keywords) -> pl.DataFrame:
    """The last ``SAMPLED_KEEP`` high-volume lines of each writer (within ``by``), in line order;
    lines of a keyword in ``keywords.keep`` are counted apart and kept that many times, and those of
    a keyword in ``keywords.first`` keep the writer's first ``SAMPLED_KEEP`` too."""
    writer = pl.col("text").str.extract(_WRITER, 1).fill_null("").alias("_writer")
    limit: pl.Expr = pl.lit(SAMPLED_KEEP)
    for k, n in sorted(keywords.keep, key=lambda kn: kn[1]):  # the largest is tested first
        limit = pl.when(pl.col("text").str.contains(k, literal=True)).then(pl.lit(n)).otherwise(limit)
    head: pl.Expr = pl.lit(False)
    for k in keywords.first:
        head = head | pl.col("text").str.contains(k, literal=True)
    group = [*by, "_writer", "_keep", "_head"]
    from_start = pl.int_range(pl.len()).over(group)
    from_end = pl.len().over(group) - from_start
    return (
        frequent.with_columns(writer, limit.alias("_keep"), head.alias("_head"))
        .filter((pl.col("_head") & (from_start < SAMPLED_KEEP)) | (from_end <= pl.col("_keep")))
        .sort([*by, "line"])
        .select(frequent.columns)
    )


def _compact(df: pl.DataFrame) -> pl.DataFrame:
    """Copy the kept lines' text out of the batch's buffers.

    Polars strings are views into the buffers they were split from: without this copy, a few
    kept lines would pin every batch in memory (measured: peak RSS 1.2 GB instead of 0.2 GB for
    1 GiB of logs).
    """
    return df.with_columns(pl.Series("text", df["text"].to_list(), dtype=pl.String))


def _with_keywords(df: pl.DataFrame, keywords: _Keywords) -> pl.DataFrame:
    """Add the ``kw`` list column (the keywords present in each line) and cap line length."""
    kw = (
        pl.col("text").str.extract_many(keywords.all, overlapping=True)
        if keywords.all
        else pl.lit([], dtype=pl.List(pl.String))
    )
    return df.with_columns(pl.col("text").str.slice(0, MAX_LINE_BYTES), kw.alias("kw"))


@functools.lru_cache(maxsize=8)
def _alternation(keywords: tuple[str, ...]) -> str:
    """A regex matching any of the literal keywords (escaped for polars' Rust regex syntax)."""
    return "|".join(regex.sub(r"([\\.+*?()|\[\]{}^$])", r"\\\1", k) for k in keywords)


def _read_chunked(
    blocks: Iterator[bytes], keywords: _Keywords, keep_all: bool, st: FileStats
) -> list[pl.DataFrame]:
    """A large file, chunk by chunk: memory stays bounded by the chunk size."""
    frames: list[pl.DataFrame] = []
    tail: pl.DataFrame | None = None
    recent: pl.DataFrame | None = None  # the last sampled-keyword lines seen so far
    frequent_seen = 0
    line_no = 0
    first = True
    for chunk in _chunks(blocks, st):
        if first:
            first = False
            checked = _first_chunk(chunk, st)
            if checked is None:
                return []
            chunk = checked
        _count_replacements(chunk, st)
        df = _split_lines(chunk)
        n = df.height
        df = df.with_columns(pl.int_range(line_no + 1, line_no + n + 1, dtype=pl.Int64).alias("line"))
        st.truncated_lines += df.filter(pl.col("text").str.len_bytes() > MAX_LINE_BYTES).height
        hits, frequent = _filter(df, keywords, keep_all, tail_from=pl.lit(line_no + n))
        if not keep_all:
            hits = _compact(hits)
        if hits.height:
            frames.append(hits)
        if frequent.height:
            frequent_seen += frequent.height
            frequent = _compact(_thin(frequent, [], keywords))  # thin first: copying is the cost
            recent = frequent if recent is None else _thin(pl.concat([recent, frequent]), [], keywords)
        # The last chunk may hold fewer lines than the tail needs.
        last = _compact(df.tail(TAIL_LINES))
        tail = last if tail is None else pl.concat([tail, last]).tail(TAIL_LINES)
        line_no += n
    st.lines = line_no
    if recent is not None:
        st.sampled_out += frequent_seen - recent.height
        frames.append(recent)
    if tail is not None and not keep_all:
        frames.append(tail)
    if not frames:
        return []
    # A tail line may also be a keyword hit: keep one copy, in file order.
    out = _with_keywords(pl.concat(frames).unique(subset=["line"], keep="first").sort("line"), keywords)
    return [out.with_columns(pl.lit(st.source).alias("source")).select(CANDIDATE_COLUMNS)]


def _first_chunk(chunk: bytes, st: FileStats) -> bytes | None:
    """Skip binary files, judged by their first chunk; None means skip the file."""
    head = chunk[:8192]
    if head and len(head.translate(None, _TEXT_BYTES)) > len(head) * 0.3:
        st.skipped.append(Skipped(source=st.source, reason="binary file (not text)"))
        return None
    return chunk


def _count_replacements(data: bytes, st: FileStats) -> None:
    """Count the characters that lossy UTF-8 decoding will replace (U+FFFD already in the text excluded)."""
    if data.isascii():  # most logs; checked far faster than a decode
        return
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        decoded = data.decode("utf-8", "replace")
        st.decode_replacements += decoded.count("\ufffd") - data.count(_REPLACEMENT_UTF8)


def _split_lines(chunk: bytes) -> pl.DataFrame:
    """One row per physical line of ``chunk`` (which ends with a newline), decoded lossily."""
    if chunk == b"\n":
        return pl.DataFrame({"text": [""]})
    sep = next((s for s in _SEPARATORS if s not in chunk), None)
    if sep is None:
        text = chunk.decode("utf-8", "replace")
        return pl.DataFrame({"text": [ln.removesuffix("\r") for ln in text.split("\n")[:-1]]})
    return pl.read_csv(
        io.BytesIO(chunk),
        has_header=False,
        separator=sep.decode(),
        quote_char=None,
        new_columns=["text"],
        schema_overrides={"column_1": pl.String},
        encoding="utf8-lossy",
        infer_schema=False,
        raise_if_empty=False,
    ).with_columns(pl.col("text").fill_null(""))


def _chunks(blocks: Iterator[bytes], st: FileStats) -> Iterator[bytes]:
    """Yield chunks ending at a newline; lines longer than a chunk are cut and counted."""
    pending = b""
    dropping = False  # inside the remainder of an over-long line
    for block in blocks:
        st.bytes += len(block)
        if dropping:
            nl = block.find(b"\n")
            if nl < 0:
                continue
            block = block[nl + 1 :]
            dropping = False
        data = pending + block
        cut = data.rfind(b"\n")
        if cut < 0:
            if len(data) > MAX_LINE_BYTES:
                st.truncated_lines += 1
                yield data[:MAX_LINE_BYTES] + b"\n"
                pending, dropping = b"", True
            else:
                pending = data
            continue
        yield data[: cut + 1]
        pending = data[cut + 1 :]
    if pending:
        yield pending + b"\n"


def _leaves(
    src: Source, budget: Budget, on_bytes: Callable[[int], None] | None
) -> Iterator[tuple[Leaf, FileStats, Iterator[bytes] | None]]:
    """Each text stream of ``src`` (itself, its decompressed content, or its archive members) with
    its statistics and its blocks (UTF-8, hole skipped); blocks is None for a leaf not read."""
    mtime: datetime | None = None
    size: int | None = None
    raw: IO[bytes]
    if src.data is not None:
        raw = io.BytesIO(src.data)
    elif src.stream is not None:
        raw = src.stream
    else:
        assert src.path is not None
        try:
            raw = open(src.path, "rb")  # noqa: SIM115 - closed below
        except OSError as exc:
            st = FileStats(source=src.name)
            st.skipped.append(Skipped(source=src.name, reason=f"cannot open: {exc.strerror or exc}"))
            yield Leaf(src.name, None), st, None
            return
        with contextlib.suppress(OSError, OverflowError, ValueError):
            stat = os.fstat(raw.fileno())
            mtime = datetime.fromtimestamp(stat.st_mtime)
            size = stat.st_size if stat.st_size > 0 else None  # /proc-like files report 0
    counted = _Counted(raw, on_bytes, stdin_budget=budget if src.stream is not None else None)
    try:
        for leaf in open_leaves(src.name, cast(IO[bytes], counted), budget):
            st = FileStats(source=leaf.name, mtime=mtime)
            if leaf.stream is None:
                st.skipped.extend(Skipped(source=leaf.name, reason=p) for p in leaf.problems)
                yield leaf, st, None
                continue
            counted.problems = leaf.problems  # a read error cuts the leaf being read
            hint = size if leaf.stream is counted else None
            yield leaf, st, _decoded(leaf.stream, st, hint)
    finally:
        if src.stream is None:
            raw.close()


class _Counted(io.RawIOBase):
    """The raw input: reports progress, turns a read error into a problem of the leaf being read,
    and holds standard input to the per-file limit (a pipe has no end of its own)."""

    def __init__(
        self, raw: IO[bytes], on_bytes: Callable[[int], None] | None, stdin_budget: Budget | None
    ) -> None:
        self._raw, self._on_bytes, self._limit = raw, on_bytes, stdin_budget
        self.done = 0
        self.problems: list[str] = []

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return self._limit is None and self._raw.seekable()

    def seek(self, pos: int, whence: int = 0) -> int:
        self.done = self._raw.seek(pos, whence)
        return self.done

    def tell(self) -> int:
        return self._raw.tell()

    def readinto(self, b: Any) -> int:
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)

    def read(self, size: int | None = -1) -> bytes:
        want = CHUNK_BYTES if size is None or size < 0 else size
        if self._limit is not None:
            want = min(want, self._limit.per_file - self.done)
            if want <= 0:
                if self._raw.read(1):
                    self.problems.append(
                        f"standard input limit reached ({self._limit.per_file} bytes); the rest is unread"
                    )
                return b""
        try:
            data = self._raw.read(want)
        except OSError as exc:
            self.problems.append(f"read error after {self.done} bytes: {exc}")
            return b""
        self.done += len(data)
        if self._on_bytes is not None and data:
            self._on_bytes(len(data))
        return data


def _decoded(stream: IO[bytes], st: FileStats, size: int | None) -> Iterator[bytes]:
    """The leaf's blocks as UTF-8 with any leading hole skipped (``decode.normalise``)."""
    dec = Decoded()
    yield from normalise(_read_blocks(stream, size), dec)
    st.decode_replacements += dec.replacements
    st.encoding = dec.encoding
    if dec.only_nuls:
        st.skipped.append(Skipped(source=st.source, reason=f"only NUL bytes ({dec.hole}): a hole, no text"))
    elif dec.hole:
        st.skipped.append(
            Skipped(
                source=st.source,
                reason=f"leading hole of {dec.hole} NUL bytes skipped (the file was truncated while "
                "being written, e.g. logrotate copytruncate); the text after it was read",
            )
        )


def _read_blocks(stream: IO[bytes], size: int | None) -> Iterator[bytes]:
    # A file smaller than a chunk is read at its own size: asking for a whole chunk allocates
    # 32 MiB per file and fragments the heap (peak memory grew with file size).
    step = CHUNK_BYTES if size is None or size >= CHUNK_BYTES else size + 1
    while True:
        block = stream.read(step)
        if not block:
            return
        yield block


def _finish(leaf: Leaf, st: FileStats) -> None:
    """Problems found while the leaf was read (a cut, a limit): the lines from there on are unread."""
    for problem in leaf.problems:
        st.skipped.append(
            Skipped(source=st.source, reason=problem, lines=f"{st.lines + 1}-" if st.lines else None)
        )
