"""The verdict: reconciliation of causes and symptoms, data-quality penalties, ranking and confidence."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import polars as pl

from nccllog.correlate import wording as w
from nccllog.correlate.rules.base import Context, Draft, _host, _hosts_seen, evidence, writer_hosts
from nccllog.correlate.rules.scores import S
from nccllog.correlate.rules.vocabulary import vocabulary
from nccllog.ingest.timestamps import parse_iso
from nccllog.model import Evidence, Hypothesis
from nccllog.vocab import HOST_CAUSES, Category, Confidence, Severity, Signal

CAUSE_KINDS = (
    "failstop",
    "network",
    "network_local",
    "p2p",
    "bootstrap",
    "startup",
    "system_version",
    "driver_hang",
    "setup",
    "coll_mismatch",
    "flight",  # correlate/flight.py: divergence across Flight Recorder dumps
)


SYMPTOM_KINDS = (
    "silent",
    "nobody",
    "enqueue_skew",
    "desync",
    "heartbeat",
    "config",
    "progress",
    "stall_all",
    "stall_subset",
)


def reconcile(ctx: Context, drafts: list[Draft]) -> None:
    """A cause outranks the hang it explains: an OOM on the rank the others waited for, IB errors
    before everybody's timeout. The hang stays as a hypothesis, saying what explains it."""
    causes = [d for d in drafts if d.kind in CAUSE_KINDS and d.score >= S.reconcile_cause_min and not d.after]
    for h in drafts:
        if h.kind not in SYMPTOM_KINDS:
            continue
        for c in causes:
            hosts_of_h = {ctx.states[r].host for r in h.culprits if r in ctx.states}
            related = (
                not h.culprits
                or bool(set(h.culprits) & set(c.culprits))
                or bool(set(c.hosts) & hosts_of_h)
                or (not c.culprits and not c.hosts)
            )
            if not related:
                continue
            if c.score <= h.score:
                c.score = min(S.reconcile_cap, h.score + S.reconcile_bonus)
            h.rules_out.append(f"What explains the wait: {c.summary}")
    _awaited_failed(drafts)
    _hardware_first(ctx, drafts)


def _awaited_failed(drafts: list[Draft]) -> None:
    """Ranks that timed out in the store waiting for a rank point at it; when that rank's own
    failure is seen (its exception, its crash), the failure is why it never published its part:
    the cause is that failure, and the store timeouts are what it did to the others."""
    for b in (d for d in drafts if d.kind == "bootstrap" and d.culprits):
        for c in drafts:
            if c.kind != "failstop" or c.after or not set(c.culprits) & set(b.culprits):
                continue
            if c.score <= b.score:
                c.score = min(S.reconcile_cap, b.score + S.reconcile_bonus)
            c.rules_in.extend(r for r in b.rules_in if r not in c.rules_in)
            b.rules_out.append(f"What explains the wait: {c.summary}")


# Failures a broken GPU or its link produces in the process using it.
HARDWARE_CONSEQUENCES = (Category.OOM, Category.CUDA_ERROR, Category.SEGFAULT_CRASH, Category.OTHER)


def _hardware_first(ctx: Context, drafts: list[Draft]) -> None:
    """A GPU's hardware fault outranks the software failure it causes on the same machine (an
    out-of-memory or CUDA error right after an Xid, an NVLink or PCIe AER error)."""
    for hw in (d for d in drafts if d.category in HOST_CAUSES):
        hw_hosts = set(hw.hosts) | {h for r in hw.culprits if (h := _host(ctx, r))}
        for sw in drafts:
            if sw.category not in HARDWARE_CONSEQUENCES or sw.kind not in ("failstop", "leftover"):
                continue
            sw_hosts = set(sw.hosts) | {h for r in sw.culprits if (h := _host(ctx, r))}
            if not (hw_hosts & sw_hosts or set(hw.culprits) & set(sw.culprits)):
                continue
            t_hw, t_sw = _earliest(hw), _earliest(sw)
            if (
                t_hw is not None
                and t_sw is not None
                and (t_hw - t_sw).total_seconds() > S.reconcile_hardware_lead_s
            ):
                continue
            if hw.score <= sw.score:
                hw.score = min(S.reconcile_cap, sw.score + S.reconcile_hardware_bonus)
            if not hw.culprits:
                hw.culprits = sw.culprits
            sw.rules_out.append(f"It follows a hardware fault on the same machine: {hw.summary}")
            hw.rules_in.append(f"What the hardware fault caused: {sw.summary}")


def _earliest(d: Draft) -> datetime | None:
    times = [t for e in d.evidence if (t := parse_iso(e.time)) is not None]
    return min(times) if times else None


def root_causes(ctx: Context) -> list[dict[str, Any]]:
    """torchrun's "Root Cause (first observed failure)" entries: rank, exit code and the rows.

    The block is one line per field; the entry after a ``Root Cause`` header line is the root.
    """
    rows = ctx.ev.filter(pl.col("signal") == Signal.ROOT_CAUSE).sort("_i").to_dicts()
    out: list[dict[str, Any]] = []
    pending = False
    current: dict[str, Any] | None = None
    for r in rows:
        if "Root Cause" in (r["message"] or ""):
            pending, current = True, None
            continue
        rank = r.get("subject") if r.get("subject") is not None else r.get("target_rank")
        if pending and rank is not None and current is None:
            current = {"rank": int(rank), "exitcode": None, "rows": [r]}
            out.append(current)
            pending = False
        elif (
            current is not None
            and r["source"] == current["rows"][-1]["source"]
            and r["line"] - current["rows"][-1]["line"] <= 6
        ):
            current["rows"].append(r)
            if r.get("exitcode") is not None and current["exitcode"] is None:
                current["exitcode"] = r["exitcode"]
        else:
            current = None
    return out


def uncaught(ctx: Context) -> str | None:
    """The first line that shows an error escaping a process (a traceback, an uncaught C++
    exception, a fatal signal handler), quoted; None when there is none."""
    markers = list(vocabulary().uncaught_markers)
    return _first_quoted(ctx.ev.filter(pl.col("message").fill_null("").str.contains_any(markers)))


def nccl_warning(ctx: Context) -> str | None:
    """The first NCCL WARN that no pattern of its own explains, quoted; None when there is none."""
    ids = list(vocabulary().unexplained_warn_patterns)
    return _first_quoted(ctx.ev.filter(pl.col("pattern").is_in(ids)))


def _first_quoted(rows: pl.DataFrame) -> str | None:
    """The first of these events rows in log order, quoted with its rank; None when there is none."""
    if not rows.height:
        return None
    r = rows.sort("_i").row(0, named=True)
    return w.excerpt(r.get("message")) + (f" (rank {r['rank']})" if r.get("rank") is not None else "")


def unplaced_error(ctx: Context) -> str:
    """What an ``unknown`` verdict says when errors were logged but no rule placed them: the
    launcher's first observed failure, else the first error-severity line."""
    roots = root_causes(ctx)
    if roots:
        rc = roots[0]
        code = f" (exit code {rc['exitcode']})" if rc["exitcode"] is not None else ""
        own = ctx.states.get(rc["rank"])
        if own is None or not own.seen:
            return (
                f"the launcher's first observed failure is rank {rc['rank']}{code}, and that rank's own output "
                "(its traceback or error) is not in these logs; the launcher's --log-dir/--redirects files or "
                "the job's per-rank logs hold it"
            )
        return (
            f"the launcher's first observed failure is rank {rc['rank']}{code}, and no rule placed its error"
        )
    first = _first_quoted(ctx.ev.filter(pl.col("severity").is_in([Severity.ERROR, Severity.CRITICAL])))
    if first is not None:
        return f"the first error, {first}, fits no known cause"
    return "the logs show errors that no rule could place"


def _root_cause_note(ctx: Context, d: Draft, roots: list[dict[str, Any]]) -> None:
    """What torchrun's root cause says about this hypothesis: evidence, not truth."""
    if not roots or not d.culprits:
        return
    for rc in roots[:4]:
        host = ctx.states[rc["rank"]].host if rc["rank"] in ctx.states else None
        what = f"rank {rc['rank']}" + (f" (exit code {rc['exitcode']})" if rc["exitcode"] is not None else "")
        where = f" on {host}" if host else ""
        if rc["rank"] in d.culprits:
            d.rules_in.append(f"torchrun's 'Root Cause (first observed failure)'{where} names {what} too.")
        else:
            d.rules_out.append(
                f"torchrun's 'Root Cause (first observed failure)'{where} names {what}: the first exit that node's "
                "agent saw, to the second; it is where the failure was noticed, not where it began."
            )
        d.evidence.extend(evidence(r, "torchrun root cause") for r in rc["rows"][:2])


def finish(ctx: Context, drafts: list[Draft]) -> None:
    """Apply data-quality penalties and settle the hosts each draft names."""
    roots = root_causes(ctx)
    single = not ctx.ev.height or (ctx.ev["source"].n_unique() <= 1 and len(_hosts_seen(ctx)) <= 1)
    repeat = bool(ctx.ev.height) and ctx.ev.filter(pl.col("repeat") > 1).height > 0
    for d in drafts:
        _root_cause_note(ctx, d, roots)
        if ctx.missing and ctx.seen:
            share = len(ctx.missing) / max(len(ctx.world), 1)
            d.penalise(
                S.penalty_missing_many if share > S.penalty_missing_share else S.penalty_missing_few,
                f"no log from {w.ranks_phrase(ctx.missing)}",
            )
        if ctx.coverage.truncated_lines or ctx.coverage.skipped:
            d.penalise(S.penalty_truncated, "some input was truncated or skipped")
        if repeat and d.kind in ("silent", "lone_reporter", "mismatch", "seq_skew", "nobody", "config"):
            d.penalise(
                S.penalty_folded,
                "Ray folded identical lines of several processes into one ([repeated Nx]); who said what is partly unknown",
            )
        _unaligned_order(ctx, d)
        if d.culprits and not d.hosts:
            d.hosts = tuple(sorted(_hosts_of(ctx, d.culprits)))
        if d.hosts and single and d.category not in HOST_CAUSES and not _elsewhere(ctx, d):
            # Naming a host singles it out from others; with one log of one host there is no
            # other, and a job-wide cause (a setting, a peer, an endpoint) is no fault of the host.
            d.hosts = ()


def _hosts_of(ctx: Context, ranks: tuple[int, ...]) -> set[str]:
    """The hosts these ranks ran on, where known."""
    return {h for r in ranks if (h := ctx.book.rank_host.get(r) or _host(ctx, r))}


# Rules that name the first to fail: when other hosts failed too, order across hosts decided.
ORDER_KINDS = ("failstop",)


def _unaligned_order(ctx: Context, d: Draft) -> None:
    """Which host failed first is not established when the failing hosts' clocks could not all be
    aligned: a claim that names some of them, as the first to fail, loses confidence."""
    if not ctx.unaligned or d.kind not in ORDER_KINDS:
        return
    fails = [st.failure for st in ctx.states.values() if st.failure] + list(ctx.unattributed)
    failing = {f.host for f in fails if f.host and f.weight >= S.weight_cause}
    named = _hosts_of(ctx, d.culprits) | set(d.hosts)
    off = sorted(failing & set(ctx.unaligned))
    if named and named < failing and off:
        d.penalise(
            S.penalty_unaligned,
            f"the clock of {', '.join(off[:4])} could not be aligned with the other hosts' (no shared sync point): "
            "which host failed first is not established",
        )


# Rules whose claim is that the cause is on another machine than the logs' (the peer that closed
# every connection): that machine stays named even when one log of one host is all there is.
ELSEWHERE_KINDS = ("peer_gone",)


def _elsewhere(ctx: Context, d: Draft) -> bool:
    return d.kind in ELSEWHERE_KINDS and not set(d.hosts) & writer_hosts(ctx)


def ranked(drafts: list[Draft]) -> list[Hypothesis]:
    """The drafts as hypotheses, best first."""
    drafts.sort(key=lambda d: (-round(d.score, 6), d.category, d.culprits))
    return [_hypothesis(d) for d in drafts]


def confidence(score: float) -> Confidence:
    """Score -> high / medium / low."""
    if score >= S.confidence_strong:
        return Confidence.HIGH
    if score >= S.confidence_medium:
        return Confidence.MEDIUM
    return Confidence.LOW


def _hypothesis(d: Draft) -> Hypothesis:
    conf = confidence(d.score - d.penalty)
    rules_out = list(d.rules_out) + [f"Confidence lowered: {why}." for why in d.penalty_why]
    if conf == Confidence.HIGH and d.ceiling_why:
        conf = Confidence.MEDIUM
        rules_out.append(f"Confidence held at medium: {d.ceiling_why}.")
    return Hypothesis(
        category=d.category,
        culprit_ranks=tuple(sorted(d.culprits)),
        culprit_hosts=tuple(sorted(d.hosts)),
        confidence=conf,
        summary=d.summary,
        score=round(max(0.0, min(1.0, d.score)), 4),
        evidence=tuple(_culprits_first(_dedupe(d.evidence), d))[:12],
        rules_in=tuple(d.rules_in),
        rules_out=tuple(rules_out),
        remediation=tuple(d.remediation),
        collect_next_time=tuple(dict.fromkeys(d.collect)),
        collective=d.collective,
    )


def _culprits_first(items: list[Evidence], d: Draft) -> list[Evidence]:
    """The culprits' own lines (or their machines') before what others logged: the line that
    proves a verdict is the first one a reader sees. Otherwise in the rule's order."""
    ranks, hosts = set(d.culprits), set(d.hosts)
    return sorted(items, key=lambda e: not (e.rank in ranks or (e.rank is None and e.host in hosts)))


def _dedupe(items: list[Evidence]) -> list[Evidence]:
    seen: set[tuple[str, int]] = set()
    out = []
    for e in items:
        if (e.source, e.line) not in seen:
            seen.add((e.source, e.line))
            out.append(e)
    return out
