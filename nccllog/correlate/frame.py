"""The events table as the correlation stage reads it: every field it uses exists with its type.

The pattern library decides which field columns an events table has; a library without, say, an
IB pattern has no ``ib_status`` column. ``prepare`` adds the missing ones (all null), casts the
ones it reads to the types docs/patterns.md gives them, orders the rows by source and line, and
adds three columns of its own:

- ``_i``: the row's position in (source, line) order, the tie-breaker for every "first";
- ``pgk``: the process group key (``"0"`` for the default group, whatever the line names otherwise);
- ``ctime``: the time corrected by the host's clock offset (filled in by ``apply_offsets``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from itertools import compress, repeat
from operator import is_not
from typing import Any

import polars as pl

from nccllog.ingest.numbers import int64
from nccllog.ingest.reader import in_file_order
from nccllog.model import EVENT_BASE_COLUMNS

INT = pl.Int64
STR = pl.String
FLOAT = pl.Float64

# Fields of docs/patterns.md that the correlation reads, with their types.
FIELDS: dict[str, Any] = {
    "seq": INT,
    "op": STR,
    "numel_in": INT,
    "numel_out": INT,
    "shape": STR,
    "timeout_ms": INT,
    "elapsed_ms": INT,
    "elapsed_s": FLOAT,
    "last_enqueued": INT,
    "last_completed": INT,
    "lagging_ranks": STR,
    "nccl_version": STR,
    "torch_version": STR,
    "cuda_version": STR,
    "cuda_driver": INT,
    "comm": STR,
    "comm_id": STR,
    "comm_rank": INT,
    "nranks": INT,
    "cuda_dev": INT,
    "bus_id": STR,
    "phase": STR,
    "env_var": STR,
    "env_value": STR,
    "iface": STR,
    "ip": STR,
    "port": INT,
    "net": STR,
    "peer": STR,
    "peer_addr": STR,
    "ib_status": INT,
    "vendor_err": INT,
    "opcode": INT,
    "req_type": STR,
    "hca": STR,
    "error": STR,
    "error_name": STR,
    "code": INT,
    "exitcode": INT,
    "signal_name": STR,
    "target_rank": INT,
    "target_local_rank": INT,
    "target_pid": INT,
    "target_host": STR,
    "other_rank": INT,
    "waits_for": INT,
    "xid": INT,
    "pci": STR,
    "seconds": FLOAT,
    "joined": INT,
    "world_size": INT,
    "step": INT,
    "total_steps": INT,
    "size": STR,
    "gpu": INT,
    "src_file": STR,
    "count": INT,
    "key": STR,
    "framework": STR,
    "op_count": INT,
    # read by correlate/setup.py
    "ifaces": STR,
    "nnodes": INT,
    "master_addr": STR,
    "path": STR,
    "transport": STR,
    "topo_dev": STR,
    "topo_links": STR,
    "nvls": STR,
    "datatype": INT,
    "redop": INT,
    "root": INT,
}

DEFAULT_PG = "0"
_DEFAULT_PG_NAMES = ("0", "default_pg", "default", "default_group")


def whole_versions(events: pl.DataFrame) -> pl.DataFrame:
    """``events`` with each NCCL version that is the start of a longer one seen (``2.1`` of
    ``2.19.3``: a line cut in the middle of its version, the end of a paste) read as that one, so
    a cut line neither splits the ranks' versions nor gates advice on a version that never was."""
    if "nccl_version" not in events.columns:
        return events
    seen = sorted(set(events["nccl_version"].drop_nulls().cast(pl.String).to_list()), key=len, reverse=True)
    whole: dict[str, str] = {}
    for v in seen:  # the longest first: a cut version maps to the longest it begins
        longer = next((u for u in seen if len(u) > len(v) and u.startswith(v)), None)
        if longer is not None:
            whole[v] = longer
    if not whole:
        return events
    return events.with_columns(pl.col("nccl_version").cast(pl.String).replace(whole))


def prepare(events: pl.DataFrame) -> pl.DataFrame:
    """Add missing columns, cast the read ones, sort by (source, line) and number the rows."""
    ev = compact(events)
    missing = [
        pl.lit(None, dtype=dt).alias(name)
        for name, dt in EVENT_BASE_COLUMNS.items()
        if name not in ev.columns
    ]
    missing += [pl.lit(None, dtype=dt).alias(name) for name, dt in FIELDS.items() if name not in ev.columns]
    if missing:
        ev = ev.with_columns(missing)
    casts = [
        pl.col(name).cast(dt, strict=False)
        for name, dt in {**EVENT_BASE_COLUMNS, **FIELDS}.items()
        if ev.schema[name] != dt
    ]
    if casts:
        ev = ev.with_columns(casts)
    if not in_file_order(ev):  # read and matched in this order already, as a rule: no copy then
        ev = ev.sort("source", "line", maintain_order=True)
    ev = ev.with_row_index("_i")
    return ev.with_columns(
        _i=pl.col("_i").cast(pl.Int64),
        repeat=pl.col("repeat").fill_null(1).clip(lower_bound=1),
        pgk=pg_key(pl.col("pg")),
        ctime=pl.col("time"),
    )


def pg_key(expr: pl.Expr) -> pl.Expr:
    """Normalise a process-group id: the default group is ``"0"`` however the line names it."""
    s = expr.cast(pl.String).str.strip_chars()
    return (
        pl.when(s.is_null())
        .then(pl.lit(None, dtype=pl.String))
        .when(s.str.to_lowercase().is_in(list(_DEFAULT_PG_NAMES)) | s.str.contains("default_pg"))
        .then(pl.lit(DEFAULT_PG))
        .otherwise(s)
    )


def apply_offsets(ev: pl.DataFrame, offsets: Mapping[str, float]) -> pl.DataFrame:
    """Set ``ctime`` = ``time`` + the host's offset (seconds); hosts without one keep their time."""
    if not offsets:
        return ev.with_columns(ctime=pl.col("time"))
    micros = {h: round(s * 1_000_000) for h, s in offsets.items()}
    shift = pl.col("host").replace_strict(micros, default=0, return_dtype=pl.Int64).fill_null(0)
    return ev.with_columns(ctime=pl.col("time") + pl.duration(microseconds=shift))


def compact(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with each column that is null in every row made a polars scalar column: the same
    values and types, but no memory per row in this frame or in any filter, sort or join of it
    (an events table has a column per pattern field, most of them null in every row)."""
    nulls = [
        pl.lit(None, dt).alias(name) for name, dt in df.schema.items() if df[name].null_count() == df.height
    ]
    return df.with_columns(nulls) if nulls and df.height else df


class Row(dict[str, Any]):
    """An events row as a dict of its non-null values: a column it leaves out reads as None, by
    ``row[name]`` as by ``row.get(name)``. The diagnosis keeps a few rows per rank (its last line,
    first error, failures, timeouts); most of a row's 100-odd columns are null."""

    def __missing__(self, key: str) -> None:
        return None


def row_dicts(df: pl.DataFrame) -> Iterator[Row]:
    """The rows of ``df`` as ``Row``s, in order (columns null in every row are not read)."""
    names = [name for name in df.columns if df[name].null_count() < df.height]
    for values in df.select(names).iter_rows():
        yield Row(compress(zip(names, values, strict=True), map(is_not, values, repeat(None))))  # all in C


def rows(df: pl.DataFrame) -> list[dict[str, Any]]:
    """The rows of a (small) frame as dictionaries."""
    return df.to_dicts()


def int_list(text: str | None) -> tuple[int, ...]:
    """``"1, 5"`` / ``"[1, 5]"`` -> (1, 5); anything unparsable, negative or beyond 64 bits is skipped."""
    if not text:
        return ()
    out = []
    for part in text.replace("[", " ").replace("]", " ").replace(",", " ").split():
        n = int64(part)
        if n is not None:
            out.append(n)
    return tuple(out)


def unique_sorted(values: Iterable[Any]) -> tuple[Any, ...]:
    """Distinct non-null values, sorted."""
    return tuple(sorted({v for v in values if v is not None}))
