"""Hangs: collective timeouts read across ranks (mismatched calls, skewed sequence numbers, silent
ranks, enqueue skew, the desync report, stuck heartbeats, nobody to blame)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import polars as pl

from nccllog.correlate import outliers
from nccllog.correlate import wording as w
from nccllog.correlate.collectives import Aligned
from nccllog.correlate.frame import DEFAULT_PG, int_list
from nccllog.correlate.rules.base import (
    Context,
    Draft,
    _active_after,
    _first,
    _first_collective,
    _only_attributed_lines,
    _reporters_text,
    _silent_evidence,
    _timeout_rows,
    collect_next_time,
    evidence,
)
from nccllog.correlate.rules.remedies import steps
from nccllog.correlate.rules.scores import S
from nccllog.correlate.rules.skew import first_one_sided, seq_skew
from nccllog.correlate.rules.timeouts import _config_or_straggler
from nccllog.correlate.rules.wording import _sig_size
from nccllog.model import CollectiveRef
from nccllog.vocab import Category, Signal


def hang(ctx: Context) -> list[Draft]:
    """Collective timeouts: mismatch, skew, silent ranks, and config vs straggler."""
    main = ctx.main
    if main is None:
        return _merge([d for d in (_desync(ctx), _heartbeat(ctx)) if d])
    drafts: list[Draft] = []
    for rule in (_mismatch, seq_skew):
        d = rule(ctx, main)
        if d is not None:
            drafts.append(d)
    silence = _silence(ctx, main)
    stragglers = [d for d in (_enqueue_skew(ctx, main), _desync(ctx), _heartbeat(ctx)) if d]
    if isinstance(silence, list):
        drafts.extend(first_one_sided(ctx, main, d) for d in silence)
    elif silence is not None:
        stragglers.append(first_one_sided(ctx, main, silence))
    merged = _merge(stragglers)
    for d in merged:
        drafts.extend(_config_or_straggler(ctx, main, d))
    if not drafts:
        drafts.extend(_config_or_straggler(ctx, main, _nobody(ctx, main)))
    for d in drafts:
        if not d.culprits and not d.hosts:
            d.collect.extend(collect_next_time(ctx))
        if d.collective is None:
            d.collective = CollectiveRef(pg=main.pg, seq=main.seq, op=main.op)
    return drafts


def _mismatch(ctx: Context, a: Aligned) -> Draft | None:
    """Same group and seq, different op or sizes: the odd one out."""
    sigs: dict[tuple[Any, ...], list[int]] = defaultdict(list)
    reports = {
        r: t for r, t in a.by_rank.items() if t.primary and (t.op or t.numel_in is not None or t.shape)
    }
    sized = {t.op for t in reports.values() if t.numel_in is not None or t.shape}
    for r, t in reports.items():
        # A report of an op whose sizes its line lost (cut, wrapped) agrees with no size and
        # disagrees with none: only the reports that carry sizes are compared.
        if t.numel_in is None and not t.shape and t.op in sized:
            continue
        sigs[t.signature].append(r)
    if len(sigs) < 2:
        return None
    split = outliers.odd_one_out(sigs)
    assert split is not None
    groups = list(split.groups)
    (maj_sig, maj), rest = groups[0], groups[1:]
    odd = list(split.odd)
    ops_differ = len({s[0] for s in sigs}) > 1
    where = f"#{a.seq} of {w.pg_name(a.pg)}"
    d = Draft(category=Category.COLLECTIVE_MISMATCH, culprits=(), kind="mismatch")
    tie = split.tie
    if ops_differ:
        majority = f"{w.ranks_phrase(maj)} ran {maj_sig[0]}"
        minority = "; ".join(f"{w.ranks_phrase(rs)} ran {s[0]}" for s, rs in rest)
    else:
        majority = f"{w.ranks_phrase(maj)} used {w.numel(maj_sig[1], maj_sig[2]) if maj_sig[1] is not None else maj_sig[3]}"
        minority = "; ".join(
            f"{w.ranks_phrase(rs)} used {w.numel(s[1], s[2]) if s[1] is not None else s[3]}" for s, rs in rest
        )
    what = "different collectives" if ops_differ else f"{maj_sig[0] or 'the collective'} with different sizes"
    d.rules_in.append(f"At {where} {minority}, while {majority}: the ranks issued {what} at the same point.")
    if not tie:
        d.culprits = tuple(odd)
        d.score = S.mismatch_base if len(maj) >= 2 else S.mismatch_pair
        theirs = "its" if len(odd) == 1 else "their"
        d.summary = (
            f"At {where} {minority} while {majority}: {w.ranks_phrase(odd)} went off the others' sequence of "
            "collectives."
            if ops_differ
            else f"{w.ranks_phrase(odd, capital=True)} called {maj_sig[0] or 'the collective'} {where} with "
            f"{_sig_size(next(s for s, rs in rest if odd[0] in rs))} while {w.ranks_phrase(maj)} used "
            f"{_sig_size(maj_sig)}: the sizes do not match, and {theirs} call is the odd one."
        )
        d.rules_out.append(
            "A plain straggler would leave the others waiting in the same call with the same sizes; here the calls themselves differ."
        )
    else:
        first = _first_failed(ctx, [r for _, rs in groups for r in rs])
        d.score = S.mismatch_tie
        if first is not None:
            d.culprits = tuple(sorted(next(rs for _, rs in groups if first in rs)))
            d.rules_in.append(
                f"Neither side is a majority; {w.ranks_phrase(d.culprits)} failed first, which makes it the likelier side to have diverged."
            )
        d.summary = f"At {where} {minority}, while {majority}: the ranks issued {what}; " + (
            f"{w.ranks_phrase(d.culprits)} is the likelier side to have diverged."
            if d.culprits
            else "the logs do not say which side diverged."
        )
    d.evidence = [evidence(a.by_rank[r].row) for r in sorted(a.by_rank)[:6]]
    d.remediation = steps("mismatch", ctx.versions)
    return d


def _first_failed(ctx: Context, ranks: Sequence[int]) -> int | None:
    """The rank whose timeout/exit came first, where the times separate them by a second or more."""
    times = []
    for r in ranks:
        st = ctx.states.get(r)
        t = st.hang_time if st else None
        if t is not None:
            times.append((t, r))
    times.sort()
    if len(times) >= 2 and (times[1][0] - times[0][0]).total_seconds() >= S.mismatch_first_failed_s:
        return times[0][1]
    return None


def _silence(ctx: Context, a: Aligned) -> Draft | list[Draft] | None:
    """The ranks that did not time out with the others (or the lone rank that did)."""
    if not a.membership_known or not a.silent:
        return None
    in_group = {r for b in ctx.aligned if b.pg == a.pg for r in b.reporters}
    silent = [r for r in a.silent if r not in in_group]
    if not silent or a.hidden >= len(silent):
        return None
    size = a.size
    coll = w.collective(a.op, a.seq)
    where = f"{coll} of {w.pg_name(a.pg)}"
    waited = w.seconds(a.timeout_ms)
    missing = [r for r in silent if not ctx.states[r].seen]
    if len(silent) < size:
        d = Draft(category=Category.STRAGGLER_HANG, culprits=tuple(silent), kind="silent")
        d.score = S.silent_one if len(silent) == 1 else S.silent_several
        who = w.ranks_phrase(silent, capital=True)
        d.summary = f"{who} never reached {where}; {_reporters_text(ctx, a)} waited {waited} for {'it' if len(silent) == 1 else 'them'}."
        d.rules_in.append(
            f"{_reporters_text(ctx, a).capitalize()} timed out waiting at {where}; {w.ranks_phrase(silent)} did not: "
            f"{'it was' if len(silent) == 1 else 'they were'} not in that collective."
        )
        elsewhere = [r for r in silent if ctx.states[r].timeouts]
        for r in elsewhere:
            t = ctx.states[r].timeouts[0]
            d.rules_in.append(
                f"Rank {r} was itself waiting in {w.collective(t.op, t.seq)} of {w.pg_name(t.pg)}, so it never got to {coll}."
            )
            d.evidence.append(evidence(t.row, f"rank {r} was elsewhere"))
        if missing:
            d.score -= S.silent_all_missing if len(missing) == len(silent) else S.silent_some_missing
            d.rules_out.append(
                f"No log at all from {w.ranks_phrase(missing)}: its silence is also what a missing log looks like, "
                "so this rests on the others' reports alone."
            )
            d.summary = (
                f"{who} (no log found) {'is' if len(silent) == 1 else 'are'} the only "
                f"{'rank' if len(silent) == 1 else 'ranks'} that did not report {where}; "
                f"{_reporters_text(ctx, a)} waited {waited} for {'it' if len(silent) == 1 else 'them'}."
            )
            if len(missing) == len(silent) and not ctx.world_known and _only_attributed_lines(ctx):
                # One paste of the reporters' lines alone, its world size only the highest rank it
                # shows: the ranks it lacks were not pasted, which says nothing about where they were.
                d.culprits = ()
                d.score = S.silent_unpasted
                d.summary = (
                    f"{_reporters_text(ctx, a).capitalize()} waited {waited} in {where} for a rank that never "
                    "reached it; the logs given do not show which (no lines from the others)."
                )
                d.rules_in = [
                    f"{_reporters_text(ctx, a).capitalize()} timed out waiting at {where}; the input has no line "
                    f"at all from {w.ranks_phrase(missing)}, so it cannot say which of them was late."
                ]
                d.collect.extend(collect_next_time(ctx))
        hosts = {ctx.states[r].host for r in silent}
        if d.culprits and len(silent) > 1 and len(hosts) == 1 and None not in hosts:
            host = hosts.pop()
            assert host is not None
            if set(ctx.book.ranks_on(host)) <= set(silent):
                d.hosts = (host,)
                d.rules_in.append(f"All of them run on {host}: the whole node stopped.")
        d.evidence = [evidence(r) for r in _timeout_rows(a)] + d.evidence + _silent_evidence(ctx, silent)
        return d
    # The reporters are the minority. If the silent ranks demonstrably went on (they logged after the
    # wait began), the reporters ran a collective the others never issued.
    start = a.wait_start or a.first_time
    moved = [r for r in silent if _active_after(ctx.states[r], start)]
    if len(ctx.world) >= 3 and size * 2 <= len(silent) and not missing and moved:
        d = Draft(category=Category.COLLECTIVE_MISMATCH, culprits=a.reporters, kind="lone_reporter")
        d.score = S.silent_lone_reporter
        who = w.ranks_phrase(a.reporters, capital=True)
        d.summary = (
            f"Only {who.lower()} timed out, at {where}, a collective no other rank entered; "
            f"{w.ranks_phrase(a.reporters)} issued a collective the others never did."
        )
        d.rules_in.append(
            f"{len(silent)} ranks would have timed out at {coll} too had they been waiting in it; none did, "
            f"so {w.ranks_phrase(a.reporters)} is the one out of step."
        )
        d.rules_in.append(
            f"{w.ranks_phrase(moved, capital=True)} kept logging after the wait began: they had moved on."
        )
        d.rules_out.append(
            f"A straggler reading would need all {len(silent)} silent ranks to be stuck at once, which the lone report does not support."
        )
        d.evidence = [evidence(r) for r in _timeout_rows(a)] + _silent_evidence(ctx, silent)
        d.remediation = steps("lone_reporter", ctx.versions, ranks=w.ranks_phrase(a.reporters))
        return d
    if size == 1 and not a.hidden and len(ctx.world) >= 3:
        # One rank reported and nothing shows what the others did: hung, slow, or done while the
        # reporter ran a collective too many. Say so instead of guessing.
        who = w.ranks_phrase(a.reporters, capital=True)
        late = Draft(category=Category.STRAGGLER_HANG, culprits=tuple(silent), kind="silent")
        late.score = S.silent_unsure
        late.summary = (
            f"{w.ranks_phrase(silent, capital=True)}{' (no log)' if missing else ''} may never have reached {where}, "
            f"where {who.lower()} waited {waited}."
        )
        late.rules_in.append(
            f"Only {who.lower()} reported {where}; "
            + ("the others left no log." if missing else "the others logged nothing after the wait began.")
        )
        extra = Draft(category=Category.COLLECTIVE_MISMATCH, culprits=a.reporters, kind="lone_reporter")
        extra.score = S.silent_unsure
        extra.summary = f"{who} may have run {where} as a collective the other ranks never issued."
        extra.rules_in.append(f"{who} is the only rank that reported {where}.")
        for d in (late, extra):
            d.rules_out.append(
                f"Nothing from {w.ranks_phrase(silent)} after the wait began: hung peers, slow peers and an extra "
                f"collective on {w.ranks_phrase(a.reporters)} look the same from here."
            )
            d.evidence = [evidence(r) for r in _timeout_rows(a)]
            d.collect.extend(collect_next_time(ctx))
        return [late, extra]
    if len(ctx.world) == 2 and len(silent) == 1:
        if missing and not ctx.world_known and _only_attributed_lines(ctx):
            return None  # a paste of one rank's lines: its "pair" is only the highest rank it shows
        d = Draft(category=Category.STRAGGLER_HANG, culprits=tuple(silent), kind="silent")
        d.score = S.silent_pair if not missing else S.silent_pair_missing
        d.summary = f"Rank {silent[0]} never reached {where}; rank {a.reporters[0]} waited {waited} for it."
        d.rules_in.append(
            f"Rank {a.reporters[0]} timed out waiting at {where}; rank {silent[0]} did not report it."
        )
        d.evidence = [evidence(r) for r in _timeout_rows(a)] + _silent_evidence(ctx, silent)
        return d
    return None


def _enqueue_skew(ctx: Context, a: Aligned) -> Draft | None:
    """One rank's last enqueued work is behind the collective the others wait in."""
    enq = {r: st.last_enqueued[a.pg] for r, st in ctx.states.items() if a.pg in st.last_enqueued}
    if len(enq) < 2:
        return None
    behind = list(outliers.behind(enq, mark=a.seq))
    if not behind:
        return None
    ahead = sorted(r for r in enq if r not in behind)
    lo = ", ".join(f"#{enq[r]}" if len(behind) == 1 else f"{r}: #{enq[r]}" for r in behind[:6])
    hi = max(enq[r] for r in ahead)
    coll = w.collective(a.op, a.seq)
    never = a.seq is not None and all(enq[r] < a.seq for r in behind)
    if never or a.seq is None:
        d = Draft(category=Category.STRAGGLER_HANG, culprits=tuple(behind), kind="enqueue_skew")
        d.score = S.enqueue_skew_never if never else S.enqueue_skew_unknown_seq
        d.summary = (
            f"{w.ranks_phrase(behind, capital=True)} fell behind: {'its' if len(behind) == 1 else 'their'} last enqueued "
            f"work was {lo} while {w.others_phrase(ahead, ctx.world_size)} had enqueued up to #{hi} and timed out "
            f"waiting at {coll} of {w.pg_name(a.pg)}."
        )
        d.rules_in.append(
            f"Last enqueued work in {w.pg_name(a.pg)}: {lo} for {w.ranks_phrase(behind)}, up to #{hi} for the others; "
            "a rank that never enqueued the collective the others wait in is the one holding them up."
        )
    else:
        # It did enqueue the collective, like everyone, and then stopped issuing work: its copy of the
        # collective never ran because something else was ahead of it on that rank (another
        # communicator's collective, another stream) -- the ranks ordered their collectives differently.
        d = Draft(category=Category.COLLECTIVE_MISMATCH, culprits=tuple(behind), kind="enqueue_skew")
        d.score = S.enqueue_skew_stuck
        d.summary = (
            f"{w.ranks_phrase(behind, capital=True)} enqueued {coll} of {w.pg_name(a.pg)} like the others but never got "
            f"past it (last enqueued {lo}, the others up to #{hi}): on {'that rank' if len(behind) == 1 else 'those ranks'} "
            "it was stuck behind other collective work, so the ranks' collectives were ordered differently."
        )
        d.rules_in.append(
            f"Every rank timed out at {coll}, so every rank had enqueued it; {w.ranks_phrase(behind)} stopped there "
            f"(last enqueued {lo}) while {w.others_phrase(ahead, ctx.world_size)} ran on to #{hi}."
        )
        d.rules_out.append(
            f"A straggler would not have enqueued {coll} at all; {w.ranks_phrase(behind)} did, and still never ran it."
        )
    rows = ctx.ev.filter(
        pl.col("rank").is_in(behind)
        & pl.col("last_enqueued").is_not_null()
        & (pl.col("pgk").fill_null(DEFAULT_PG) == a.pg)
    )
    d.evidence = [evidence(r) for r in _first(rows.to_dicts(), 4)] + [
        evidence(r) for r in _timeout_rows(a, 2)
    ]
    return d


def _desync(ctx: Context) -> Draft | None:
    """The desync debug report: who never joined, who joined and waits.

    It reports from the waiting rank's view, so "did not join" can be a healthy majority that
    simply never issued an extra collective the reporter ran: the minority side is the culprit.
    """
    rows = ctx.ev.filter(
        (pl.col("signal") == Signal.DESYNC_REPORT) & pl.col("lagging_ranks").is_not_null()
    ).to_dicts()
    lagging: set[int] = set()
    not_joined: set[int] = set()
    joined: set[int] = set()
    started_ops: set[str] = set()
    for r in rows:
        ranks = set(int_list(r["lagging_ranks"]))
        text = r["message"] or ""
        if "lagging ranks" in text:
            lagging |= ranks
        elif "didn't join" in text or "did not join" in text:
            not_joined |= ranks
        elif "joined but" in text or " started " in f" {text} ":
            joined |= ranks
            started_ops.add(text.rsplit(" started ", 1)[-1].strip())
    if not lagging and not_joined and (not joined or len(not_joined) < len(joined)):
        lagging = not_joined
    if lagging:
        ranks_l = sorted(lagging)
        d = Draft(category=Category.STRAGGLER_HANG, culprits=tuple(ranks_l), kind="desync")
        d.score = S.desync_lagging
        d.summary = f"The desync report names {w.ranks_phrase(ranks_l)} as the lagging {'rank' if len(ranks_l) == 1 else 'ranks'}."
        d.rules_in.append(
            f"TORCH_NCCL_DESYNC_DEBUG's report (from {w.plural(len({r['rank'] for r in rows}), 'rank')}) names "
            f"{w.ranks_phrase(ranks_l)} as the ones that never joined."
        )
        if len(started_ops) > 1:
            # One late rank leaves everyone else waiting in the one collective it never joined;
            # the others spread over several collectives is more than one rank being late.
            d.ceiling_why = (
                f"the report's other ranks wait in different collectives ({', '.join(sorted(started_ops))}), "
                "not all in the one the lagging rank never joined"
            )
    elif joined and not_joined and len(joined) < len(not_joined):
        ranks_j = sorted(joined)
        d = Draft(category=Category.COLLECTIVE_MISMATCH, culprits=tuple(ranks_j), kind="lone_reporter")
        d.score = S.desync_joiner
        d.summary = (
            f"{w.ranks_phrase(ranks_j, capital=True)} entered a collective that {w.ranks_phrase(not_joined)} never joined: "
            f"{w.ranks_phrase(ranks_j)} issued one collective more than the others."
        )
        d.rules_in.append(
            f"The desync report: {w.ranks_phrase(ranks_j)} joined, {w.ranks_phrase(not_joined)} finished the previous "
            "collective and never joined this one. The side that did not join is the majority, so the odd one is the joiner."
        )
        d.rules_out.append(
            f"The report calls {w.ranks_phrase(not_joined)} lagging, but a majority that finished cleanly is not a straggler."
        )
    else:
        return None
    d.evidence = [evidence(r) for r in _first(rows, 4)]
    return d


def _heartbeat(ctx: Context) -> Draft | None:
    """Only some ranks' watchdogs got stuck (a CUDA/NCCL call hung on those ranks)."""
    stuck = sorted(r for r, st in ctx.states.items() if st.heartbeat)
    if not stuck or len(stuck) * 2 > max(len(set(ctx.seen) | set(ctx.world)), 1):
        return None
    if not ctx.world_known and not set(ctx.seen) - set(stuck):
        # "only these ranks" needs other ranks to contrast with: their logs, or a printed world size
        return None
    d = Draft(category=Category.STRAGGLER_HANG, culprits=tuple(stuck), kind="heartbeat")
    d.score = S.heartbeat_stuck
    d.summary = (
        f"{w.ranks_phrase(stuck, capital=True)} stopped making progress: "
        f"{'its' if len(stuck) == 1 else 'their'} watchdog got stuck while the other ranks' did not."
    )
    d.rules_in.append(
        f"The heartbeat monitor fired on {w.ranks_phrase(stuck)} only: a CUDA/NCCL call or the GIL blocked that "
        "process, so it could not take part in collectives."
    )
    d.evidence = [evidence(r) for st in (ctx.states[x] for x in stuck) for r in st.heartbeat[:2]][:6]
    return d


def _merge(drafts: list[Draft]) -> list[Draft]:
    """Rules that name the same ranks support each other: one hypothesis, higher score."""
    by: dict[tuple[str, tuple[int, ...]], Draft] = {}
    for d in sorted(drafts, key=lambda d: -d.score):
        key = (d.category, d.culprits)
        if key in by:
            k = by[key]
            k.score = min(S.merge_cap, k.score + S.merge_bonus)
            k.rules_in.extend(x for x in d.rules_in if x not in k.rules_in)
            k.rules_out.extend(x for x in d.rules_out if x not in k.rules_out)
            k.evidence.extend(e for e in d.evidence if e not in k.evidence)
        else:
            by[key] = d
    return list(by.values())


def _only_member(ctx: Context, a: Aligned) -> int | None:
    """The rank, when the group it timed out in is known to have that one member."""
    # the default group's membership is a guess (the ranks seen) unless the world size was printed
    members = ctx.world if a.pg == DEFAULT_PG and ctx.world_known else ()
    if len(members) == 1 and tuple(a.reporters) == tuple(members):
        return int(members[0])
    return None


def _nobody(ctx: Context, a: Aligned) -> Draft:
    """Every expected rank timed out in the same place: the logs name no culprit."""
    coll = w.collective(a.op, a.seq)
    n = a.size
    first = (
        _first_collective(ctx, a)
        # "every rank waited" needs more than one rank saying so: one reporter of a group whose
        # other members left no line may be the one that entered alone
        and len(a.reporters) >= 2
        and (not a.silent or a.hidden >= len(a.silent))
        and (not a.membership_known or n >= len(a.expected))
    )
    if first:
        d = Draft(category=Category.INIT_FAILURE, culprits=(), kind="nobody")
        d.score = S.nobody_first_collective
        d.summary = (
            f"The first collective of {w.pg_name(a.pg)} ({coll}) never completed on any rank: every rank entered it "
            f"and waited {w.seconds(a.timeout_ms)}, so the communicator never carried a single collective."
        )
        d.rules_in.append(
            f"{_reporters_text(ctx, a).capitalize()} timed out at {coll} with no collective completed before it; "
            "no rank is behind the others."
        )
        d.rules_out.append(
            "A straggler would leave one rank out of the timeout set; every rank was in it, so the transport "
            "between the GPUs or nodes (P2P/NVLink, NIC, fabric) is the suspect, not a rank."
        )
        d.evidence = [evidence(r) for r in _timeout_rows(a, 4)]
        d.remediation = steps("first_collective", ctx.versions)
        return d
    alone = _only_member(ctx, a)
    if alone is not None:
        d = Draft(category=Category.STRAGGLER_HANG, culprits=(alone,), kind="nobody")
        d.score = S.nobody_alone
        d.summary = (
            f"Rank {alone} is the only member of {w.pg_name(a.pg)} and timed out at {coll} after "
            f"{w.seconds(a.timeout_ms)}: it waited on no peer, so its own GPU work (a kernel queued before the "
            "collective, or the collective's kernel) did not finish in time."
        )
        d.rules_in.append(
            f"{w.pg_name(a.pg).capitalize()} has one member, rank {alone}; nobody else can be late."
        )
        d.evidence = [evidence(r) for r in _timeout_rows(a, 4)]
        return d
    d = Draft(category=Category.STRAGGLER_HANG, culprits=(), kind="nobody")
    d.score = S.nobody_everyone
    who = (
        w.ranks_phrase(a.reporters, capital=True)
        if a.reporters and not a.hidden and len(a.reporters) <= 8
        else w.plural(n, "rank").capitalize()
    )
    d.summary = (
        f"{who} timed out waiting at {coll} of {w.pg_name(a.pg)} after {w.seconds(a.timeout_ms)}; "
        + (
            "the logs do not show which rank it waited for."
            if n == 1
            else "no rank stands out as the one that did not arrive."
        )
    )
    d.rules_in.append(f"{_reporters_text(ctx, a).capitalize()} all report {coll}: the job hung there.")
    if ctx.missing:
        d.rules_out.append(
            f"No log from {w.ranks_phrase(ctx.missing)}; the missing rank(s) may be the one(s) that never arrived."
        )
    else:
        d.rules_out.append(
            "Every rank reports the same collective with the same sizes, so the logs cannot single one out."
        )
    d.evidence = [evidence(r) for r in _timeout_rows(a, 4)]
    return d
