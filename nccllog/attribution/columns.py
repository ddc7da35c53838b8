"""The hand-off columns: what the matcher passes to attribution besides the event columns.

Each event row carries, in internal ``_`` columns, what its line's prefix layers
(``attribution.layers``) and its file's path (``attribution.paths``) say; ``resolve`` reads
them and drops them. A table built without them (tests, other producers) gets them derived
from ``text`` and ``source``.
"""

from __future__ import annotations

from operator import attrgetter
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
    """The internal-column values of one line (keys of ``INTERNAL_SCHEMA``)."""
    return {name: values[0] for name, values in internal_columns([attrs], [fattrs]).items()}


# LineAttrs fields that become columns (the events table's own, then the internal ones' sources)
# and FileAttrs fields; each object is read once for all of them (see columns_of)
LINE_FIELDS = (
    "message",
    "rank",
    "local_rank",
    "pg",
    "pg_rank",
    "host",
    "pid",
    "time",
    "repeat",
    "srun_task",
    "ip",
    "ray_actor",
    "nccl_dev",
    "rank_kind",
    "layers",
    "pg_desc",
    "src",
    "logger",
)
_FILE_FIELDS = ("rank", "local_rank", "host", "pid", "evidence", "year", "attempt", "single_process")
_line_fields = attrgetter(*LINE_FIELDS)
_file_fields = attrgetter(*_FILE_FIELDS)


def columns_of(getter: attrgetter[Any], names: tuple[str, ...], objs: list[Any]) -> dict[str, list[Any]]:
    """``getter``'s fields of every object, as one list per field name.

    Each object is read once, all its fields together, and the tuples are turned into columns by
    ``zip``: the objects of a large batch lie all over memory, and a comprehension per field would
    visit every one of them once per field.
    """
    if not objs:
        return {name: [] for name in names}
    return dict(zip(names, map(list, zip(*map(getter, objs), strict=True)), strict=True))


def line_columns(attrs: list[LineAttrs]) -> dict[str, list[Any]]:
    """The ``LINE_FIELDS`` of many lines, one list per field."""
    return columns_of(_line_fields, LINE_FIELDS, attrs)


def internal_columns(
    attrs: list[LineAttrs], fattrs: list[FileAttrs], lines: dict[str, list[Any]] | None = None
) -> dict[str, list[Any]]:
    """The internal columns of many lines at once, for the matcher (keys of ``INTERNAL_SCHEMA``);
    ``attrs[i]`` and ``fattrs[i]`` describe row ``i`` (``lines``: their ``line_columns``, where
    already read). Column by column: the matcher builds tens of thousands of rows, and a dict per
    row costs more than the row."""
    a = line_columns(attrs) if lines is None else lines
    f = columns_of(_file_fields, _FILE_FIELDS, fattrs)
    return {
        "_srun_task": a["srun_task"],
        "_ip": a["ip"],
        "_ray_actor": a["ray_actor"],
        "_nccl_dev": a["nccl_dev"],
        "_year_known": [None if t is None else t.year is not None for t in a["time"]],
        "_file_rank": f["rank"],
        "_file_local_rank": f["local_rank"],
        "_file_host": f["host"],
        "_file_pid": f["pid"],
        "_file_evidence": [e or None for e in f["evidence"]],
        "_rank_kind": a["rank_kind"],
        "_layers": [",".join(x) or None for x in a["layers"]],
        "_pg_desc": a["pg_desc"],
        "_src": a["src"],
        "_logger": a["logger"],
        "_file_year": f["year"],
        "_file_attempt": f["attempt"],
        "_file_single": f["single_process"],
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
