"""Strip the prefix layers of one physical log line and keep what they say about its origin.

Layers, outermost first (formats.md §1): journald/dmesg, srun --label, pdsh host, Ray actor
(possibly nested), torchrun tee, c10 / Python logger, NCCL header. The PG prefix
(`[PG ID 0 PG GUID 0(default_pg) Rank 3]`) is read but kept in the message.
"""

from __future__ import annotations

from dataclasses import dataclass

import regex

from nccllog.ingest.timestamps import PartialTime


@dataclass(frozen=True)
class LineAttrs:
    """What the prefixes of one line say. Every field is None where the line says nothing."""

    message: str  # the innermost text, used for pattern matching
    rank: int | None = None  # global rank from `[rankN]:` (c10 / Python logger)
    local_rank: int | None = None  # from a torchrun tee prefix `[default3]:`
    srun_task: int | None = None  # Slurm task id from `srun --label`
    host: str | None = None  # NCCL header host, pdsh host, journald host
    pid: int | None = None  # NCCL header pid, Python logger pid (2.5+), Ray pid
    tid: int | None = None
    ip: str | None = None  # Ray `ip=` (the node of the worker)
    ray_actor: str | None = None
    pg: str | None = None  # process-group id/name from the PG prefix
    pg_rank: int | None = None  # rank inside that group (`[PG 1 Rank 0]`, `[Rank 0]`)
    nccl_dev: int | None = None  # the `[dev]` of an NCCL header (process-local CUDA ordinal)
    level: str | None = None  # E/W/I/F or WARN/INFO/TRACE
    time: PartialTime | None = None
    repeat: int = 1  # Ray `[repeated Nx across cluster]` -> N + 1
    layers: tuple[str, ...] = ()  # names of the layers stripped, outermost first


def parse_line(text: str) -> LineAttrs:
    """Strip every recognised prefix layer of ``text`` and return what they said."""
    return _parse(text)


_RANK = regex.compile(r"^\[rank(\d+)\]:")
_NCCL = regex.compile(r"^(?:\[[^\]]*\] )?([\w.-]+):(\d+):(\d+) (?:\[(\d+)\] )?")


def _parse(text: str) -> LineAttrs:
    # Minimal placeholder implementation; the full one replaces it.
    rank = None
    m = _RANK.match(text)
    if m:
        rank = int(m.group(1))
        text = text[m.end() :]
    host = pid = None
    m = _NCCL.match(text)
    if m and "NCCL" in text:
        host, pid = m.group(1), int(m.group(2))
        text = text[m.end() :]
    return LineAttrs(message=text, rank=rank, host=host, pid=pid)
