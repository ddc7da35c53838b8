"""Progress lines no prefix ties to a rank, read as the work of the one rank that could have printed them.

A progress bar or a phase line printed without a rank prefix (a tqdm bar redrawn behind pdsh's
``host:``, faiss k-means output in a console all ranks share) still comes from one process. While
the ranks of a collective wait in it, the waiting ranks print nothing of the sort; so when a
line's scope (the ranks of its host, or the ranks writing to its file) holds exactly one rank
that was not waiting, the line shows what that rank was doing. This is evidence for the
diagnosis only: the line's own attribution is left as it is (``nccllog lines`` shows no rank).

Scope of a line: the ranks known to run on its host when the line names one; otherwise the ranks
attributed in its file, plus the ranks with no log anywhere when the file is a console several
ranks share (their output can only have gone somewhere like it). A line stamped more than 30
minutes before the wait began says nothing about the wait and is left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import PurePath
from typing import Any

import polars as pl

from nccllog.correlate.collectives import Aligned
from nccllog.correlate.network import AddressBook

# A line this long before the wait began belongs to an earlier phase.
WINDOW = timedelta(minutes=30)


@dataclass(frozen=True)
class Orphan:
    """A progress line tied to a rank by elimination."""

    rank: int
    row: dict[str, Any]
    scope: str  # "of host gpu-3" or "writing to x.log": where all the other ranks were waiting


def progress_by_elimination(
    ev: pl.DataFrame, a: Aligned, book: AddressBook, no_log: Sequence[int]
) -> dict[int, list[Orphan]]:
    """Rank -> the unattributed progress rows only that rank can have printed while ``a`` waited."""
    if a.hidden:
        return {}  # Ray folded some reporters: who waited is not fully known
    rows = ev.filter(
        pl.col("rank").is_null() & pl.col("target_rank").is_null() & (pl.col("signal") == "progress")
    )
    if rows.height == 0:
        return {}
    start = a.wait_start
    if start is not None:
        rows = rows.filter(pl.col("ctime").is_null() | (pl.col("ctime") >= start - WINDOW))
    waiting = set(a.reporters)
    by_file: dict[str, set[int]] = {}
    for source, ranks in (
        ev.filter(pl.col("rank").is_not_null() & (pl.col("rank") >= 0))
        .group_by("source")
        .agg(pl.col("rank").unique())
        .iter_rows()
    ):
        by_file[source] = set(ranks)
    out: dict[int, list[Orphan]] = {}
    for r in rows.sort("_i").iter_rows(named=True):
        if r["host"] is not None:
            scope, where = set(book.ranks_on(r["host"])), f"of host {r['host']}"
        else:
            scope, where = set(by_file.get(r["source"], ())), f"writing to {PurePath(r['source']).name}"
            if len(scope) >= 2:
                scope |= set(no_log)
        left = scope - waiting
        if len(left) == 1 and len(scope) >= 2:
            rank = left.pop()
            out.setdefault(rank, []).append(Orphan(rank, r, where))
    return out
