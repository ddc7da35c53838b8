"""The diagnosis's compact events: all-null columns as scalars, rows holding only their values."""

from __future__ import annotations

import polars as pl

from nccllog.correlate.frame import Row, compact, prepare, row_dicts
from nccllog.match.library import load_library
from nccllog.match.matcher import events_schema, match_lines


def _frame() -> pl.DataFrame:
    return pl.DataFrame(
        {"source": ["b.log", "a.log", "a.log"], "line": [1, 2, 1], "seq": [None, 7, None], "op": [None] * 3},
        schema={"source": pl.String, "line": pl.Int64, "seq": pl.Int64, "op": pl.String},
    )


def test_compact_keeps_values_and_types() -> None:
    df = _frame()
    out = compact(df)
    assert out.schema == df.schema
    assert out.equals(df)
    assert out.filter(pl.col("line") > 1).equals(df.filter(pl.col("line") > 1))


def test_row_dicts_read_missing_columns_as_none() -> None:
    rows = list(row_dicts(_frame()))
    assert [dict(r) for r in rows] == [
        {"source": "b.log", "line": 1},
        {"source": "a.log", "line": 2, "seq": 7},
        {"source": "a.log", "line": 1},
    ]
    assert isinstance(rows[0], Row)
    assert rows[0]["seq"] is None and rows[0].get("op") is None and rows[1]["seq"] == 7


def test_prepare_orders_rows_whether_sorted_or_not() -> None:
    lib = load_library([])
    lines = pl.DataFrame(
        {
            "source": ["a.log", "a.log", "b.log"],
            "line": [1, 2, 1],
            "text": [
                "[rank0]:[E1023 14:02:17.412903 ProcessGroupNCCL.cpp:632] x",
                "NCCL WARN y",
                "Traceback z",
            ],
        }
    )
    events = match_lines(lines, lib).events
    assert events.schema == pl.Schema(events_schema(lib))
    for ev in (events, events.reverse()):
        got = prepare(ev)
        assert got.select("source", "line").rows() == sorted(events.select("source", "line").rows())
        assert got["_i"].to_list() == list(range(events.height))
