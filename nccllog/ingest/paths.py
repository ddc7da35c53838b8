"""What a file's path says about the process that wrote it (rank_3.log, attempt_0/3/stderr.log, …)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FileAttrs:
    """Attribution evidence from a path; None where the path says nothing."""

    rank: int | None = None
    local_rank: int | None = None
    host: str | None = None
    pid: int | None = None
    attempt: int | None = None
    evidence: str = ""  # e.g. "file name rank_3.log"


def attrs_from_path(path: str) -> FileAttrs:
    """Read rank/local rank/host/pid from a path's file and folder names."""
    return FileAttrs()
