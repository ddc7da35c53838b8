"""Timeout against configuration: was the straggler hung, or doing long work the timeout did not
allow for?"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from nccllog.correlate import wording as w
from nccllog.correlate.collectives import Aligned
from nccllog.correlate.frame import DEFAULT_PG
from nccllog.correlate.orphans import progress_by_elimination

# Words of long rank-local phases (checkpointing, evaluation, data preparation) in log messages.
# A sub-step a phase line reports as this long (seconds) shows a rank busy with long work.
from nccllog.correlate.rules import remedies
from nccllog.correlate.rules.base import Context, Draft, _active_after, _reporters_text, evidence
from nccllog.correlate.rules.scores import S
from nccllog.correlate.rules.vocabulary import vocabulary
from nccllog.correlate.rules.wording import _progress_text
from nccllog.vocab import Category, Signal

# Words of a long rank-local phase (vocabulary.toml), matched case-insensitively.
PHASE_WORDS = vocabulary().phase_words


def _phase_rows(ctx: Context, ranks: Iterable[int], since: datetime | None) -> list[dict[str, Any]]:
    """Lines of these ranks that name a long rank-local phase (checkpoint, evaluation, …)."""
    sub = ctx.ev.filter(
        pl.col("rank").is_in(list(ranks))
        & pl.col("message").str.contains_any(list(PHASE_WORDS), ascii_case_insensitive=True)
    )
    # A line that names the framework in use (FSDP enabled, ...) is set-up, not a phase of this step.
    sub = sub.filter((pl.col("_fw") < S.weight_phase_line_below) & (pl.col("signal") != Signal.FRAMEWORK))
    if since is not None:
        sub = sub.filter(
            pl.col("ctime").is_null()
            | (pl.col("ctime") >= since - timedelta(minutes=S.config_phase_window_min))
        )
    return sub.sort("_i").tail(4).to_dicts()


def _config_or_straggler(ctx: Context, a: Aligned, d: Draft) -> list[Draft]:
    """For a straggler: was it hung, or doing legitimate long work the timeout did not allow for?"""
    if d.category != Category.STRAGGLER_HANG:
        return [d]
    start = a.wait_start or a.first_time
    culprits = list(d.culprits)
    # A desync report may name ranks no other line knows of (no state): they cannot be shown alive.
    # A culprit that is itself the only one waiting has no "others" to have outlived: its lines
    # after its own timeout are the dump and abort that the timeout caused.
    alone = set(a.reporters) <= set(culprits)
    alive = [r for r in culprits if not alone and r in ctx.states and _active_after(ctx.states[r], start)]
    phase = _phase_rows(ctx, culprits, start) if culprits else []
    tied = progress_by_elimination(ctx.ev, a, ctx.book, ctx.missing) if culprits else {}
    # Lines that report long work: a phase's sub-step of minutes ("… state dict took 118.28 secs")
    # or a loop that has run as long as the others waited and is not done (a bar 30:09 into a 30
    # min wait): the rank was working through a long step when last heard of, as good as seeing
    # it keep logging. Untagged lines count only when they show the latter in a rank-local phase
    # (tokenising, k-means, ...): a short or finished bar could be any rank's, printed before it
    # went to wait, and a training loop's bar runs for hours on the rank that shows it.
    limit_s = a.timeout_ms / 1000 if a.timeout_ms else None
    rows = {r: [o.row for o in tied.get(r, [])] for r in culprits}
    long = {r: [x for x in rows[r] if _long_step(x, limit_s, limit_s)] for r in culprits}
    shown = [r for r in culprits if long[r] and any(_names_phase(x) for x in rows[r])]
    orphans = [o for r in shown for o in tied[r]]
    own = {r: [x for x in phase if x["rank"] == r] for r in culprits}
    work = {r: own[r] + (rows[r] if r in shown else []) for r in culprits}
    busy = {
        r: [x for x in own[r] if _long_step(x, limit_s, S.config_long_step_s)]
        + (long[r] if r in shown else [])
        for r in culprits
    }
    steps = [x for r in culprits for x in busy[r]]
    working = bool(alive or steps)
    # Two silent ranks, one shown finishing its step before the timeout and one still in it: the
    # finished one went on to the collective and waited (too briefly to time out); the other is late.
    still = [r for r in culprits if r in alive or busy[r]]
    last = {r: max(own[r] + rows[r], key=lambda x: x["_i"], default=None) for r in culprits}
    done = [r for r in culprits if r not in still and (x := last[r]) is not None and _finished_before(x, a)]
    if still and done:
        culprits = still
        orphans = [o for o in orphans if o.rank in still]
    lines = [x for r in culprits for x in work[r]]
    small = bool(a.op and a.op.upper() == "BARRIER") or bool(
        a.by_rank
        and all(
            t.numel_in is not None and t.numel_in <= S.config_small_numel
            for t in a.by_rank.values()
            if t.primary
        )
    )
    job_ms = _job_timeout(ctx, a)
    sub = job_ms is not None and a.timeout_ms is not None and a.timeout_ms < job_ms
    over = [
        (t.elapsed_ms - t.timeout_ms) / t.timeout_ms
        for t in a.reports
        if t.primary and t.elapsed_ms is not None and t.timeout_ms
    ]
    on_time = bool(over) and max(over) < S.config_on_time_margin
    cfg = Draft(
        category=Category.CONFIG_TIMEOUT_TOO_SHORT, culprits=tuple(culprits), hosts=d.hosts, kind="config"
    )
    cfg.score = (
        S.config_base
        + (S.config_working if working else 0.0)
        + (S.config_lines if lines else 0.0)
        + (S.config_small if small else 0.0)
        + (S.config_subgroup if sub else 0.0)
    )
    coll = w.collective(a.op, a.seq)
    limit = w.seconds(a.timeout_ms)
    who = w.ranks_phrase(culprits, capital=True) if culprits else "One rank"
    doing = _phase_name(lines)
    was = "was" if len(culprits) <= 1 else "were"
    if sub and job_ms is not None:
        cfg.summary = (
            f"{w.pg_name(a.pg).capitalize()} timed out at {coll} after {limit}, its own timeout, while the job was "
            f"configured for {w.seconds(job_ms)}; {'the wait for ' + w.ranks_phrase(culprits) if culprits else 'the wait'} "
            "outlasted the group's shorter limit."
        )
        cfg.rules_in.append(
            f"{w.pg_name(a.pg).capitalize()} uses Timeout(ms)={a.timeout_ms} while the job's timeout is {job_ms} ms: "
            "the group was created without the job's timeout (new_group(timeout=...) not passed)."
        )
    else:
        cfg.summary = (
            f"{who} {was} still {doing or 'working'} when {_reporters_text(ctx, a)} hit the {limit} timeout at {coll}; "
            "the timeout is too short for that step rather than a hang."
        )
    if alive:
        cfg.rules_in.append(
            f"{w.ranks_phrase(alive, capital=True)} kept logging after the others started waiting: slow, not stuck."
        )
    if steps and not alive:
        took = ", ".join(_progress_text(r) for r in steps[-3:])
        cfg.rules_in.append(
            f"{who}'s last lines report long work ({took}): it was working through a long step, not stuck."
        )
    for o in orphans[-1:]:
        cfg.rules_in.append(
            f"Line {o.row['line']} ({w.excerpt(o.row['message'])}) has no rank prefix, but every other rank {o.scope} "
            f"was waiting in {coll}: only rank {o.rank} can have printed it."
        )
    if done and still:
        cfg.rules_in.append(
            f"{w.ranks_phrase(done, capital=True)} finished {'its' if len(done) == 1 else 'their'} step before the "
            f"timeout ({_progress_text(last[done[0]] or {})}) and then waited too, not long enough to time out; "
            f"{w.ranks_phrase(still)} {was} still working."
        )
    if lines:
        cfg.rules_in.append(f"{who}'s last lines are about {doing or 'a long loop'}: a long rank-local step.")
        cfg.evidence.extend(evidence(r) for r in phase if r["rank"] in culprits)
        cfg.evidence.extend(
            evidence(o.row, f"rank {o.rank}: the only rank {o.scope} not waiting") for o in orphans[-3:]
        )
    cfg.evidence.extend(
        evidence(x, f"rank {r} finished before the timeout") for r in done if still and (x := last[r])
    )
    if small:
        cfg.rules_in.append(
            f"{coll} is a tiny synchronisation collective: the others were simply waiting at a sync point."
        )
    if on_time:
        cfg.rules_in.append(
            "Every watchdog fired within 1% of the timeout: the wait ended by the clock, not by an error."
        )
    cfg.evidence.extend(e for e in d.evidence if e not in cfg.evidence)
    cfg.remediation = remedies.steps("config_timeout", ctx.versions)
    # How the straggler reading fares against it.
    if alive or lines or sub:
        d.score -= S.config_straggler_working if working or sub else S.config_straggler_quiet
        d.rules_out.append(
            f"{who} {was} {'still logging' if alive else 'in ' + (doing or 'a long step')} while the others waited, "
            "which fits a timeout too short for legitimate work better than a hang."
        )
        cfg.rules_out.append(
            "A real hang would show the rank going quiet before the others started waiting; it did not."
            if alive
            else "The rank's last lines do not prove it would have finished; a hang inside that step is the alternative."
        )
    else:
        cfg.rules_out.append(
            "Nothing shows the rank still working while the others waited; it went quiet, which reads as a hang."
        )
        d.rules_out.append(
            "A too-short timeout is the alternative if the rank was doing legitimate long work; its logs show no such work."
        )
    if on_time and not d.rules_in:
        d.rules_in.append("Every watchdog fired on time: the wait ended by the clock.")
    if not culprits:
        cfg.score = min(cfg.score, S.config_no_culprit_cap)
    if sub and job_ms is not None and not culprits:
        d.summary = d.summary.rstrip(".") + (
            f"; {w.pg_name(a.pg)} ran with its own {limit} timeout, shorter than the job's {w.seconds(job_ms)}."
        )
        d.rules_in.append(
            f"{w.pg_name(a.pg).capitalize()} uses Timeout(ms)={a.timeout_ms} while the job's timeout is {job_ms} ms "
            "(new_group without timeout=): with the job's timeout the late rank might have arrived."
        )
    return [d, cfg]


def _complete(row: dict[str, Any]) -> bool:
    """A progress row at its total (a bar at 100%)."""
    step, total = row.get("step"), row.get("total_steps")
    return step is not None and total is not None and total > 0 and step >= total


def _names_phase(row: dict[str, Any]) -> bool:
    """A line naming a long rank-local phase (checkpoint, evaluation, tokenisation, ...)."""
    message = row.get("message") or ""
    return any(word in message for word in PHASE_WORDS)


def _long_step(row: dict[str, Any], loop_s: float | None, step_s: float | None) -> bool:
    """A progress row showing long work: a loop not done after ``loop_s`` seconds (a bar's elapsed
    time), or a sub-step that took ``step_s`` seconds or more (faiss iterations, "took 118 secs")."""
    if row.get("signal") != Signal.PROGRESS:
        return False
    secs, elapsed = row.get("seconds"), row.get("elapsed_s")
    long_loop = loop_s is not None and elapsed is not None and elapsed >= loop_s and not _complete(row)
    return long_loop or (step_s is not None and secs is not None and secs >= step_s)


def _finished_before(row: dict[str, Any], a: Aligned) -> bool:
    """A rank's last progress row shows its loop done before the others' watchdogs fired."""
    if not _complete(row):
        return False
    fired = a.first_time
    if row.get("ctime") is not None and fired is not None:
        return bool(row["ctime"] < fired)
    # untimed: printed before the first timeout report in the same file
    reports = [t.row["_i"] for t in a.reports if t.row["source"] == row["source"]]
    return bool(reports) and row["_i"] < min(reports)


def _phase_name(rows: list[dict[str, Any]]) -> str:
    text = " ".join(r["message"] or "" for r in rows).lower()
    for words, name in (
        (("checkpoint", "saving", "save", "state dict", "state_dict", "merg"), "saving a checkpoint"),
        (("eval", "validat"), "evaluating"),
        (("generat", "rollout"), "generating"),
        (("tokeniz", "preprocess"), "preparing data"),
        (("cluster", "k-means", "kmeans", "indexing"), "building an index"),
        (("download",), "downloading"),
    ):
        if any(x in text for x in words):
            return name
    return ""


def _job_timeout(ctx: Context, a: Aligned) -> int | None:
    """The job's configured timeout when a different group or an options line shows one."""
    other = [
        t.timeout_ms for b in ctx.aligned if b.pg != a.pg for t in b.reports if t.timeout_ms and t.pg != a.pg
    ]
    cfg = ctx.ev.filter(
        pl.col("timeout_ms").is_not_null()
        & ~pl.col("signal").is_in([Signal.COLLECTIVE_TIMEOUT, Signal.WORK_STATUS])
    )
    default = cfg.filter(pl.col("pgk").fill_null(DEFAULT_PG) == DEFAULT_PG)["timeout_ms"].to_list()
    if a.pg != DEFAULT_PG and default:
        return max(default)
    vals = [v for v in other if v] + ([] if a.pg == DEFAULT_PG else default)
    return max(vals) if vals else None
