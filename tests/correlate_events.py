"""Builders for synthetic events tables, so the correlation rules can be tested one case at a time
without going through ingest and matching (the scenario fixtures do that end to end)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import polars as pl

from nccllog.attribution import Topology
from nccllog.correlate.diagnose import diagnose
from nccllog.correlate.frame import FIELDS
from nccllog.match.library import Library, load_library
from nccllog.model import EVENT_BASE_COLUMNS, Coverage, Incident

T0 = datetime(2025, 10, 23, 14, 0, 0)
_LIB: Library | None = None

SEVERITY = {
    "collective_timeout": "error",
    "work_status": "error",
    "abort": "error",
    "oom": "error",
    "cuda_error": "error",
    "crash_signal": "critical",
    "network_ib": "error",
    "network_socket": "error",
    "python_exception": "error",
    "xid": "critical",
    "stall": "warning",
    "heartbeat": "error",
    "store_timeout": "error",
    "process_exit": "error",
}


def library() -> Library:
    """The built-in library (loaded once)."""
    global _LIB
    if _LIB is None:
        _LIB = load_library()
    return _LIB


class Log:
    """Collects rows; ``frame()`` turns them into an events table with the pipeline's columns."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self._line: dict[str, int] = {}

    def add(
        self,
        signal: str,
        *,
        rank: int | None,
        source: str | None = None,
        at: float | None = None,
        **fields: Any,
    ) -> Log:
        """One event; ``at`` is seconds after T0 (None: no timestamp)."""
        src = source or (f"rank{rank}.log" if rank is not None else "driver.log")
        self._line[src] = self._line.get(src, 0) + 1
        row: dict[str, Any] = {
            "source": src,
            "line": fields.pop("line", self._line[src]),
            "text": fields.pop("text", f"[rank{rank}]: {signal}"),
            "pattern": fields.pop("pattern", f"test.{signal}"),
            "signal": signal,
            "category": fields.pop("category", None),
            "severity": fields.pop("severity", SEVERITY.get(signal, "info")),
            "rank": rank,
            "host": fields.pop("host", None),
            "time": (T0 + timedelta(seconds=at)) if at is not None else None,
            "repeat": fields.pop("repeat", 1),
            "pg": fields.pop("pg", None),
            "pg_rank": fields.pop("pg_rank", None),
        }
        row["message"] = fields.pop("message", row["text"])
        row.update(fields)
        self.rows.append(row)
        return self

    def timeout(
        self, rank: int, seq: int, *, op: str = "ALLREDUCE", numel: int = 1024, at: float = 600.0, **kw: Any
    ) -> Log:
        """A watchdog timeout line."""
        return self.add(
            "collective_timeout",
            rank=rank,
            at=at,
            seq=seq,
            op=op,
            numel_in=kw.pop("numel_in", numel),
            numel_out=kw.pop("numel_out", numel),
            timeout_ms=kw.pop("timeout_ms", 600000),
            elapsed_ms=kw.pop("elapsed_ms", 600050),
            text=f"[rank{rank}]: Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op})",
            **kw,
        )

    def status(
        self, rank: int, seq: int, enq: int, done: int, *, pg: str = "0", at: float = 600.1, **kw: Any
    ) -> Log:
        """A watchdog work-status follow-up line."""
        return self.add(
            "work_status", rank=rank, at=at, seq=seq, last_enqueued=enq, last_completed=done, pg=pg, **kw
        )

    def init(
        self,
        rank: int,
        nranks: int,
        *,
        host: str | None = None,
        bus: str | None = None,
        dev: int | None = None,
    ) -> Log:
        """An NCCL comm init line of the world communicator."""
        return self.add(
            "init",
            rank=rank,
            host=host,
            comm_rank=rank,
            nranks=nranks,
            bus_id=bus,
            cuda_dev=dev,
            phase="Init COMPLETE",
            source=f"nccl_{host or 'h'}_{rank}.log",
        )

    def frame(self) -> pl.DataFrame:
        """The events table."""
        schema = {**EVENT_BASE_COLUMNS, **FIELDS}
        cols = {k: [r.get(k) for r in self.rows] for k in schema}
        return pl.DataFrame(cols, schema=schema)

    def diagnose(self, topology: Topology | None = None, **coverage: Any) -> Incident:
        """Run the correlation stage on these events."""
        n = len(self.rows)
        cov = Coverage(files=1, lines=n, matched=n, unattributed=0, **coverage)
        return diagnose(
            self.frame(),
            topology or Topology(),
            coverage=cov,
            templates=(),
            library=library(),
            inputs=("test",),
        )
