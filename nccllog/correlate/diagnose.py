"""Events -> Incident: per-rank metrics, collective alignment, a merged timeline, and the verdict.

Order of work (each step a function of the previous one's table):
1. ``frame.prepare``: every field column present and typed, rows numbered in file order.
2. failures weighed (``ranks_state.classify_failures``), world size and places
   (``network.build``), the rank each failure line is about (``subject_ranks``).
3. host clock offsets from sync points, corrected times (``timeline``).
4. watchdog timeouts aligned per (group, seq) (``collectives``), per-rank metrics (``rank_states``).
5. every rule of the ``rules`` package proposes causes; the best-scored one is the verdict, ``unknown``
   when nothing separates them, ``no_failure`` when nothing failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from nccllog.attribution import MAX_RANKS, Topology
from nccllog.correlate import earned, flight, network, opcounts, ras, results, setup, stacks, timeline
from nccllog.correlate import wording as w
from nccllog.correlate.collectives import Aligned, align, collect_timeouts, group_members, group_size_floor
from nccllog.correlate.frame import DEFAULT_PG, apply_offsets, prepare, row_dicts, whole_versions
from nccllog.correlate.ranks_state import (
    RankState,
    classify_failures,
    infer_world,
    rank_states,
    subject_ranks,
    unattributed_failures,
)
from nccllog.correlate.rules import failstop, hangs, leftovers, remedies, stalls, startup, verdict
from nccllog.correlate.rules import network as network_rules
from nccllog.correlate.rules.base import Context, Draft, collect_next_time, evidence
from nccllog.correlate.rules.scores import S
from nccllog.match.library import Library
from nccllog.model import Coverage, Finding, Hypothesis, Incident, RankInfo
from nccllog.vocab import Category, Confidence, Severity, Signal

_FINDING_SEVERITIES = (Severity.WARNING, Severity.ERROR, Severity.CRITICAL)
WEAK_WORLD_EVIDENCE = ("highest rank seen", "highest Slurm task id (one task per rank)")


def findings_from_events(events: pl.DataFrame, library: Library) -> tuple[Finding, ...]:
    """The JSON contract's findings: every event of severity warning or above, in source order."""
    rows = events.filter(pl.col("severity").is_in(list(_FINDING_SEVERITIES))).sort("source", "line")
    fields = _pattern_fields(library)
    return tuple(finding(row, library, fields) for row in row_dicts(rows))


def _pattern_fields(library: Library) -> dict[str, tuple[str, ...]]:
    return {p.id: tuple(p.fields) for p in library.patterns}


def finding(
    row: dict[str, Any], library: Library, fields_of: dict[str, tuple[str, ...]] | None = None
) -> Finding:
    """One events row as a Finding (its pattern's fields only)."""
    if fields_of is None:
        pat = library.get(row["pattern"]) if row.get("pattern") else None
        names: tuple[str, ...] = tuple(pat.fields) if pat else ()
    else:
        names = fields_of.get(row.get("pattern") or "", ())
    fields = {k: row[k] for k in names if row.get(k) is not None}
    t = row.get("time")
    return Finding(
        pattern=row["pattern"] or "",
        source=row["source"],
        line=row["line"],
        rank=row["rank"],
        host=row["host"],
        time=t.isoformat() if t is not None else None,
        fields=fields,
        severity=row["severity"] or Severity.INFO,
        text=row["text"],
        signal=row["signal"] or "",
    )


def diagnose(
    events: pl.DataFrame,
    topology: Topology,
    *,
    coverage: Coverage,
    templates: Sequence[tuple[str, int, str]],
    library: Library,
    inputs: Sequence[str],
) -> Incident:
    """Correlate the ranks and pick the best hypothesis."""
    events = whole_versions(events)
    findings = findings_from_events(events, library)
    ev = classify_failures(prepare(events), library.failure_weights)
    world_size, why = infer_world(ev, topology)
    if world_size is not None and world_size > MAX_RANKS:  # a garbled line, not a job size
        world_size, why = None, ""
    seen = tuple(sorted({int(r) for r in ev["rank"].drop_nulls().unique().to_list()}))
    world = tuple(range(world_size)) if world_size else seen
    seen_set = set(seen)
    missing = tuple(r for r in world if r not in seen_set)
    book = network.build(ev, topology, world)
    ev = subject_ranks(ev, topology, book)
    offsets = timeline.estimate_offsets(ev)
    ev = apply_offsets(ev, offsets)
    timeouts = collect_timeouts(ev)
    members = group_members(ev)
    aligned = align(timeouts, world, members)
    if why in WEAK_WORLD_EVIDENCE:
        # More processes reported a default-group collective (Ray folds their lines), or an
        # all-gather's sizes imply a bigger group, than the highest rank seen accounts for: the
        # world is at least that big.
        biggest = max([group_size_floor(timeouts), *(a.size for a in aligned if a.pg == DEFAULT_PG)])
        if world_size is not None and biggest > world_size:
            world_size = biggest
            world = tuple(range(world_size))
            missing = tuple(r for r in world if r not in seen_set)
            aligned = align(timeouts, world, members)
    states = rank_states(ev, timeouts, world, book)
    ctx = Context(
        ev=ev,
        states=states,
        world=world,
        world_size=world_size,
        seen=seen,
        missing=missing,
        aligned=aligned,
        book=book,
        library=library,
        coverage=coverage,
        unattributed=unattributed_failures(ev),
        world_known=world_size is not None and why not in WEAK_WORLD_EVIDENCE,
        unaligned=timeline.unaligned_hosts(ev, offsets),
        versions=remedies.shown_versions(ev),
    )
    drafts: list[Draft] = []
    for rule in (
        hangs.hang,
        failstop.failstop,
        network_rules.network,
        startup.rule,
        stalls.rule,
        opcounts.coll_alignment,
        flight.rule,
        stacks.rule,
        ras.rule,
        setup.setup_evidence,
        results.result_chains,
    ):
        drafts.extend(rule(ctx))
    drafts.extend(leftovers.leftovers(ctx, {d.category for d in drafts}))
    if not drafts:
        drafts.extend(leftovers.cut_traceback(ctx))
    verdict.reconcile(ctx, drafts)
    verdict.finish(ctx, drafts)
    earned.hold_unearned(ctx, drafts)
    hypotheses = verdict.ranked(drafts)
    chosen = _choose(ctx, hypotheses)
    if not hypotheses or chosen is not hypotheses[0]:
        hypotheses = [chosen, *hypotheses]
    return Incident(
        verdict=chosen,
        hypotheses=tuple(hypotheses),
        world_size=world_size,
        ranks_seen=seen,
        ranks_missing=missing,
        ranks=_rank_infos(states, aligned, library),
        findings=findings,
        coverage=coverage,
        events=events,
        collectives=tuple(a.row() for a in aligned),
        timeline=timeline.build(ev),
        host_offsets=offsets,
        unmatched_templates=tuple(templates),
        inputs=tuple(inputs),
    )


def _choose(ctx: Context, hyps: list[Hypothesis]) -> Hypothesis:
    """The verdict: the best hypothesis, ``no_failure`` (on positive evidence only), or ``unknown``."""
    # NCCL's error trace is printed at INFO, but only on failure.
    failed = (
        ctx.ev.filter(
            pl.col("severity").is_in([Severity.ERROR, Severity.CRITICAL])
            | (pl.col("signal") == Signal.NCCL_RESULT)
        ).height
        > 0
    )
    if not hyps:
        if failed:
            return _unknown(ctx, hyps, verdict.unplaced_error(ctx))
        return _no_failure(ctx)
    best = hyps[0]
    if best.score < S.confidence_unknown_below:
        return _unknown(ctx, hyps, "the evidence for every explanation is weak")
    if len(hyps) > 1:
        second = hyps[1]
        if (
            best.score - second.score < S.confidence_tie
            and second.category != best.category
            and second.culprit_ranks != best.culprit_ranks
            and {best.category, second.category}
            != {Category.STRAGGLER_HANG, Category.CONFIG_TIMEOUT_TOO_SHORT}
        ):
            return _unknown(ctx, hyps, "two explanations fit the logs equally well")
    return best


def _no_failure(ctx: Context) -> Hypothesis:
    """Nothing failed. That is an answer only with positive evidence: the run's own end (teardown,
    a finished agent, the script's last line) or, for a paste of warnings, the warnings themselves
    (none of which is an error). A log that merely stops is what a silent hang leaves: ``unknown``."""
    n = len(ctx.seen)
    finished = ctx.ev.filter(pl.col("signal") == Signal.COMPLETION)
    warned = ctx.ev.filter(pl.col("severity") == Severity.WARNING).height > 0
    raised = verdict.uncaught(ctx)
    if not finished.height and raised:
        return _unknown(ctx, [], f"an error escaped a process ({raised}), and no rule placed it")
    if not finished.height and (warn := verdict.nccl_warning(ctx)):
        return _unknown(ctx, [], f"NCCL warned of a fault ({warn}) that no rule placed")
    if not finished.height and not warned:
        return _unknown(
            ctx,
            [],
            "no line failed, but nothing shows that the run finished either; a hang that no watchdog "
            "reported leaves exactly this",
        )
    complete = not ctx.missing and not ctx.coverage.skipped and not ctx.coverage.truncated_lines
    ranks_done = {int(r) for r in finished["rank"].drop_nulls().to_list()}
    everyone = bool(n) and (ranks_done >= set(ctx.seen) or finished.height >= n)
    confidence: Confidence
    if finished.height:
        confidence = Confidence.HIGH if complete and everyone else Confidence.MEDIUM
        why = "No line of error severity and no hang signal on any rank; the run's own end is logged."
    else:
        confidence = Confidence.LOW
        why = "Only warnings, none of them an error; nothing shows the run stopped, nor that it finished."
    return Hypothesis(
        category=Category.NO_FAILURE,
        culprit_ranks=(),
        culprit_hosts=(),
        confidence=confidence,
        summary=(
            f"No failure found: {w.plural(n, 'rank')} logged no error, timeout or crash."
            if n
            else "No failure found in the logs."
        ),
        score=0.0,
        evidence=tuple(evidence(r) for r in finished.head(2).to_dicts()),
        rules_in=(why,),
        rules_out=(
            () if complete else ("Some ranks' logs are missing or cut; a failure there would not show.",)
        ),
    )


def _unknown(ctx: Context, hyps: list[Hypothesis], why: str) -> Hypothesis:
    alts = "; ".join(f"{h.category} ({h.summary})" for h in hyps[:2])
    summary = f"The logs do not separate the possible causes: {why}" + (f" — {alts}" if alts else "") + "."
    return Hypothesis(
        category=Category.UNKNOWN,
        culprit_ranks=(),
        culprit_hosts=(),
        confidence=Confidence.LOW,
        summary=summary,
        score=hyps[0].score if hyps else 0.0,
        evidence=hyps[0].evidence if hyps else (),
        rules_in=(why[:1].upper() + why[1:] + ".",),
        rules_out=tuple(f"{h.category}: {h.summary}" for h in hyps[:3]),
        collect_next_time=tuple(collect_next_time(ctx)),
    )


def _rank_infos(
    states: dict[int, RankState], aligned: list[Aligned], library: Library
) -> tuple[RankInfo, ...]:
    fields = _pattern_fields(library)
    silent = set(aligned[0].silent) if aligned and aligned[0].membership_known else set()
    return tuple(_rank_info(st, aligned, library, fields, silent) for st in states.values())


def _rank_info(
    st: RankState,
    aligned: list[Aligned],
    library: Library,
    fields: dict[str, tuple[str, ...]],
    silent: set[int],
) -> RankInfo:
    main_pg = aligned[0].pg if aligned else DEFAULT_PG
    first = st.timeouts[0] if st.timeouts else None
    return RankInfo(
        rank=st.rank,
        host=st.host,
        local_rank=st.local_rank,
        pids=st.pids,
        sources=st.sources,
        first_error=finding(st.first_error, library, fields) if st.first_error else None,
        last_time=st.last_time.isoformat() if st.last_time else None,
        last_enqueued=st.last_enqueued.get(main_pg),
        last_completed=st.last_completed.get(main_pg),
        last_step=st.last_step,
        timed_out_seq=first.seq if first else None,
        lines=st.lines,
        status=_status(st, silent),
    )


def _status(st: RankState, silent: set[int]) -> str:
    if not st.seen:
        return "no log"
    if st.failure is not None and st.failure.weight >= S.weight_cause:
        short: dict[str, str] = {
            Category.OOM: "OOM",
            Category.CUDA_ERROR: "CUDA error",
            Category.SEGFAULT_CRASH: "crashed",
            Category.GPU_HARDWARE_XID: "Xid",
        }
        return short.get(st.failure.category, st.failure.category.replace("_", " "))
    if st.timeouts:
        t = st.timeouts[0]
        return f"timed out at {w.collective(t.op, t.seq)}"
    if st.rank in silent:
        return "silent"
    if st.exitcode is not None:
        return f"exited {st.exitcode}"
    return "ok"
