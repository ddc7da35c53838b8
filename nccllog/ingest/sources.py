"""Turn what the user named (files, directories, globs, `-`, pasted text) into readable sources.

What a source holds (text, compressed data, an archive) is decided later from its bytes
(``ingest.unpack``), never from its name.
"""

from __future__ import annotations

import glob
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from nccllog.model import Skipped

STDIN = "-"


@dataclass(frozen=True)
class Source:
    """One input to read: a file on disk, or bytes already in memory (stdin, pasted text)."""

    name: str  # display name used in reports ("<stdin>", "logs/rank_3.log")
    path: Path | None = None
    data: bytes | None = None
    stream: IO[bytes] | None = None  # standard input, read in chunks (never whole into memory)


def expand_inputs(
    inputs: Iterable[str | Path], stdin: bytes | IO[bytes] | None = None
) -> tuple[list[Source], list[Skipped]]:
    """Expand paths, directories (recursively), globs and `-` into sources, sorted within each input.

    Anything that cannot be read is returned as a Skipped entry with the reason instead.
    """
    sources: list[Source] = []
    skipped: list[Skipped] = []
    seen: set[str] = set()
    for raw in inputs:
        item = str(raw)
        if item == STDIN:
            if "<stdin>" not in seen:
                seen.add("<stdin>")
                if stdin is None or isinstance(stdin, bytes):
                    sources.append(Source(name="<stdin>", data=stdin or b""))
                else:
                    sources.append(Source(name="<stdin>", stream=stdin))
            continue
        if os.path.lexists(item):
            paths: list[str] = [item]
        elif glob.has_magic(item):
            paths = sorted(glob.glob(item, recursive=True))
            if not paths:
                skipped.append(Skipped(source=display_name(item), reason="no file matches this pattern"))
                continue
        else:
            skipped.append(Skipped(source=display_name(item), reason="no such file or directory"))
            continue
        for p in paths:
            for src in _walk(Path(p), skipped):
                if src.name not in seen:
                    seen.add(src.name)
                    sources.append(src)
    return sources, skipped


def display_name(path: str | Path) -> str:
    """The name shown in reports: file names that are not valid UTF-8 keep their bytes as ``\\xNN``."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _walk(path: Path, skipped: list[Skipped]) -> Iterator[Source]:
    """Yield readable regular files under ``path`` in sorted order; record what is skipped and why."""
    visited: set[tuple[int, int]] = set()
    stack = [path]
    found = 0
    skipped_before = len(skipped)
    while stack:
        p = stack.pop()
        name = display_name(p)
        try:
            st = p.stat()
        except FileNotFoundError:
            skipped.append(
                Skipped(source=name, reason="dangling symbolic link" if p.is_symlink() else "vanished")
            )
            continue
        except OSError as exc:
            skipped.append(Skipped(source=name, reason=_os_reason(exc)))
            continue
        if stat.S_ISDIR(st.st_mode):
            key = (st.st_dev, st.st_ino)
            if key in visited:
                skipped.append(Skipped(source=name, reason="symbolic link loop (directory already read)"))
                continue
            visited.add(key)
            try:
                children = sorted(os.scandir(p), key=lambda e: e.name)
            except OSError as exc:
                skipped.append(Skipped(source=name, reason=_os_reason(exc)))
                continue
            if not children and p == path:
                skipped.append(Skipped(source=name, reason="empty directory"))
            # Reverse so that popping from the stack visits children in name order.
            stack.extend(Path(c.path) for c in reversed(children))
        elif stat.S_ISREG(st.st_mode):
            if not os.access(p, os.R_OK):
                skipped.append(Skipped(source=name, reason="permission denied"))
                continue
            found += 1
            yield Source(name=name, path=p)
        elif stat.S_ISFIFO(st.st_mode):
            skipped.append(Skipped(source=name, reason="named pipe (FIFO) not read"))
        else:
            skipped.append(Skipped(source=name, reason="not a regular file (device or socket)"))
    if not found and len(skipped) == skipped_before:
        # Only empty subdirectories: say so rather than nothing at all.
        skipped.append(
            Skipped(source=display_name(path), reason="no files in this directory (only empty directories)")
        )


def _os_reason(exc: OSError) -> str:
    if isinstance(exc, PermissionError):
        return "permission denied"
    if exc.errno is not None and exc.errno == 40:  # ELOOP
        return "symbolic link loop"
    return exc.strerror or type(exc).__name__


# Reasons that mean an input the user named could not be read at all (a typo, permissions, a
# link to nowhere): the CLI warns about these on stderr, and ``--strict`` refuses to go on.
UNREADABLE = (
    "no such file or directory",
    "no file matches this pattern",
    "permission denied",
    "cannot open",
    "dangling symbolic link",
    "symbolic link loop",
    "vanished",
    "read error",
)


def unreadable(reason: str) -> bool:
    """True when ``reason`` says an input could not be read at all (see ``UNREADABLE``)."""
    return reason.startswith(UNREADABLE)
