"""Place generic failure lines in a cause category by their words (knowledge in taxonomy.toml)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import polars as pl
import regex

from nccllog.model import CATEGORIES


@dataclass(frozen=True)
class Placement:
    """One class of the taxonomy: lines of these signals with these words point to this category."""

    category: str
    weight: float
    signals: tuple[str, ...]
    words: tuple[str, ...]
    examples: tuple[str, ...]
    near_misses: tuple[str, ...]
    killed: bool = False  # the words report a death by SIGKILL, told by another process
    alone: bool = False  # ... a death of any cause: it counts only when nothing else failed
    over: tuple[str, ...] = ()  # re-place only lines placed in one of these so far (empty: any)


@cache
def _doc() -> dict[str, Any]:
    text = resources.files("nccllog.correlate").joinpath("taxonomy.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def boilerplate() -> tuple[str, ...]:
    """Phrases after which a line lists possible causes, not the one that happened."""
    return tuple(_doc().get("boilerplate", ()))


@cache
def placements() -> tuple[Placement, ...]:
    """The classes of taxonomy.toml, in order (the first that fits a line wins)."""
    doc = _doc()
    out = []
    for c in doc["class"]:
        if c["category"] not in CATEGORIES:
            raise ValueError(f"taxonomy.toml: {c['category']!r} is not a verdict category")
        out.append(
            Placement(
                category=c["category"],
                weight=float(c["weight"]),
                signals=tuple(c["signals"]),
                words=tuple(c["words"]),
                examples=tuple(c.get("examples", ())),
                near_misses=tuple(c.get("near_misses", ())),
                killed=bool(c.get("killed", False)),
                alone=bool(c.get("alone", False)),
                over=tuple(c.get("over", ())),
            )
        )
    return tuple(out)


def reports_sigkill(text: str, *, alone: bool = False) -> bool:
    """Whether a line reports a process's death by SIGKILL in the words of a ``killed`` class (with
    ``alone``: of a class that counts only when nothing else failed)."""
    low = text.lower()
    return any(word in low for word in _sigkill_words(alone))


@cache
def _sigkill_words(alone: bool) -> tuple[str, ...]:
    """The lower-cased words of the ``killed`` classes (only the ``alone`` ones when asked)."""
    return tuple(w.lower() for p in placements() if p.killed and (p.alone or not alone) for w in p.words)


PLACE_TEXT = "_ptext"  # the column ``place`` reads: ``place_text()``, computed once per table


def place_text() -> pl.Expr:
    """The text ``place`` searches: a row's line without the boilerplate, for the rows a class can
    move (its signal is a class's, and its text holds one of the classes' words), else null: most
    rows are searched once, for any word, and never cut or searched again."""
    sig = pl.col("signal")
    signals = sorted({s for p in placements() for s in p.signals})
    words = sorted({w for p in placements() for w in p.words})
    raw = pl.col("text").fill_null("")
    text: pl.Expr = pl.when(
        sig.is_in(signals) & raw.str.contains_any(words, ascii_case_insensitive=True)
    ).then(raw)
    cut = boilerplate()
    if cut:
        text = text.str.replace(r"(?:" + "|".join(regex.escape(c) for c in cut) + r").*$", "")
    return text.alias(PLACE_TEXT)


def place(category: str, weight: str) -> tuple[pl.Expr, pl.Expr]:
    """The columns ``category`` and ``weight`` of each events row, re-placed where a taxonomy class
    fits its text (the column ``PLACE_TEXT``). Each class reads columns, not expressions: polars
    would evaluate an expression again in every class's test."""
    sig, text = pl.col("signal"), pl.col(PLACE_TEXT)
    # Built from the last class outwards, so the first class that fits a line wins.
    placed_cat, placed_w = pl.col(category), pl.col(weight)
    for p in reversed(placements()):
        fits = sig.is_in(list(p.signals)) & text.str.contains_any(list(p.words), ascii_case_insensitive=True)
        if p.over:
            fits = fits & pl.col(category).is_in(list(p.over))
        placed_cat = pl.when(fits).then(pl.lit(p.category)).otherwise(placed_cat)
        placed_w = pl.when(fits).then(pl.max_horizontal(pl.col(weight), pl.lit(p.weight))).otherwise(placed_w)
    return placed_cat, placed_w


def place_by_frame(ev: pl.DataFrame) -> pl.DataFrame:
    """Re-place generic exceptions (``_fcat`` ``other``) raised below a process-group set-up frame as
    set-up failures (``[setup_frames]`` of taxonomy.toml)."""
    cfg = _doc()["setup_frames"]
    if ev.is_empty() or not (ev["signal"] == "setup_frame").any():
        return ev
    ev = ev.with_row_index("_fi")
    frames = ev.filter(pl.col("signal") == "setup_frame").select("source", pl.col("line").alias("_frame"))
    raised = ev.filter((pl.col("signal") == "python_exception") & (pl.col("_fcat") == "other"))
    below = (
        raised.select("_fi", "source", "line")
        .sort("line")
        .join_asof(
            frames.sort("_frame"),
            left_on="line",
            right_on="_frame",
            by="source",
            strategy="backward",
            check_sortedness=False,  # sorted by line above; polars cannot check it per `by` group
        )
    )
    hit = below.filter(pl.col("line") - pl.col("_frame") <= int(cfg["max_gap"]))["_fi"]
    text = pl.col("text").fill_null("")
    connect = text.str.contains_any(list(cfg["connect_words"]), ascii_case_insensitive=True)
    setup = pl.when(connect).then(pl.lit(cfg["connect_category"])).otherwise(pl.lit(cfg["other_category"]))
    below_setup = pl.col("_fi").is_in(hit.implode())
    return ev.with_columns(
        _fcat=pl.when(below_setup).then(setup).otherwise(pl.col("_fcat")),
        _fw=pl.when(below_setup)
        .then(pl.max_horizontal("_fw", pl.lit(float(cfg["weight"]))))
        .otherwise("_fw"),
    ).drop("_fi")
