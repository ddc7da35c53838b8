"""Stalls: hangs without a watchdog (stall reports) and a GPU driver that stopped answering."""

from __future__ import annotations

import polars as pl

from nccllog.correlate import wording as w
from nccllog.correlate.rules.base import Context, Draft, _first, _remediation, collect_next_time, evidence
from nccllog.correlate.rules.scores import S
from nccllog.vocab import Category, Signal


def rule(ctx: Context) -> list[Draft]:
    """Waits outside the collectives: a GPU driver that stopped answering, stalls without a watchdog."""
    return driver_hang(ctx) + stalls(ctx)


def driver_hang(ctx: Context) -> list[Draft]:
    """The GPU driver stopped answering on a host (a process asleep inside the driver, nvidia-smi
    failing): ranks that waited there were waiting on the driver, not on another rank. A cause,
    even when it was only observed after the timeouts: a process cannot leave such a state."""
    rows = ctx.ev.filter(pl.col("signal") == Signal.DRIVER_HANG)
    if rows.height == 0:
        return []
    found = rows.to_dicts()
    first = _first(found, 3)
    hosts = tuple(sorted({r["host"] for r in found if r.get("host")}))
    d = Draft(category=Category.GPU_HARDWARE_XID, culprits=(), hosts=hosts, kind="driver_hang")
    d.score = S.stall_driver_hang
    where = f" on {', '.join(hosts)}" if hosts else ""
    d.summary = (
        f"The GPU driver{where} stopped answering (a process asleep inside the driver, or nvidia-smi "
        "failing): the ranks waited on GPUs that were not running their work. This is a GPU or driver "
        "problem, not a rank problem."
    )
    d.rules_in.extend(f"{r['pattern']}: {r['message'].strip()[:200]}" for r in first)
    d.rules_out.append(
        "A straggler or a mismatched collective would leave its own process running; a process in "
        "uninterruptible sleep inside the driver cannot run at all, whatever rank it is."
    )
    d.evidence = [evidence(r) for r in first]
    d.remediation = _remediation(ctx.library, first)
    return [d]


def stalls(ctx: Context) -> list[Draft]:
    """Every worker reports a stall but no watchdog fired and no rank is behind: the wait is outside the ranks."""
    if ctx.main is not None:
        return []
    stalled = sorted(r for r, st in ctx.states.items() if st.stalls)
    rows = ctx.ev.filter(pl.col("signal") == Signal.STALL)
    total = int(rows["repeat"].sum()) if rows.height else 0
    if not rows.height:
        return []
    if stalled and len(stalled) * 2 <= len(ctx.seen) and total <= len(stalled):
        d = Draft(category=Category.STRAGGLER_HANG, culprits=tuple(stalled), kind="stall_subset")
        d.score = S.stall_subset
        d.summary = f"{w.ranks_phrase(stalled, capital=True)} stopped making progress while the other ranks did not report a stall."
        d.rules_in.append(f"Stall lines come from {w.ranks_phrase(stalled)} only.")
        d.evidence = [evidence(r) for r in _first(rows.to_dicts(), 4)]
        return [d]
    d = Draft(category=Category.OTHER, culprits=(), kind="stall_all")
    d.score = S.stall_all
    d.summary = (
        "The workers all waited without progress and no collective timed out: no rank is behind the others, so the "
        "hang is outside the ranks (the driver or scheduler that feeds them was busy elsewhere)."
    )
    d.rules_in.append(
        f"{w.plural(max(total, len(stalled)), 'stall report')} from {w.plural(len(stalled) or total, 'worker')}, "
        "with no watchdog timeout and no error on any rank."
    )
    d.rules_out.append(
        "A straggler rank would leave the others in an NCCL collective until the watchdog fired; "
        "here nobody reached a collective to wait in."
    )
    d.evidence = [evidence(r) for r in _first(rows.to_dicts(), 4)]
    d.collect.extend(collect_next_time(ctx))
    return [d]
