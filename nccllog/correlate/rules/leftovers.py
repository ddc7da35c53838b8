"""Leftovers: error lines no other rule explained, under their pattern's category."""

from __future__ import annotations

import polars as pl

from nccllog.correlate import earned
from nccllog.correlate import wording as w
from nccllog.correlate.rules.base import Context, Draft, _first, _hosts_seen, _remediation, evidence
from nccllog.correlate.rules.scores import S
from nccllog.correlate.rules.vocabulary import vocabulary
from nccllog.vocab import CATEGORY_TITLES, Severity, Signal


def leftovers(ctx: Context, covered: set[str]) -> list[Draft]:
    """Errors no other rule explained: their pattern's category, low confidence."""
    rows = ctx.ev.filter(
        pl.col("severity").is_in([Severity.ERROR, Severity.CRITICAL])
        & pl.col("category").is_not_null()
        & ~pl.col("category").is_in(list(covered))
    )
    rows = rows.filter(
        ~pl.col("signal").is_in(
            [Signal.COLLECTIVE_TIMEOUT, Signal.WORK_STATUS, Signal.ROOT_CAUSE, Signal.PROCESS_EXIT]
        )
    )
    drafts = []
    for cat, sub in rows.group_by("category", maintain_order=True):
        d = Draft(category=str(cat[0]), culprits=(), kind="leftover")
        ranks = (
            sorted({r for r in sub["subject"].to_list() if r is not None}) if "subject" in sub.columns else []
        )
        witnessed = set(sub["pattern"].to_list()) <= ctx.library.witness_patterns
        if ranks and not set(ranks) >= set(ctx.seen) and not witnessed:
            d.culprits = tuple(ranks)
        if witnessed and (common := _common_side(sub)) is not None:
            d.culprits = (common,)
            d.rules_in.append(
                f"Every pair of ranks reported includes rank {common}: the others agree with each other, "
                f"rank {common} differs from each of them."
            )
        d.score = S.leftover_base
        first = _first(sub.to_dicts(), 1)[0]
        who = w.ranks_phrase(ranks, capital=True) if ranks else "A process"
        title = CATEGORY_TITLES.get(str(cat[0]), str(cat[0])).lower()
        d.summary = f"{who} logged {w.excerpt(first['message'] or first['text'], 80)}: a sign of {title}."
        d.rules_in.append(
            f"{sub.height} line(s) of pattern(s) {', '.join(sorted(set(sub['pattern'].to_list())))[:200]}."
        )
        d.evidence = [evidence(r) for r in _first(sub.to_dicts(), 4)]
        d.remediation = _remediation(ctx.library, sub.head(3).to_dicts())
        drafts.append(d)
    return drafts


def _common_side(sub: pl.DataFrame) -> int | None:
    """The one rank that is a side of every reported pair (``own_rank`` vs ``other_rank`` of a
    mismatch report), when there are at least two different pairs: the odd one out."""
    if not {"own_rank", "other_rank"} <= set(sub.columns):
        return None
    pairs = {
        frozenset((int(a), int(b)))
        for a, b in sub.select("own_rank", "other_rank").iter_rows()
        if a is not None and b is not None and a != b
    }
    if len(pairs) < 2:
        return None
    common = frozenset.intersection(*pairs)
    return next(iter(common)) if len(common) == 1 else None


def cut_traceback(ctx: Context) -> list[Draft]:
    """A traceback that began and was cut before its exception line, with nothing else failing.

    A paste that stops inside a traceback still shows a process raising; with no NCCL warning, no
    c10d frame, no NCCL setup left unfinished, no launcher reporting a child's end and no error line
    anywhere, that is the application's own error (``other``), on the rank or host that began it.
    Tracebacks begun by several processes at once are a failure of the job's shared work (a
    collective, a barrier) as often as the application's: no verdict from them. Low confidence: the
    exception itself is not there.
    """
    ev = ctx.ev
    voc = vocabulary()
    if ev.filter(
        pl.col("severity").is_in([Severity.ERROR, Severity.CRITICAL])
        | pl.col("signal").is_in([Signal.NCCL_RESULT, Signal.COMPLETION, *voc.cut_traceback_blockers])
        | pl.col("pattern").is_in(list(voc.unexplained_warn_patterns))
    ).height:
        return []
    heads = ev.filter(pl.col("pattern").is_in(list(earned.rules().unfinished_error_patterns)))
    if not heads.height or _nccl_setup_unfinished(ev) or _writers(heads) > 1:
        return []
    d = Draft(category="other", culprits=(), kind="cut_traceback", score=S.leftover_base)
    ranks = {int(r) for r in heads["rank"].drop_nulls().to_list()}
    if ranks and ranks < set(ctx.seen):
        d.culprits = tuple(sorted(ranks))
    hosts = set(heads["host"].drop_nulls().to_list())
    if hosts and not d.culprits and hosts < _hosts_seen(ctx):
        d.hosts = tuple(sorted(hosts))
    where = w.ranks_phrase(sorted(d.culprits), capital=True) if d.culprits else "A process"
    if d.hosts:
        where += f" on {w.host_list(list(d.hosts))}"
    d.summary = (
        f"{where} began a Python traceback that the log cuts before its exception line; "
        "nothing else failed, so it is read as the application's own error."
    )
    d.rules_in.append(
        f"{heads.height} traceback header(s), no error line, no NCCL warning and no c10d frame in the logs."
    )
    d.evidence = [evidence(r) for r in _first(heads.to_dicts(), 4)]
    return [d]


def _writers(heads: pl.DataFrame) -> int:
    """How many processes began these tracebacks, by the most telling column they share (rank, then
    host, then pid); one when none is known (a process may chain several tracebacks)."""
    for col in ("rank", "host", "pid"):
        if col in heads.columns and (n := heads[col].drop_nulls().n_unique()):
            return int(n)
    return 1


def _nccl_setup_unfinished(ev: pl.DataFrame) -> bool:
    """NCCL logged (it was setting up) and no ``Init COMPLETE`` followed: a cut traceback may then be
    NCCL's own failure."""
    if not ev.filter(pl.col("pattern").str.starts_with("nccl.")).height:
        return False
    return "phase" not in ev.columns or not ev.filter(pl.col("phase") == "Init COMPLETE").height
