"""When a verdict may say ``high``: the confidence a rule's score asks for must be earned.

A score says how well a rule's story fits; ``high`` promises more: the culprit's own failure is in
the logs (or a cross-rank contrast shows it), and no other story is close. Each test below holds a
draft at ``medium`` with a sentence saying why; the thresholds are in ``earned.toml``.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources

import polars as pl

from nccllog.correlate import wording as w
from nccllog.correlate.rules.base import Context, Draft, failure_lines
from nccllog.vocab import HOST_CAUSES


@dataclass(frozen=True)
class Rules:
    """The data behind the tests (see ``earned.toml``)."""

    contrast_kinds: frozenset[str]
    close_margin: float
    category_free: frozenset[str]
    rank_causes: frozenset[str]
    unfinished_error_patterns: frozenset[str]


@cache
def rules() -> Rules:
    raw = tomllib.loads(resources.files("nccllog.correlate").joinpath("earned.toml").read_text("utf-8"))
    return Rules(
        contrast_kinds=frozenset(raw["contrast_kinds"]),
        close_margin=float(raw["close_margin"]),
        category_free=frozenset(raw["category_free"]),
        rank_causes=frozenset(raw["rank_causes"]),
        unfinished_error_patterns=frozenset(raw["unfinished_error_patterns"]),
    )


@dataclass(frozen=True)
class _Failures:
    """What the failure lines show (``hypotheses.failure_lines``)."""

    own: frozenset[int]  # ranks a failure line is about (its writer, or the worker a launcher names)
    unfinished: frozenset[int]  # ranks whose error began (a traceback) but whose error line is not there
    stated: frozenset[str]  # categories some failure line points at by itself
    placed: frozenset[str]  # ... of which some line is tied to a rank
    unplaced_writers: frozenset[str]  # ... of which no line is tied to a rank, and some has its writer's pid


def hold_unearned(ctx: Context, drafts: list[Draft]) -> None:
    """Cap at ``medium`` every draft whose ``high`` is not earned, saying why."""
    bad = failure_lines(ctx.ev)
    cats = bad["_fcat"].drop_nulls()
    own = frozenset(int(r) for r in bad["subject"].drop_nulls().to_list())
    began = ctx.ev.filter(pl.col("pattern").is_in(list(rules().unfinished_error_patterns)))["rank"]
    placed = frozenset(
        str(c) for c in bad.filter(pl.col("subject").is_not_null())["_fcat"].drop_nulls().to_list()
    )
    seen = _Failures(
        own=own,
        unfinished=frozenset(int(r) for r in began.drop_nulls().to_list()) - own,
        stated=frozenset(str(c) for c in cats.to_list()),
        placed=placed,
        unplaced_writers=frozenset(
            str(c) for c in bad.filter(pl.col("pid").is_not_null())["_fcat"].drop_nulls().to_list()
        )
        - placed,
    )
    for d in drafts:
        # A machine's fault (a NIC, a GPU) is proven by its own line, whichever rank wrote it.
        hosts = set(bad.filter(pl.col("_fcat") == d.category)["host"].drop_nulls().to_list())
        covered = seen.own | {r for r, h in ctx.book.rank_host.items() if h in hosts}
        why = _unearned(ctx, d, drafts, covered, seen)
        if why and not d.ceiling_why:  # a rule's own reason, set while drafting, stays
            d.ceiling_why = why


def _unearned(
    ctx: Context, d: Draft, drafts: list[Draft], covered: frozenset[int], seen: _Failures
) -> str | None:
    """Why ``d`` has not earned ``high`` (None when it has)."""
    if d.culprits:
        lacking = [r for r in d.culprits if r not in covered]
        if lacking and not (d.kind in rules().contrast_kinds and not ctx.missing):
            return f"no error line of {w.ranks_phrase(lacking)}'s own; the culprit is inferred from what other ranks logged"
        if not set(ctx.seen) - set(d.culprits) and not (
            ctx.world_known and ctx.world_size == len(d.culprits)
        ):
            return "only the culprit's own log was given, so nothing shows the other ranks did not fail the same way"
        if others := sorted(seen.unfinished - set(d.culprits)):
            return (
                f"{w.ranks_phrase(others)} also began a traceback whose error is cut from the logs: "
                "it may have failed the same way"
            )
    elif d.category in HOST_CAUSES and not d.hosts:
        return "the logs do not say which machine it is"
    elif d.category in rules().rank_causes and len(ctx.seen) != 1 and d.category not in seen.placed:
        # Failure lines tied to ranks but no culprit is a deliberate "every rank alike". With no
        # rank seen at all, the job's size is unknown too (an srun task, a pasted line): a
        # process failed, and which one it was is not in the logs.
        return "the logs do not say which rank it was"
    elif d.category not in seen.stated and d.category not in rules().category_free:
        return "no line states this cause; it is inferred"
    elif d.category in seen.unplaced_writers:
        # a process of the job wrote the failure (its NCCL header or launcher gives a pid), so the
        # culprit is a rank, and which one the logs do not show
        return "a process of the job logged the failure, and which rank it was is not in the logs"
    rival = next(
        (
            o
            for o in drafts
            if o is not d
            and o.category != d.category
            and o.culprits != d.culprits
            and d.score - o.score < rules().close_margin
            and o.score <= d.score
        ),
        None,
    )
    if rival is not None:
        return f"{rival.category.replace('_', ' ')} fits the logs almost as well"
    return None
