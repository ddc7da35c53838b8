"""NCCL result chains: a failure that NCCL reported only through its error-propagation trace.

The table of result codes and the source files that place them is ``nccl_results.toml``.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import polars as pl

from nccllog.correlate import wording as w
from nccllog.correlate.rules.base import Context, Draft, evidence

CHAIN_SCORE = 0.4  # a chain says that and roughly where NCCL failed, never why: low confidence
EXPLAIN_WINDOW = 8  # events: the WARN a chain carries up is logged right before its first `->` line


@dataclass(frozen=True)
class Result:
    """One ncclResult_t: its name and how its chains are placed."""

    name: str
    category: str | None
    by_source: tuple[tuple[tuple[str, ...], str], ...]

    def place(self, src_file: str | None) -> str | None:
        """The category of a chain whose first line is in ``src_file``."""
        src = (src_file or "").split(":", 1)[0]
        for prefixes, category in self.by_source:
            if src.startswith(prefixes):
                return category
        return self.category


@cache
def results() -> dict[int, Result]:
    """The result table, by code."""
    raw = tomllib.loads(resources.files("nccllog.correlate").joinpath("nccl_results.toml").read_text("utf-8"))
    return {
        int(r["code"]): Result(
            name=r["name"],
            category=r.get("category"),
            by_source=tuple((tuple(b["prefix"]), b["category"]) for b in r.get("by_source", [])),
        )
        for r in raw["result"]
    }


def chain_starts(ev: pl.DataFrame) -> list[dict[str, Any]]:
    """The first line of each process's result chain (where the failure started), in log order."""
    rows = ev.filter(pl.col("signal") == "nccl_result").sort("_i")
    first: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in rows.iter_rows(named=True):
        first.setdefault((r["source"], r.get("host"), r.get("pid")), r)
    return list(first.values())


def result_chains(ctx: Context) -> list[Draft]:
    """A cause for chains that no WARN or error line explains, placed by code and source file."""
    starts = chain_starts(ctx.ev)
    explained = _explained(ctx.ev, starts)
    starts = [r for r in starts if r["_i"] not in explained]
    if not starts:
        return []
    by_cat: dict[str, list[dict[str, Any]]] = {}
    for r in starts:
        res = results().get(int(r["code"])) if r.get("code") is not None else None
        cat = res.place(r.get("src_file")) if res else None
        if cat:
            by_cat.setdefault(cat, []).append(r)
    drafts = []
    for cat, rows in by_cat.items():
        d = Draft(category=cat, culprits=(), kind="result_chain", score=CHAIN_SCORE)
        first = rows[0]
        name = results()[int(first["code"])].name
        where = f"{first['src_file']}"
        procs = f"{len(rows)} process{'es' if len(rows) > 1 else ''}"
        warn = _warning_before(ctx.ev, first)
        if warn is None:
            d.summary = f"NCCL failed with {name} in {where} ({procs}); no WARN line or exception saying why was kept."
            d.rules_out.append("A trace says where NCCL failed, not why: the WARN line before it would.")
            d.collect.append(
                "NCCL_DEBUG=WARN at least (INFO with NCCL_DEBUG_SUBSYS=INIT,NET), so the WARN line before the trace is kept."
            )
        else:
            d.summary = (
                f"NCCL failed with {name} in {where} ({procs}), right after it warned: "
                f"{w.excerpt(warn['message'] or warn['text'], 100)}."
            )
        d.rules_in.append(f"NCCL's error trace starts at {where} -> {first['code']} ({name}) in {procs}.")
        d.evidence = [evidence(r, "where the error trace starts") for r in rows[:4]]
        if warn is not None:
            d.evidence.insert(0, evidence(warn, "the warning the trace carries up"))
        drafts.append(d)
    return drafts


def _warning_before(ev: pl.DataFrame, start: dict[str, Any]) -> dict[str, Any] | None:
    """The NCCL WARN its process logged just before a chain's first line (a WARN no pattern of its
    own explains, so it placed nothing by itself), or None."""
    return _just_before(ev, [start], pl.col("signal") == "nccl_warn").get(start["_i"])


def _explained(ev: pl.DataFrame, starts: list[dict[str, Any]]) -> set[int]:
    """The chain starts (``_i``) whose process logged a WARN or error with a cause of its own just
    before them (the line the chain carries up): such a chain is no evidence of another cause."""
    told = (
        pl.col("severity").is_in(["error", "critical"])
        & pl.col("category").is_not_null()
        & (pl.col("signal") != "nccl_result")
    )
    return set(_just_before(ev, starts, told))


def _just_before(ev: pl.DataFrame, starts: list[dict[str, Any]], lines: pl.Expr) -> dict[int, dict[str, Any]]:
    """For each chain start (by ``_i``), the last of ``lines`` that its process (source, host, pid)
    logged within ``EXPLAIN_WINDOW`` events before it. One join for every chain, not a scan of the
    events per chain."""
    if not starts:
        return {}
    key = ["source", "host", "pid"]
    told = ev.filter(lines).select(*key, told=pl.col("_i"))
    chains = pl.DataFrame(
        [{k: r.get(k) for k in [*key, "_i"]} for r in starts],
        schema={k: ev.schema[k] for k in [*key, "_i"]},
    )
    near = (
        chains.join(told, on=key, nulls_equal=True)
        .filter(pl.col("told").is_between(pl.col("_i") - EXPLAIN_WINDOW, pl.col("_i") - 1))
        .group_by("_i")
        .agg(pl.col("told").max())
    )
    if not near.height:
        return {}
    rows = {r["_i"]: r for r in ev.filter(pl.col("_i").is_in(near["told"].implode())).iter_rows(named=True)}
    return {int(i): rows[t] for i, t in near.iter_rows()}
