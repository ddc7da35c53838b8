"""Read sources into candidate lines, keeping memory bounded and never dropping a line silently.

The hot path is vectorised: each chunk of a file becomes a one-column polars frame (one row per
physical line), and only lines containing a pattern keyword (Aho-Corasick in polars) — plus the
last few lines of each file, which tell when a rank was last heard of — leave this module.
Everything else is only counted.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import polars as pl

from nccllog.ingest.sources import Source
from nccllog.model import Skipped

CHUNK_BYTES = 32 * 1024 * 1024
MAX_LINE_BYTES = 1024 * 1024  # longer lines are cut here for analysis (and counted)
TAIL_LINES = 3
DEFAULT_MAX_DECOMPRESSED = 8 * 1024**3
# Single-byte column separators that log text practically never contains; a chunk that holds
# all of them (binary junk) is split in Python instead.
_SEPARATORS = (b"\x1f", b"\x1e", b"\x1d", b"\x1c", b"\x01")
_REPLACEMENT_UTF8 = "\ufffd".encode()

CANDIDATE_SCHEMA = {"source": pl.String, "line": pl.Int64, "text": pl.String}


@dataclass
class FileStats:
    """What reading one source found."""

    source: str
    lines: int = 0
    bytes: int = 0
    decode_replacements: int = 0
    truncated_lines: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    encoding: str = "utf-8"
    on_bytes: Callable[[int], None] | None = None  # progress: called with input bytes consumed


@dataclass(frozen=True)
class ReadResult:
    """Candidate lines of every source, and per-source statistics."""

    lines: pl.DataFrame  # CANDIDATE_SCHEMA, ordered by source then line
    stats: tuple[FileStats, ...]


def read_sources(
    sources: Sequence[Source],
    keywords: Sequence[str] | None,
    *,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
    progress: Callable[[int, int], None] | None = None,
) -> ReadResult:
    """Read every source and keep the lines that contain any keyword, plus each file's last lines.

    ``keywords=None`` keeps every line (for per-line attribution listings, not for analysis).
    ``progress(done, total)`` is called as input bytes (on disk, compressed) are consumed.
    """
    frames: list[pl.DataFrame] = []
    stats: list[FileStats] = []
    kw = None if keywords is None else list(keywords)
    on_bytes = _progress_counter(sources, progress) if progress is not None else None
    for src in sources:
        st = FileStats(source=src.name, on_bytes=on_bytes)
        frames.extend(_read_one(src, kw, st, max_decompressed))
        stats.append(st)
    if frames:
        lines = pl.concat(frames, how="vertical")
    else:
        lines = pl.DataFrame(schema=CANDIDATE_SCHEMA)
    return ReadResult(lines=lines, stats=tuple(stats))


def _progress_counter(sources: Sequence[Source], progress: Callable[[int, int], None]) -> Callable[[int], None]:
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


def _read_one(src: Source, keywords: list[str] | None, st: FileStats, max_decompressed: int) -> list[pl.DataFrame]:
    frames: list[pl.DataFrame] = []
    tail: pl.DataFrame | None = None
    line_no = 0
    first = True
    for chunk in _chunks(src, st, max_decompressed):
        if first:
            first = False
            chunk = _first_chunk(chunk, st)
            if chunk is None:
                return []
        df = _split_lines(chunk, st)
        n = df.height
        if n == 0:
            continue
        df = df.with_columns(
            pl.lit(src.name).alias("source"),
            pl.int_range(line_no + 1, line_no + n + 1, dtype=pl.Int64).alias("line"),
            pl.col("text").fill_null(""),
        ).select("source", "line", "text")
        long = df.filter(pl.col("text").str.len_bytes() > MAX_LINE_BYTES)
        if long.height:
            st.truncated_lines += long.height
            df = df.with_columns(pl.col("text").str.slice(0, MAX_LINE_BYTES))
        if keywords is None:
            hits = df
        elif keywords:
            hits = df.filter(pl.col("text").str.contains_any(keywords))
        else:
            hits = df.clear()
        if hits.height:
            frames.append(hits)
        tail = df.tail(TAIL_LINES)
        line_no += n
    st.lines = line_no
    if tail is not None and tail.height:
        frames.append(tail)
    if not frames:
        return []
    # A tail line may also be a keyword hit: keep one copy, in file order.
    out = pl.concat(frames).unique(subset=["line"], keep="first", maintain_order=True)
    return [out.sort("line")]


def _first_chunk(chunk: bytes, st: FileStats) -> bytes | None:
    """Detect UTF-16 and binary files from their first chunk; None means skip the file."""
    if chunk[:2] in (b"\xff\xfe", b"\xfe\xff"):
        st.encoding = "utf-16"
        try:
            return chunk.decode("utf-16").encode("utf-8")
        except UnicodeDecodeError:
            st.skipped.append(Skipped(source=st.source, reason="UTF-16 file that does not decode"))
            return None
    head = chunk[:8192]
    if head:
        nul = head.count(b"\x00")
        # UTF-16 without a BOM: every other byte is NUL.
        if nul > len(head) // 3 and head[1::2].count(b"\x00") > len(head) // 3:
            try:
                st.encoding = "utf-16-le"
                return chunk.decode("utf-16-le").encode("utf-8")
            except UnicodeDecodeError:
                pass
        text_like = sum(1 for b in head if b >= 0x20 or b in (9, 10, 13))
        if text_like < len(head) * 0.7:
            st.skipped.append(Skipped(source=st.source, reason="binary file (not text)"))
            return None
    return chunk


def _split_lines(chunk: bytes, st: FileStats) -> pl.DataFrame:
    """One row per physical line of ``chunk`` (which ends at a line boundary), text decoded lossily."""
    try:
        chunk.decode("utf-8")
    except UnicodeDecodeError:
        decoded = chunk.decode("utf-8", "replace")
        st.decode_replacements += decoded.count("\ufffd") - chunk.count(_REPLACEMENT_UTF8)
    if chunk.endswith(b"\n"):
        chunk = chunk[:-1]
        if not chunk:
            return pl.DataFrame({"text": [""]})
    sep = next((s for s in _SEPARATORS if s not in chunk), None)
    if sep is None:
        text = chunk.decode("utf-8", "replace")
        return pl.DataFrame({"text": [ln.removesuffix("\r") for ln in text.split("\n")]})
    return pl.read_csv(
        io.BytesIO(chunk + b"\n"),
        has_header=False,
        separator=sep.decode(),
        quote_char=None,
        new_columns=["text"],
        schema_overrides={"column_1": pl.String},
        encoding="utf8-lossy",
        infer_schema=False,
        raise_if_empty=False,
    )


def _chunks(src: Source, st: FileStats, max_decompressed: int) -> Iterator[bytes]:
    """Yield chunks ending at a newline; lines longer than a chunk are cut and counted."""
    pending = b""
    dropping = False  # inside the remainder of an over-long line
    for block in _blocks(src, st, max_decompressed):
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
        yield pending


def _blocks(src: Source, st: FileStats, max_decompressed: int) -> Iterator[bytes]:
    if src.data is not None:
        raw: io.BufferedIOBase = io.BytesIO(src.data)  # type: ignore[assignment]
    else:
        assert src.path is not None
        try:
            raw = open(src.path, "rb")  # noqa: SIM115 - closed below
        except OSError as exc:
            st.skipped.append(Skipped(source=src.name, reason=f"cannot open: {exc.strerror or exc}"))
            return
    try:
        if src.compressed:
            yield from _gunzip(raw, src, st, max_decompressed)
            return
        while True:
            try:
                block = raw.read(CHUNK_BYTES)
            except OSError as exc:
                st.skipped.append(Skipped(source=src.name, reason=f"read error after {st.bytes} bytes: {exc}"))
                return
            if not block:
                return
            if st.on_bytes is not None:
                st.on_bytes(len(block))
            yield block
    finally:
        raw.close()


def _gunzip(raw: io.BufferedIOBase, src: Source, st: FileStats, max_decompressed: int) -> Iterator[bytes]:
    total = 0
    gz = gzip.GzipFile(fileobj=raw)
    consumed = 0
    while True:
        try:
            block = gz.read(CHUNK_BYTES)
        except (EOFError, OSError, zlib.error) as exc:
            what = "truncated" if isinstance(exc, EOFError) else "corrupt"
            st.skipped.append(
                Skipped(source=src.name, reason=f"{what} gzip data after {total} decompressed bytes; the rest is unread")
            )
            return
        if not block:
            return
        total += len(block)
        if st.on_bytes is not None:
            pos = raw.tell()
            st.on_bytes(pos - consumed)
            consumed = pos
        if total > max_decompressed:
            keep = len(block) - (total - max_decompressed)
            if keep > 0:
                yield block[:keep]
            st.skipped.append(
                Skipped(
                    source=src.name,
                    reason=f"decompressed size limit reached ({max_decompressed} bytes); the rest is unread",
                )
            )
            return
        yield block
