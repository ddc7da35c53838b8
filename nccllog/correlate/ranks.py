"""Dataset-level rank resolution (placeholder: prefix ranks only; the full resolver replaces it)."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from nccllog.match.library import INTERNAL_COLUMNS


@dataclass(frozen=True)
class Topology:
    """What the whole dataset says about ranks, hosts and processes."""

    world_size: int | None = None
    world_size_evidence: str = ""
    pid_rank: dict[tuple[str | None, int], int] = field(default_factory=dict)
    host_ranks: dict[str, tuple[int, ...]] = field(default_factory=dict)
    rank_host: dict[int, str] = field(default_factory=dict)
    ip_host: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def resolve(events: pl.DataFrame) -> tuple[pl.DataFrame, Topology]:
    """Fill rank/host/pid/time/attribution from all the evidence and drop the internal columns."""
    out = events.with_columns(
        pl.coalesce("rank", "_file_rank").alias("rank"),
        pl.coalesce("host", "_file_host").alias("host"),
        pl.when(pl.col("rank").is_not_null()).then(pl.lit("prefix")).otherwise(pl.lit("no rank evidence")).alias(
            "attribution"
        ),
    )
    return out.drop([c for c in INTERNAL_COLUMNS if c in out.columns]), Topology()
