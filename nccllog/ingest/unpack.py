"""Open a source by what its bytes are, not by its name: sniff, decompress, expand archives.

``sniff`` is the one dispatch on leading bytes: ``MAGIC`` maps a test on the first ``HEAD_BYTES``
to a kind, and ``_OPENERS`` maps the kind to what reading it means. A new kind (a structured dump
recognised by content, say) is one entry in each. Everything not recognised is ``text``.

Compressed data (gzip, bzip2, xz) is inflated in bounded steps against a ``Budget``: a per-file
limit (each compressed file or archive member) and a total across all inputs, so a bomb stops at
the budget after reading about that many bytes. Archives (tar, zip; also inside gzip/bzip2/xz)
become one leaf per regular member, named ``<archive>/<member>`` so that member paths still say
which rank wrote them; nothing is ever written to disk, so ``..``, absolute names and links in an
archive can do no harm (links and devices are skipped with a reason). An archive inside an
archive is not opened.
"""

from __future__ import annotations

import bz2
import contextlib
import io
import lzma
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

HEAD_BYTES = 512  # enough for every magic below (tar's is at offset 257)
READ_BYTES = 64 * 1024  # compressed bytes per read: bounds what one step can inflate to
MAX_MEMBERS = 100_000  # archive members read; a central-directory bomb stops here
MAX_TAR_HEADER = 1024 * 1024  # pax / GNU long-name headers larger than this are refused
MAX_DEPTH = 3  # compression layers (a .gz of a .gz of a .gz)
# Logs, even very repetitive ones, expand well under 100:1; gzip's ceiling is about 1,032:1. Past
# RATIO_FROM bytes, a stream expanding more than MAX_RATIO:1 is a bomb and stops in seconds,
# whatever the size budget.
MAX_RATIO = 250
RATIO_FROM = 64 * 1024 * 1024


def _tar(head: bytes) -> bool:
    return head[257:262] == b"ustar"


# kind -> test on the leading bytes. Order matters only where tests could overlap (none do).
MAGIC: tuple[tuple[str, Callable[[bytes], bool]], ...] = (
    ("gzip", lambda h: h[:2] == b"\x1f\x8b"),
    ("bzip2", lambda h: h[:3] == b"BZh" and h[3:4] in b"123456789" and len(h) >= 4),
    ("xz", lambda h: h[:6] == b"\xfd7zXZ\x00"),
    ("zstd", lambda h: h[:4] == b"\x28\xb5\x2f\xfd"),
    ("zip", lambda h: h[:4] in (b"PK\x03\x04", b"PK\x05\x06")),
    ("tar", _tar),
    ("parquet", lambda h: h[:4] == b"PAR1"),  # an nccllog part (nccllog.parts reads it, before the reader)
)
COMPRESSED = ("gzip", "bzip2", "xz")
ARCHIVES = ("zip", "tar")


def sniff(head: bytes) -> str:
    """The kind of data that starts with ``head``: a ``MAGIC`` kind, else ``"text"``."""
    return next((kind for kind, test in MAGIC if test(head)), "text")


@dataclass
class Budget:
    """Decompressed bytes allowed per compressed file (or archive member) and over all inputs."""

    per_file: int
    total: int
    used: int = 0

    def allowed(self, done_in_file: int) -> int:
        return max(min(self.per_file - done_in_file, self.total - self.used), 0)

    def reason(self, done_in_file: int) -> str:
        if self.per_file - done_in_file <= self.total - self.used:
            return f"decompressed size limit reached ({self.per_file} bytes); the rest is unread"
        return (
            f"total decompressed size limit reached ({self.total} bytes over all inputs); the rest is unread"
        )


@dataclass
class Leaf:
    """One stream of log text to read, with what went wrong while producing it.

    ``problems`` fills in as the stream is read (a truncated archive is found at its end);
    ``partial`` marks problems that cut the stream short (the lines before them were read)."""

    name: str
    stream: IO[bytes] | None
    problems: list[str] = field(default_factory=list)
    compressed: bool = False


class _Decompressor(Protocol):
    eof: bool
    unused_data: bytes

    def decompress(self, data: bytes, max_length: int = ...) -> bytes: ...


def _decompressor(kind: str) -> Any:
    if kind == "gzip":
        return zlib.decompressobj(wbits=31)
    if kind == "bzip2":
        return bz2.BZ2Decompressor()
    return lzma.LZMADecompressor()


class _Prefixed(io.RawIOBase):
    """``head`` (already read to sniff) followed by the rest of ``raw``."""

    def __init__(self, head: bytes, raw: IO[bytes]) -> None:
        self._head, self._raw = head, raw

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if self._head:
            n = min(len(b), len(self._head))
            b[:n], self._head = self._head[:n], self._head[n:]
            return n
        data = self._raw.read(len(b))
        b[: len(data)] = data
        return len(data)


class _Inflating(io.RawIOBase):
    """A decompressing reader over ``raw`` that stops at the budget or at damage, saying why in
    ``leaf.problems``; several concatenated streams (``cat a.gz b.gz``) are read as one."""

    def __init__(self, raw: IO[bytes], kind: str, budget: Budget, leaf: Leaf) -> None:
        self._raw, self._kind, self._budget, self._leaf = raw, kind, budget, leaf
        self._dec = _decompressor(kind)
        self._pending = b""  # compressed input not yet given to the decompressor
        self.done = 0  # decompressed bytes produced
        self.taken = 0  # compressed bytes taken from raw
        self._over = False

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        data = self._step(len(b))
        b[: len(data)] = data
        return len(data)

    def _step(self, want: int) -> bytes:
        while not self._over:
            allowed = self._budget.allowed(self.done)
            if allowed <= 0:
                self._stop(self._budget.reason(self.done))
                return b""
            try:
                out = self._inflate(min(want, allowed))
            except EOFError:
                self._stop(
                    f"truncated {self._kind} data after {self.done} decompressed bytes; the rest is unread"
                )
                return b""
            except (OSError, zlib.error, lzma.LZMAError, ValueError):
                self._stop(
                    f"corrupt {self._kind} data after {self.done} decompressed bytes; the rest is unread"
                )
                return b""
            if out is None:
                self._over = True
                return b""
            if out:
                self.done += len(out)
                self._budget.used += len(out)
                if self.done > RATIO_FROM and self.done > MAX_RATIO * max(self.taken, 1):
                    self._stop(
                        f"expands more than {MAX_RATIO}:1 (a compression bomb?) after {self.done} "
                        "decompressed bytes; the rest is unread"
                    )
                return out
        return b""

    def _inflate(self, limit: int) -> bytes | None:
        """Up to ``limit`` decompressed bytes; b"" when more input is needed; None at a clean end."""
        dec = self._dec
        if dec.eof:
            rest = dec.unused_data + self._pending
            if not rest:
                rest = self._take()
            if not rest or sniff(rest[:HEAD_BYTES]) != self._kind:
                return None  # the end (trailing zeros or garbage after the last stream are ignored)
            self._dec, self._pending = _decompressor(self._kind), rest
            return b""
        if self._kind == "gzip":
            data = dec.unconsumed_tail or self._pending or self._take()
            self._pending = b""
            if not data:
                raise EOFError
            return bytes(dec.decompress(data, limit))
        if dec.needs_input:
            data = self._pending or self._take()
            self._pending = b""
            if not data:
                raise EOFError
        else:
            data = b""
        return bytes(dec.decompress(data, limit))

    def _take(self) -> bytes:
        data = self._raw.read(READ_BYTES)
        self.taken += len(data)
        return data

    def _stop(self, why: str) -> None:
        self._over = True
        self._leaf.problems.append(why)


class _Capped(io.RawIOBase):
    """A zip member's reader, held to the same budget as inflated gzip data."""

    def __init__(self, raw: IO[bytes], budget: Budget, leaf: Leaf) -> None:
        self._raw, self._budget, self._leaf = raw, budget, leaf
        self.done = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        allowed = self._budget.allowed(self.done)
        if allowed <= 0:
            if self._raw.read(1):
                self._leaf.problems.append(self._budget.reason(self.done))
            return 0
        try:
            data = self._raw.read(min(len(b), allowed))
        except (
            OSError,
            zlib.error,
            lzma.LZMAError,
            EOFError,
            zipfile.BadZipFile,
            NotImplementedError,
        ) as exc:
            self._leaf.problems.append(
                f"corrupt zip member after {self.done} bytes ({exc}); the rest is unread"
            )
            return 0
        self.done += len(data)
        self._budget.used += len(data)
        b[: len(data)] = data
        return len(data)


def open_leaves(
    name: str, raw: IO[bytes], budget: Budget, *, depth: int = 0, in_archive: bool = False
) -> Iterator[Leaf]:
    """The text streams inside ``raw``: itself when it is text, else its decompressed content or
    its archive members (recursively). Each leaf must be read (or abandoned) before the next."""
    head = _read_head(raw)
    kind = sniff(head)
    stream: IO[bytes]
    if depth == 0 and not in_archive and kind in ("text", "zip") and raw.seekable():
        raw.seek(0)  # a file on disk: read it directly, without a buffering layer
        stream = raw
    else:
        stream = io.BufferedReader(_Prefixed(head, raw))
    yield from _OPENERS[kind](name, kind, stream, budget, depth, in_archive)


def _read_head(raw: IO[bytes]) -> bytes:
    head = b""
    while len(head) < HEAD_BYTES:
        piece = raw.read(HEAD_BYTES - len(head))
        if not piece:
            break
        head += piece
    return head


Opener = Callable[[str, str, IO[bytes], Budget, int, bool], Iterator[Leaf]]


def _open_text(
    name: str, kind: str, stream: IO[bytes], budget: Budget, depth: int, in_archive: bool
) -> Iterator[Leaf]:
    yield Leaf(name, stream)


def _open_compressed(
    name: str, kind: str, stream: IO[bytes], budget: Budget, depth: int, in_archive: bool
) -> Iterator[Leaf]:
    if depth >= MAX_DEPTH:
        yield Leaf(name, None, [f"{kind} data nested more than {MAX_DEPTH} levels deep; not read"])
        return
    outer = Leaf(name, None, compressed=True)
    inflating = io.BufferedReader(_Inflating(stream, kind, budget, outer), READ_BYTES)
    for leaf in open_leaves(name, inflating, budget, depth=depth + 1, in_archive=in_archive):
        if leaf.name == name and leaf.stream is not None:
            # Plain compressed text: what inflating finds (a cut, the limit) is this leaf's.
            leaf.problems, leaf.compressed = outer.problems, True
            yield leaf
            return
        yield leaf
    if outer.problems:  # an archive's compressed stream was cut or hit the limit
        yield Leaf(name, None, outer.problems)


def _open_zstd(
    name: str, kind: str, stream: IO[bytes], budget: Budget, depth: int, in_archive: bool
) -> Iterator[Leaf]:
    yield Leaf(
        name, None, ["zstd-compressed data: no zstd decoder is installed; not read (decompress it first)"]
    )


def _open_parquet(
    name: str, kind: str, stream: IO[bytes], budget: Budget, depth: int, in_archive: bool
) -> Iterator[Leaf]:
    # Parts given as files are read by nccllog.parts before any text is; one that gets here was
    # compressed, in an archive or on standard input.
    yield Leaf(
        name,
        None,
        [
            "Parquet data (an nccllog part?) inside an archive, compressed or on standard"
            " input; not read (give the .parquet file itself)"
        ],
    )


def _member_name(archive: str, member: str) -> str:
    """``archive/member`` with ``.``, ``..`` and empty parts dropped (names are only ever shown)."""
    raw = member.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    parts = [p for p in raw.replace("\\", "/").split("/") if p not in ("", ".", "..")]
    return archive + "/" + "/".join(parts) if parts else archive + "/?"


class _SafeTarInfo(tarfile.TarInfo):
    """Refuses extended headers large enough to exhaust memory (tarfile reads them whole)."""

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:
        long_types = (
            tarfile.XHDTYPE,
            tarfile.XGLTYPE,
            tarfile.SOLARIS_XHDTYPE,
            tarfile.GNUTYPE_LONGNAME,
            tarfile.GNUTYPE_LONGLINK,
        )
        if self.type in long_types and self.size > MAX_TAR_HEADER:
            raise tarfile.HeaderError(f"extended header of {self.size} bytes")
        return super()._proc_member(tarfile_)  # type: ignore[misc]


def _open_tar(
    name: str, kind: str, stream: IO[bytes], budget: Budget, depth: int, in_archive: bool
) -> Iterator[Leaf]:
    if in_archive:
        yield Leaf(name, None, ["tar archive inside an archive; not opened (extract it first)"])
        return
    count = 0
    problem: str | None = None
    try:
        with tarfile.open(fileobj=stream, mode="r|", tarinfo=_SafeTarInfo) as tar:
            for member in tar:
                count += 1
                if count > MAX_MEMBERS:
                    problem = f"more than {MAX_MEMBERS} members; the rest is unread"
                    break
                mname = _member_name(name, member.name)
                if member.isdir():
                    continue
                if not member.isfile():
                    yield Leaf(mname, None, ["link or special file in an archive; not read"])
                    continue
                fobj = tar.extractfile(member)
                if fobj is not None:
                    yield from open_leaves(mname, fobj, budget, depth=depth, in_archive=True)
    except (tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError, ValueError) as exc:
        problem = f"damaged tar archive after {count} member(s) ({exc}); the rest is unread"
    if problem is None and count == 0:
        problem = "empty archive (no files)"
    if problem is not None:
        yield Leaf(name, None, [problem])


def _open_zip(
    name: str, kind: str, stream: IO[bytes], budget: Budget, depth: int, in_archive: bool
) -> Iterator[Leaf]:
    if in_archive:
        yield Leaf(name, None, ["zip archive inside an archive; not opened (extract it first)"])
        return
    if not stream.seekable():
        yield Leaf(name, None, ["zip archive on a pipe; not read (give it as a file)"])
        return
    try:
        zf = zipfile.ZipFile(stream)
        infos = sorted(zf.infolist(), key=lambda i: i.filename)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError) as exc:
        yield Leaf(name, None, [f"damaged zip archive ({exc}); not read"])
        return
    with zf:
        files = [i for i in infos if not i.is_dir()]
        if not files:
            yield Leaf(name, None, ["empty archive (no files)"])
        if len(files) > MAX_MEMBERS:
            yield Leaf(name, None, [f"more than {MAX_MEMBERS} members; the rest is unread"])
            files = files[:MAX_MEMBERS]
        for info in files:
            mname = _member_name(name, info.filename)
            if info.flag_bits & 0x1:
                yield Leaf(mname, None, ["encrypted zip member; not read"])
                continue
            try:
                member = zf.open(info)
            except (
                zipfile.BadZipFile,
                OSError,
                ValueError,
                EOFError,
                NotImplementedError,
                RuntimeError,
            ) as exc:
                yield Leaf(mname, None, [f"damaged zip member ({exc}); not read"])
                continue
            with contextlib.closing(member):
                leaf = Leaf(mname, None, compressed=info.compress_type != zipfile.ZIP_STORED)
                capped = io.BufferedReader(_Capped(member, budget, leaf))
                for inner in open_leaves(mname, capped, budget, depth=depth, in_archive=True):
                    if inner.name == mname and inner.stream is not None:
                        inner.problems = leaf.problems
                        inner.compressed = leaf.compressed
                    yield inner


_OPENERS: dict[str, Opener] = {
    "text": _open_text,
    "gzip": _open_compressed,
    "bzip2": _open_compressed,
    "xz": _open_compressed,
    "zstd": _open_zstd,
    "tar": _open_tar,
    "zip": _open_zip,
    "parquet": _open_parquet,
}
