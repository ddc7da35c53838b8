"""The hand-off columns: what the matcher passes to attribution besides the event columns.

Each event row carries, in internal ``_`` columns, what its line's prefix layers
(``attribution.layers``) and its file's path (``attribution.paths``) say; ``resolve`` reads
them and drops them. A table built without them (tests, other producers) gets them derived
from ``text`` and ``source``.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from nccllog.attribution.layers import LineAttrs, parse_line
from nccllog.attribution.paths import FileAttrs, attrs_from_path
from nccllog.schema import HANDOFF

# Internal columns resolve() reads (all optional; missing ones are derived from text/source or null).
INTERNAL_SCHEMA: dict[str, Any] = HANDOFF
_DERIVED_FROM_TEXT = ("_year_known", "_rank_kind", "_layers", "_pg_desc", "_src", "_logger")
_DERIVED_FROM_PATH = ("_file_year", "_file_attempt", "_file_single")


def internal_values(attrs: LineAttrs, fattrs: FileAttrs) -> dict[str, Any]:
    """The internal-column values of one line, for the matcher (keys of ``INTERNAL_SCHEMA``)."""
    return {
        "_srun_task": attrs.srun_task,
        "_ip": attrs.ip,
        "_ray_actor": attrs.ray_actor,
        "_nccl_dev": attrs.nccl_dev,
        "_year_known": None if attrs.time is None else attrs.time.year is not None,
        "_file_rank": fattrs.rank,
        "_file_local_rank": fattrs.local_rank,
        "_file_host": fattrs.host,
        "_file_pid": fattrs.pid,
        "_file_evidence": fattrs.evidence or None,
        "_rank_kind": attrs.rank_kind,
        "_layers": ",".join(attrs.layers) or None,
        "_pg_desc": attrs.pg_desc,
        "_src": attrs.src,
        "_logger": attrs.logger,
        "_file_year": fattrs.year,
        "_file_attempt": fattrs.attempt,
        "_file_single": fattrs.single_process,
    }


def with_internal(events: pl.DataFrame) -> pl.DataFrame:
    """Add internal columns the matcher did not provide, derived from ``text``/``source`` or null."""
    missing_text = [c for c in _DERIVED_FROM_TEXT if c not in events.columns]
    missing_path = [c for c in _DERIVED_FROM_PATH if c not in events.columns]
    add: dict[str, pl.Series] = {}
    if missing_text and "text" in events.columns:
        cache: dict[str, dict[str, Any]] = {}
        vals: dict[str, list[Any]] = {c: [] for c in missing_text}
        for t in events.get_column("text").to_list():
            d = cache.get(t)
            if d is None:
                d = cache[t] = internal_values(parse_line(t or ""), FileAttrs())
            for c in missing_text:
                vals[c].append(d[c])
        for c in missing_text:
            add[c] = pl.Series(c, vals[c], INTERNAL_SCHEMA[c])
    if missing_path and "source" in events.columns:
        pcache: dict[str, dict[str, Any]] = {}
        pvals: dict[str, list[Any]] = {c: [] for c in missing_path}
        for s in events.get_column("source").to_list():
            d = pcache.get(s)
            if d is None:
                d = pcache[s] = internal_values(LineAttrs(message=""), attrs_from_path(s or ""))
            for c in missing_path:
                pvals[c].append(d[c])
        for c in missing_path:
            add[c] = pl.Series(c, pvals[c], INTERNAL_SCHEMA[c])
    if add:
        events = events.with_columns(list(add.values()))
    return events
