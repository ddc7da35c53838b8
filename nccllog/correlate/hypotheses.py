"""Hypotheses: each rule looks at the per-rank metrics and the aligned collectives and proposes a
cause (category, culprit ranks/hosts, evidence, why it holds, why the alternatives are weaker, a
score). The verdict is the best-scored one; confidence is the score less what the data lacks.

Rules reason from signals and fields only (docs/patterns.md), never from pattern ids, so that
new patterns and unseen logs feed them unchanged.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import polars as pl
import regex

from nccllog.correlate import outliers
from nccllog.correlate import wording as w
from nccllog.correlate.collectives import Aligned
from nccllog.correlate.frame import DEFAULT_PG, int_list
from nccllog.correlate.network import AddressBook
from nccllog.correlate.orphans import progress_by_elimination
from nccllog.correlate.ranks_state import Failure, RankState, failure_order
from nccllog.match.library import Library
from nccllog.model import Coverage, Evidence, Hypothesis

COLLECT_NEXT_TIME = (
    "TORCH_NCCL_TRACE_BUFFER_SIZE=2000 and TORCH_NCCL_DUMP_ON_TIMEOUT=1: every rank dumps its flight recorder on timeout",
    "TORCH_NCCL_DESYNC_DEBUG=1: the watchdog names the ranks that did not join",
    "NCCL_DEBUG=INFO with NCCL_DEBUG_FILE=<dir>/nccl_%h_%p.log: one NCCL log per process",
    "one log file per rank (torchrun --log-dir, or --tee 3 / srun --label so every line carries its rank)",
)
# Words of long rank-local phases (checkpointing, evaluation, data preparation) in log messages.
# A sub-step a phase line reports as this long (seconds) shows a rank busy with long work.
LONG_STEP_S = 30.0
PHASE_WORDS = (
    "checkpoint",
    "Checkpoint",
    "save",
    "Save",
    "saving",
    "Saving",
    "eval",
    "Eval",
    "validat",
    "Validat",
    "generat",
    "Generat",
    "rollout",
    "Rollout",
    "tokeniz",
    "Tokeniz",
    "preprocess",
    "Preprocess",
    "cluster",
    "Cluster",
    "k-means",
    "kmeans",
    "indexing",
    "Indexing",
    "merg",
    "Merg",
    "state dict",
    "state_dict",
    "download",
    "Download",
)
MISMATCH_REMEDIATION = (
    "Find the code path that issues collectives conditionally (rank-dependent branches, data-dependent loops, "
    "early exits, logging/metrics sync on some ranks only) and make every rank issue the same sequence.",
    "Run once with TORCH_DISTRIBUTED_DEBUG=DETAIL: collective fingerprints are checked and the first mismatch is reported with both sides.",
)
SMALL_NUMEL = 64
# Causes that live in one machine, so naming its host is the finding even when it is the only one.
HOST_CAUSES = ("gpu_hardware_xid",)
# Causes in a machine's or the job's setup (interfaces, rendezvous, installed versions, devices).
ENV_CAUSES = ("network_socket", "bootstrap_rendezvous", "version_mismatch", "init_failure", "p2p_topology")
STRONG = 0.75
MEDIUM = 0.5


@dataclass
class Draft:
    """A hypothesis under construction."""

    category: str
    culprits: tuple[int, ...]
    hosts: tuple[str, ...] = ()
    score: float = 0.0
    summary: str = ""
    evidence: list[Evidence] = field(default_factory=list)
    rules_in: list[str] = field(default_factory=list)
    rules_out: list[str] = field(default_factory=list)
    remediation: list[str] = field(default_factory=list)
    collect: list[str] = field(default_factory=list)
    penalty: float = 0.0
    penalty_why: list[str] = field(default_factory=list)
    kind: str = ""  # which rule proposed it (for merging and tests)
    after: bool = False  # a consequence: it came after the failure it would have to explain
    ceiling_why: str = ""  # why ``high`` is not earned (correlate/earned.py); empty when it is

    def penalise(self, amount: float, why: str) -> None:
        """Lower the confidence (not the ranking) for a gap in the data."""
        if why not in self.penalty_why:
            self.penalty += amount
            self.penalty_why.append(why)


@dataclass
class Context:
    """What every rule may read."""

    ev: pl.DataFrame
    states: dict[int, RankState]
    world: tuple[int, ...]
    world_size: int | None
    seen: tuple[int, ...]
    missing: tuple[int, ...]
    aligned: list[Aligned]
    book: AddressBook
    library: Library
    coverage: Coverage
    unattributed: list[Failure]
    world_known: bool = False  # the world size was printed, not guessed from the highest rank seen

    @property
    def main(self) -> Aligned | None:
        """The collective most ranks timed out on."""
        return self.aligned[0] if self.aligned else None


# --------------------------------------------------------------------------- helpers


def evidence(row: dict[str, Any], note: str = "") -> Evidence:
    """An Evidence record from an events row."""
    t = row.get("ctime") or row.get("time")
    return Evidence(
        source=row["source"],
        line=row["line"],
        rank=row.get("rank"),
        text=row["text"],
        host=row.get("host"),
        time=t.isoformat() if isinstance(t, datetime) else None,
        note=note or row.get("subject_note") or "",
    )


def _first(rows: Iterable[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: (r.get("ctime") is None, r.get("ctime") or datetime.min, r["_i"]))[:n]


def _remediation(library: Library, rows: Iterable[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for r in rows:
        pat = library.get(r.get("pattern") or "")
        for step in pat.remediation if pat else ():
            if step not in out:
                out.append(step)
    return out[:6]


def _silent_evidence(ctx: Context, ranks: Iterable[int]) -> list[Evidence]:
    out = []
    for r in ranks:
        st = ctx.states.get(r)
        if st and st.last_row:
            out.append(evidence(st.last_row, f"last line from rank {r}"))
    return out[:4]


def _phase_rows(ctx: Context, ranks: Iterable[int], since: datetime | None) -> list[dict[str, Any]]:
    """Lines of these ranks that name a long rank-local phase (checkpoint, evaluation, …)."""
    sub = ctx.ev.filter(
        pl.col("rank").is_in(list(ranks)) & pl.col("message").str.contains_any(list(PHASE_WORDS))
    )
    sub = sub.filter(pl.col("_fw") < 0.3)
    if since is not None:
        sub = sub.filter(pl.col("ctime").is_null() | (pl.col("ctime") >= since - timedelta(minutes=30)))
    return sub.sort("_i").tail(4).to_dicts()


# --------------------------------------------------------------------------- hangs


def hang(ctx: Context) -> list[Draft]:
    """Collective timeouts: mismatch, skew, silent ranks, and config vs straggler."""
    main = ctx.main
    if main is None:
        return _merge([d for d in (_desync(ctx), _heartbeat(ctx)) if d])
    drafts: list[Draft] = []
    for rule in (_mismatch, _seq_skew):
        d = rule(ctx, main)
        if d is not None:
            drafts.append(d)
    silence = _silence(ctx, main)
    stragglers = [d for d in (_enqueue_skew(ctx, main), _desync(ctx), _heartbeat(ctx)) if d]
    if isinstance(silence, list):
        drafts.extend(silence)
    elif silence is not None:
        stragglers.append(silence)
    merged = _merge(stragglers)
    for d in merged:
        drafts.extend(_config_or_straggler(ctx, main, d))
    if not drafts:
        drafts.extend(_config_or_straggler(ctx, main, _nobody(ctx, main)))
    for d in drafts:
        if not d.culprits and not d.hosts:
            d.collect.extend(COLLECT_NEXT_TIME)
    return drafts


def _reporters_text(ctx: Context, a: Aligned) -> str:
    named = w.others_phrase(a.reporters, ctx.world_size)
    if a.hidden:
        return f"{named} (and {a.hidden} more Ray folded into one line)"
    return named


def _timeout_rows(a: Aligned, n: int = 3) -> list[dict[str, Any]]:
    return _first((t.row for t in a.reports if t.primary), n) or _first((t.row for t in a.reports), n)


def _mismatch(ctx: Context, a: Aligned) -> Draft | None:
    """Same group and seq, different op or sizes: the odd one out."""
    sigs: dict[tuple[Any, ...], list[int]] = defaultdict(list)
    for r, t in a.by_rank.items():
        if t.primary and (t.op or t.numel_in is not None or t.shape):
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
    d = Draft(category="collective_mismatch", culprits=(), kind="mismatch")
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
        d.score = 0.85 if len(maj) >= 2 else 0.7
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
        d.score = 0.5
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
    d.remediation = list(MISMATCH_REMEDIATION)
    return d


def _sig_size(sig: tuple[Any, ...]) -> str:
    return w.numel(sig[1], sig[2]) if sig[1] is not None else f"shape {sig[3]}"


def _first_failed(ctx: Context, ranks: Sequence[int]) -> int | None:
    """The rank whose timeout/exit came first, where the times separate them by a second or more."""
    times = []
    for r in ranks:
        st = ctx.states.get(r)
        t = st.hang_time if st else None
        if t is not None:
            times.append((t, r))
    times.sort()
    if len(times) >= 2 and (times[1][0] - times[0][0]).total_seconds() >= 1.0:
        return times[0][1]
    return None


def _seq_skew(ctx: Context, a: Aligned) -> Draft | None:
    """Ranks of one group timed out at different sequence numbers: their streams diverged."""
    at: dict[int, tuple[int, str | None]] = {}
    for b in ctx.aligned:
        if b.pg != a.pg or b.seq is None:
            continue
        for r, t in b.by_rank.items():
            if r not in at or b.seq < at[r][0]:
                at[r] = (b.seq, t.op)
    seqs: dict[int, list[int]] = defaultdict(list)
    for r, (s, _op) in at.items():
        seqs[s].append(r)
    if len(seqs) < 2:
        return None
    groups = sorted(seqs.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    maj = groups[0][1]
    others = [r for _s, rs in groups[1:] for r in rs]
    parts = []
    for s, rs in sorted(seqs.items()):
        ops = {op for r in rs if (op := at[r][1])}
        parts.append(f"{w.ranks_phrase(rs)} at {w.collective('/'.join(sorted(ops)) if ops else None, s)}")
    d = Draft(category="collective_mismatch", culprits=(), kind="seq_skew")
    d.rules_in.append(
        f"In {w.pg_name(a.pg)} the ranks timed out at different sequence numbers ({'; '.join(parts)}): "
        "a rank can only wait at a later number after the others completed the earlier ones with it, so their "
        "collective streams diverged."
    )
    clear = len(maj) >= 2 * len(others) and not ctx.missing and not a.hidden
    if clear:
        d.culprits = tuple(sorted(others))
        d.score = 0.75
        d.summary = (
            f"{w.ranks_phrase(others, capital=True)} timed out at a different point of {w.pg_name(a.pg)} than "
            f"{w.ranks_phrase(maj)} ({'; '.join(parts)}); the collective sequence diverged on "
            f"{'that rank' if len(others) == 1 else 'those ranks'}."
        )
    else:
        d.score = 0.7
        d.summary = (
            f"The ranks stopped at different collectives of {w.pg_name(a.pg)} ({'; '.join(parts)}): their "
            "collective sequences diverged, and the logs do not show which side went off."
        )
        if ctx.missing:
            d.rules_out.append(
                f"No log from {w.ranks_phrase(ctx.missing)}: either side could be the majority, so no rank is named."
            )
    d.evidence = [evidence(at_row) for at_row in _skew_rows(ctx, a.pg, at)]
    d.remediation = [
        "Look for a rank-dependent code path between the last common collective and these ones "
        "(checkpoint save/resume, metrics logging, a data-dependent loop) that issues a different number of collectives.",
        "Run once with TORCH_DISTRIBUTED_DEBUG=DETAIL to have the first mismatching collective reported.",
    ]
    return d


def _skew_rows(ctx: Context, pg: str, at: dict[int, tuple[int, str | None]]) -> list[dict[str, Any]]:
    out = []
    for b in ctx.aligned:
        if b.pg != pg:
            continue
        for r, t in b.by_rank.items():
            if at.get(r, (None,))[0] == b.seq:
                out.append(t.row)
    return _first(out, 6)


def _only_attributed_lines(ctx: Context) -> bool:
    """One input whose every recognised line has its writer's rank: nothing in it could be a
    missing rank's unprefixed output."""
    return ctx.ev["source"].n_unique() <= 1 and ctx.ev.filter(pl.col("rank").is_null()).height == 0


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
        d = Draft(category="straggler_hang", culprits=tuple(silent), kind="silent")
        d.score = 0.85 if len(silent) == 1 else 0.75
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
            d.score -= 0.25 if len(missing) == len(silent) else 0.1
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
                d.score = 0.5
                d.summary = (
                    f"{_reporters_text(ctx, a).capitalize()} waited {waited} in {where} for a rank that never "
                    "reached it; the logs given do not show which (no lines from the others)."
                )
                d.rules_in = [
                    f"{_reporters_text(ctx, a).capitalize()} timed out waiting at {where}; the input has no line "
                    f"at all from {w.ranks_phrase(missing)}, so it cannot say which of them was late."
                ]
                d.collect.extend(COLLECT_NEXT_TIME)
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
        d = Draft(category="collective_mismatch", culprits=a.reporters, kind="lone_reporter")
        d.score = 0.75
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
        d.remediation = [
            f"Look for a collective (often a barrier) that only {w.ranks_phrase(a.reporters)} executes: rank-0-only "
            "save/eval/logging code that calls a collective, or an early return on the other ranks."
        ]
        return d
    if size == 1 and not a.hidden and len(ctx.world) >= 3:
        # One rank reported and nothing shows what the others did: hung, slow, or done while the
        # reporter ran a collective too many. Say so instead of guessing.
        who = w.ranks_phrase(a.reporters, capital=True)
        late = Draft(category="straggler_hang", culprits=tuple(silent), kind="silent")
        late.score = 0.25
        late.summary = (
            f"{w.ranks_phrase(silent, capital=True)}{' (no log)' if missing else ''} may never have reached {where}, "
            f"where {who.lower()} waited {waited}."
        )
        late.rules_in.append(
            f"Only {who.lower()} reported {where}; "
            + ("the others left no log." if missing else "the others logged nothing after the wait began.")
        )
        extra = Draft(category="collective_mismatch", culprits=a.reporters, kind="lone_reporter")
        extra.score = 0.25
        extra.summary = f"{who} may have run {where} as a collective the other ranks never issued."
        extra.rules_in.append(f"{who} is the only rank that reported {where}.")
        for d in (late, extra):
            d.rules_out.append(
                f"Nothing from {w.ranks_phrase(silent)} after the wait began: hung peers, slow peers and an extra "
                f"collective on {w.ranks_phrase(a.reporters)} look the same from here."
            )
            d.evidence = [evidence(r) for r in _timeout_rows(a)]
            d.collect.extend(COLLECT_NEXT_TIME)
        return [late, extra]
    if len(ctx.world) == 2 and len(silent) == 1:
        d = Draft(category="straggler_hang", culprits=tuple(silent), kind="silent")
        d.score = 0.65 if not missing else 0.45
        d.summary = f"Rank {silent[0]} never reached {where}; rank {a.reporters[0]} waited {waited} for it."
        d.rules_in.append(
            f"Rank {a.reporters[0]} timed out waiting at {where}; rank {silent[0]} did not report it."
        )
        d.evidence = [evidence(r) for r in _timeout_rows(a)] + _silent_evidence(ctx, silent)
        return d
    return None


def _active_after(st: RankState, t: datetime | None) -> bool:
    return bool(t is not None and st.last_active is not None and st.last_active > t + timedelta(seconds=30))


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
        d = Draft(category="straggler_hang", culprits=tuple(behind), kind="enqueue_skew")
        d.score = 0.85 if never else 0.7
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
        d = Draft(category="collective_mismatch", culprits=tuple(behind), kind="enqueue_skew")
        d.score = 0.8
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
        (pl.col("signal") == "desync_report") & pl.col("lagging_ranks").is_not_null()
    ).to_dicts()
    lagging: set[int] = set()
    not_joined: set[int] = set()
    joined: set[int] = set()
    for r in rows:
        ranks = set(int_list(r["lagging_ranks"]))
        text = r["message"] or ""
        if "lagging ranks" in text:
            lagging |= ranks
        elif "didn't join" in text or "did not join" in text:
            not_joined |= ranks
        elif "joined but" in text or " started " in f" {text} ":
            joined |= ranks
    if not lagging and not_joined and (not joined or len(not_joined) < len(joined)):
        lagging = not_joined
    if lagging:
        ranks_l = sorted(lagging)
        d = Draft(category="straggler_hang", culprits=tuple(ranks_l), kind="desync")
        d.score = 0.8
        d.summary = f"The desync report names {w.ranks_phrase(ranks_l)} as the lagging {'rank' if len(ranks_l) == 1 else 'ranks'}."
        d.rules_in.append(
            f"TORCH_NCCL_DESYNC_DEBUG's report (from {w.plural(len({r['rank'] for r in rows}), 'rank')}) names "
            f"{w.ranks_phrase(ranks_l)} as the ones that never joined."
        )
    elif joined and not_joined and len(joined) < len(not_joined):
        ranks_j = sorted(joined)
        d = Draft(category="collective_mismatch", culprits=tuple(ranks_j), kind="lone_reporter")
        d.score = 0.7
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
    d = Draft(category="straggler_hang", culprits=tuple(stuck), kind="heartbeat")
    d.score = 0.7
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
            k.score = min(0.95, k.score + 0.05)
            k.rules_in.extend(x for x in d.rules_in if x not in k.rules_in)
            k.rules_out.extend(x for x in d.rules_out if x not in k.rules_out)
            k.evidence.extend(e for e in d.evidence if e not in k.evidence)
        else:
            by[key] = d
    return list(by.values())


def _nobody(ctx: Context, a: Aligned) -> Draft:
    """Every expected rank timed out in the same place: the logs name no culprit."""
    coll = w.collective(a.op, a.seq)
    n = a.size
    completed = [st.last_completed.get(a.pg) for r in a.reporters if (st := ctx.states.get(r))]
    first = (
        a.seq is not None
        and a.seq <= 1
        and (not a.silent or a.hidden >= len(a.silent))
        and all(c is None or c < 1 for c in completed)
        and (not a.membership_known or n >= len(a.expected))
    )
    if first:
        d = Draft(category="init_failure", culprits=(), kind="nobody")
        d.score = 0.45
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
        d.remediation = [
            "Run nccl-tests (all_reduce_perf) on the same nodes with NCCL_DEBUG=INFO to see which transport hangs; "
            "try NCCL_P2P_DISABLE=1 / NCCL_IB_DISABLE=1 one at a time to isolate it.",
            "Check the node: nvidia-fabricmanager running (NVSwitch systems), driver/CUDA/NCCL versions, ACS/IOMMU.",
        ]
        return d
    d = Draft(category="straggler_hang", culprits=(), kind="nobody")
    d.score = 0.4
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


def _config_or_straggler(ctx: Context, a: Aligned, d: Draft) -> list[Draft]:
    """For a straggler: was it hung, or doing legitimate long work the timeout did not allow for?"""
    if d.category != "straggler_hang":
        return [d]
    start = a.wait_start or a.first_time
    culprits = list(d.culprits)
    # A desync report may name ranks no other line knows of (no state): they cannot be shown alive.
    alive = [r for r in culprits if r in ctx.states and _active_after(ctx.states[r], start)]
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
        r: [x for x in own[r] if _long_step(x, limit_s, LONG_STEP_S)] + (long[r] if r in shown else [])
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
        and all(t.numel_in is not None and t.numel_in <= SMALL_NUMEL for t in a.by_rank.values() if t.primary)
    )
    job_ms = _job_timeout(ctx, a)
    sub = job_ms is not None and a.timeout_ms is not None and a.timeout_ms < job_ms
    over = [
        (t.elapsed_ms - t.timeout_ms) / t.timeout_ms
        for t in a.reports
        if t.primary and t.elapsed_ms is not None and t.timeout_ms
    ]
    on_time = bool(over) and max(over) < 0.01
    cfg = Draft(category="config_timeout_too_short", culprits=tuple(culprits), hosts=d.hosts, kind="config")
    cfg.score = (
        0.3
        + (0.3 if working else 0.0)
        + (0.15 if lines else 0.0)
        + (0.05 if small else 0.0)
        + (0.15 if sub else 0.0)
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
    cfg.remediation = [
        "Raise the process-group timeout for this step: init_process_group(timeout=datetime.timedelta(...)) "
        "and new_group(timeout=...) for subgroups (accelerate InitProcessGroupKwargs(timeout=...), "
        "verl actor_rollout_ref.nccl_timeout); NCCL_TIMEOUT is read by neither NCCL nor PyTorch.",
        "Or spread the long rank-local work (evaluation, checkpoint gathering, preprocessing) over all ranks, "
        "or run it before the process group is created.",
    ]
    # How the straggler reading fares against it.
    if alive or lines or sub:
        d.score -= 0.15 if working or sub else 0.05
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
        cfg.score = min(cfg.score, 0.35)
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
    if row.get("signal") != "progress":
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


def _progress_text(row: dict[str, Any]) -> str:
    """What a progress row says: ``1695000 of 3634744, 47%, after 30:09`` or ``1170.9 s``."""
    step, total, elapsed = row.get("step"), row.get("total_steps"), row.get("elapsed_s")
    secs = row.get("seconds")
    if step is not None and total:
        text = f"{step} of {total}" + ("" if step >= total else f", {min(99, round(100 * step / total))}%")
        if elapsed is not None:
            m, sec = divmod(int(elapsed), 60)
            text += f", after {m // 60}:{m % 60:02d}:{sec:02d}" if m >= 60 else f", after {m}:{sec:02d}"
        return text
    if secs is not None:
        return f"{secs:.1f} s"
    return w.excerpt(row.get("message"))


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
        pl.col("timeout_ms").is_not_null() & ~pl.col("signal").is_in(["collective_timeout", "work_status"])
    )
    default = cfg.filter(pl.col("pgk").fill_null(DEFAULT_PG) == DEFAULT_PG)["timeout_ms"].to_list()
    if a.pg != DEFAULT_PG and default:
        return max(default)
    vals = [v for v in other if v] + ([] if a.pg == DEFAULT_PG else default)
    return max(vals) if vals else None


# --------------------------------------------------------------------------- fail-stop


FAILSTOP_EXCLUDE = ("network_ib", "network_socket", "store_timeout")


def failstop(ctx: Context) -> list[Draft]:
    """A rank's own failure (OOM, CUDA error, crash, exception, Xid…) and the cascade after it."""
    fails: list[Failure] = [
        st.failure
        for st in ctx.states.values()
        if st.failure is not None and st.failure.weight >= 0.5 and st.failure.signal not in FAILSTOP_EXCLUDE
    ]
    fails += [f for f in ctx.unattributed if f.weight >= 0.5 and f.signal not in FAILSTOP_EXCLUDE]
    if not fails:
        return []
    groups: dict[str, list[Failure]] = defaultdict(list)
    for f in fails:
        groups[f.category].append(f)
    main = ctx.main
    first_timeout = main.first_time if main else None
    earliest_any = min((f.time for f in fails if f.time is not None), default=None)
    drafts = []
    for cat, fs in groups.items():
        fs.sort(key=failure_order)
        lead = fs[0]
        ranks = sorted({f.rank for f in fs if f.rank is not None})
        hosts = sorted({f.host for f in fs if f.rank is None and f.host})
        named = _named_ranks(fs)
        everyone = not named and len(ranks) >= 2 and set(ranks) >= set(ctx.seen)
        culprits: tuple[int, ...] = tuple(named or ([] if everyone else ranks))
        if cat in ENV_CAUSES and not named:
            # A rank that reports a fault of its machine's setup is its victim: the place is the
            # machine (named when it is not every machine seen), not the process.
            culprits = ()
            places = {h for f in fs if (h := f.host or (_host(ctx, f.rank) if f.rank is not None else None))}
            hosts = sorted(places) if places < _hosts_seen(ctx) else []
        d = Draft(category=cat, culprits=culprits, hosts=tuple(hosts), kind="failstop")
        d.score = max(f.weight for f in fs)
        what = _failure_text(lead)
        if named:
            who = w.ranks_phrase(named, capital=True)
        elif ranks:
            who = w.ranks_phrase(ranks, capital=True)
        else:
            who = f"A process on {w.host_list(hosts)}" if hosts else "A process"
        when = f" at {w.clock(lead.time)}" if lead.time else ""
        if everyone:
            d.summary = f"{_failure_clause(lead, 'Every rank')}{when}: the fault is common to all ranks, not one rank's"
            d.rules_in.append(f"{w.ranks_phrase(ranks, capital=True)} all logged {what}.")
        else:
            d.summary = f"{_failure_clause(lead, who)}{when}"
        d.rules_in.append(f"{who} logged '{what}'{when} ({lead.row['source']}:{lead.row['line']}).")
        cascade = _cascade(ctx, culprits or tuple(ranks), lead)
        if main is not None:
            if lead.time is not None and first_timeout is not None:
                if lead.time <= first_timeout:
                    lag = (first_timeout - lead.time).total_seconds()
                    d.rules_in.append(
                        f"It came {w.seconds(lag * 1000)} before the first watchdog timeout ({w.collective(main.op, main.seq)}, "
                        f"{w.clock(first_timeout)}): the timeouts are the cascade."
                    )
                    d.score += 0.03
                else:
                    d.score *= 0.5
                    d.after = True
                    d.rules_out.append(
                        f"It was logged after the first watchdog timeout ({w.clock(first_timeout)}), so it may be a consequence."
                    )
            elif set(culprits) & set(main.silent):
                d.rules_in.append(
                    f"{w.ranks_phrase(set(culprits) & set(main.silent), capital=True)} is also the rank the others waited for at "
                    f"{w.collective(main.op, main.seq)}."
                )
                d.score += 0.02
            elif set(ranks) and set(ranks) <= set(main.reporters):
                d.score -= 0.15
                d.rules_out.append(
                    f"{w.ranks_phrase(ranks, capital=True)} also timed out in {w.collective(main.op, main.seq)} like the others; "
                    "without timestamps the order of the two is not known."
                )
        if (
            earliest_any is not None
            and lead.time is not None
            and (lead.time - earliest_any).total_seconds() > 1
        ):
            d.score -= 0.15
            d.rules_out.append(f"Another failure came earlier ({w.clock(earliest_any)}).")
        d.summary = d.summary.rstrip(".") + (f"; {cascade}." if cascade else ".")
        d.evidence = [evidence(f.row) for f in fs[:4]] + _cascade_evidence(ctx, culprits or tuple(ranks))
        d.remediation = _remediation(ctx.library, [f.row for f in fs[:3]])
        drafts.append(d)
    return drafts


def _named_ranks(fs: list[Failure]) -> list[int]:
    """Ranks a failure line names explicitly (``Duplicate GPU detected : rank 1 and rank 9``)."""
    out: set[int] = set()
    for f in fs:
        if f.signal == "duplicate_gpu":
            for k in ("target_rank", "other_rank"):
                v = f.row.get(k)
                if v is not None:
                    out.add(int(v))
    return sorted(out)


XID_NAMES = {
    13: "graphics engine exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    45: "preemptive channel cleanup",
    48: "double-bit ECC error",
    63: "ECC page retirement",
    64: "ECC page retirement failure",
    74: "NVLink error",
    79: "GPU fell off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    109: "context-switch timeout",
    119: "GSP RPC timeout",
    120: "GSP error",
    137: "NVLink error",
    144: "NVLink error",
    145: "NVLink error",
    146: "NVLink error",
    147: "NVLink error",
    148: "NVLink error",
    149: "NVLink network error",
    150: "NVLink error",
}


def _failure_clause(f: Failure, who: str) -> str:
    """``"Rank 5 ran out of GPU memory (tried to allocate 7.83 GiB)"`` and the like."""
    r = f.row
    plural = who.startswith("Ranks ")
    if f.signal == "oom":
        size = f" (tried to allocate {r['size']})" if r.get("size") else ""
        text = r.get("message") or ""
        gpu = "CUDA" in text or r.get("gpu") is not None
        kind = "GPU memory" if gpu else "host memory"
        return f"{who} ran out of {kind}{size}"
    if f.signal == "cuda_error":
        return f"{who} hit a CUDA error ({r.get('error') or 'see the evidence'})"
    if f.signal == "xid" and r.get("xid") is not None:
        name = XID_NAMES.get(int(r["xid"]), "")
        gpus = (
            f"the GPU{'s' if plural else ''} of {who[0].lower() + who[1:]}" if who.startswith("Rank") else who
        )
        return f"{gpus[0].upper() + gpus[1:]} logged Xid {r['xid']}{' (' + name + ')' if name else ''}"
    if f.signal == "duplicate_gpu":
        bus = f" (bus {r['bus_id']})" if r.get("bus_id") else ""
        return f"{who} were placed on the same GPU{bus}, so NCCL refused to set up the communicator"
    if f.category == "segfault_crash":
        sig = r.get("signal_name") or ("SIGSEGV" if r.get("exitcode") in (-11, 139) else None)
        code = f" (exit code {r['exitcode']})" if r.get("exitcode") is not None else ""
        return f"{who} crashed with {sig or 'a fatal signal'}{code}"
    if f.signal == "python_exception":
        name = r.get("error_name") or "an exception"
        err = r.get("error")
        return f"{who} raised {name}" + (f": {str(err)[:120]}" if err and err != name else "")
    if f.signal == "actor_died":
        return f"{who} lost {'their' if plural else 'its'} Ray worker" + (
            f" ({r['error']})" if r.get("error") else ""
        )
    if f.signal in ("process_exit", "root_cause") and r.get("exitcode") is not None:
        return f"{who} exited with code {r['exitcode']}"
    return f"{who} failed: {_failure_text(f)}"


def _failure_text(f: Failure) -> str:
    r = f.row
    if f.signal == "xid" and r.get("xid") is not None:
        return f"Xid {r['xid']}" + (f" on GPU {r['pci']}" if r.get("pci") else "")
    if f.signal == "oom":
        size = f" (tried to allocate {r['size']})" if r.get("size") else ""
        return (
            f"CUDA out of memory{size}"
            if "CUDA" in (r.get("message") or "") or r.get("gpu") is not None
            else f"out of memory{size}"
        )
    if f.signal == "process_exit" and r.get("exitcode") is not None:
        return f"exit code {r['exitcode']}"
    for k in ("error_name", "error", "signal_name"):
        if r.get(k):
            return str(r[k])
    pat = f.pattern.split(".")[-1].replace("_", " ")
    return pat or f.signal.replace("_", " ")


def _cascade(ctx: Context, culprits: Sequence[int], lead: Failure) -> str:
    """``"timeouts on ranks 0,2-7"`` for what the other ranks logged afterwards."""
    others = sorted(r for r, st in ctx.states.items() if r not in culprits and (st.timeouts or st.hang_time))
    if others:
        return f"the timeouts on {w.others_phrase(others, ctx.world_size)} followed"
    errs = sorted(
        r
        for r, st in ctx.states.items()
        if r not in culprits and any(f.weight >= 0.3 and f is not lead for f in st.failures)
    )
    if errs:
        return f"the errors on {w.others_phrase(errs, ctx.world_size)} followed"
    stopped = sorted(
        r
        for r, st in ctx.states.items()
        if r not in culprits and any(f.signal == "process_exit" for f in st.failures)
    )
    if stopped:
        return f"{w.others_phrase(stopped, ctx.world_size)} {'was' if len(stopped) == 1 else 'were'} then stopped"
    return ""


def _cascade_evidence(ctx: Context, culprits: Sequence[int]) -> list[Evidence]:
    main = ctx.main
    if main is None:
        return []
    return [evidence(t.row, "cascade") for t in main.reports[:3] if t.rank not in culprits]


# --------------------------------------------------------------------------- network


def network(ctx: Context) -> list[Draft]:
    """IB/socket errors placed on hosts.

    - Errors a host reports about its own adapter (async port events, completions without a
      peer) implicate that host's port or link: the hosts are named, not their ranks.
    - Errors naming a peer address are edges (reporter host, peer host); the host at one end of
      most edges (of all of them, ideally) is the suspect, with the ranks it runs.
    - Errors between processes of one host are not the network's: intra-node traffic should not
      use it at all (P2P/SHM disabled or broken), which is a topology/config problem.
    """
    rows = ctx.ev.filter(
        pl.col("signal").is_in(["network_ib", "network_socket"]) & (pl.col("_fw") > 0)
    ).to_dicts()
    if not rows:
        return []
    ib = any(r["signal"] == "network_ib" for r in rows)
    category = "network_ib" if ib else "network_socket"
    edges: list[tuple[str | None, str, dict[str, Any]]] = []
    intra: list[dict[str, Any]] = []
    local: dict[str, list[dict[str, Any]]] = defaultdict(list)
    unplaced: list[dict[str, Any]] = []
    for r in rows:
        me = r["host"] or (ctx.book.rank_host.get(r["rank"]) if r["rank"] is not None else None)
        addr = r["peer_addr"] or r["peer"]
        if addr:
            peer = ctx.book.host_of(addr) or _bare(addr)
            if me is not None and peer == me:
                intra.append(r)
            else:
                edges.append((me, peer, r))
        elif me is not None and _adapter_fault(r):
            local[me].append(r)
        else:
            unplaced.append(r)
    drafts: list[Draft] = []
    if unplaced and not (edges or intra or local):
        drafts.append(_own_socket(ctx, unplaced, category))
    if intra and len(intra) >= len(edges):
        drafts.append(_intra_node(ctx, intra))
    if local:
        drafts.append(_local_fault(ctx, local, category, ib))
    elif edges:
        d = _peer_fault(ctx, edges, category, ib)
        if d is not None:
            drafts.append(d)
    return drafts


def _own_socket(ctx: Context, rows: list[dict[str, Any]], category: str) -> Draft:
    """Network errors a rank reports about its own connections without naming the peer (a foreign
    client's wrong handshake, a closed socket): the reporting ranks are where it shows, at low
    confidence, since the log does not say what is on the other end."""
    ranks = sorted({int(r["rank"]) for r in rows if r.get("rank") is not None})
    named = ranks if ranks and set(ranks) < set(ctx.seen) else []
    d = Draft(category=category, culprits=tuple(named), kind="network", score=0.4)
    what = _net_detail(rows) or str(rows[0].get("message") or "")
    who = w.ranks_phrase(ranks, capital=True) if ranks else "A process"
    d.summary = f"{who} reported a network error on its own connections: {w.excerpt(what)}."
    d.rules_in.append(f"{len(rows)} network error line(s) that name no peer.")
    d.rules_out.append("The log does not say what is on the other end of the connection.")
    d.evidence = [evidence(r) for r in _first(rows, 4)]
    d.remediation = _remediation(ctx.library, rows[:3])
    return d


def _adapter_fault(r: dict[str, Any]) -> bool:
    """A line about the reporter's own adapter that is a fault (not ``port active``/GID changes)."""
    if r.get("ib_status") is not None:
        return True
    text = f"{r.get('error') or ''} {r.get('message') or ''}".lower()
    return any(x in text for x in ("error", "catastrophic", "fatal", "down", "fail"))


def _local_fault(ctx: Context, local: dict[str, list[dict[str, Any]]], category: str, ib: bool) -> Draft:
    hosts = sorted(local, key=lambda h: (-len(local[h]), h))
    every = [r for h in hosts for r in local[h]]
    d = Draft(category=category, culprits=(), hosts=tuple(sorted(hosts)), kind="network_local")
    d.score = 0.72
    detail = _net_detail(every)
    counts = ", ".join(f"{h} ({len(local[h])})" for h in hosts[:5])
    d.summary = (
        f"The {'InfiniBand' if ib else 'network'} adapter{'s' if len(hosts) > 1 else ''} of {w.host_list(hosts)} "
        f"reported faults on {'their' if len(hosts) > 1 else 'its'} own port{': ' + detail if detail else ''}; "
        f"the link or NIC of {'those hosts' if len(hosts) > 1 else 'that host'} is the suspect."
    )
    d.rules_in.append(
        f"Adapter errors reported by the host itself, lines per host: {counts}. A port that goes down and up "
        "(port error / port active) is a flapping link or a failing NIC or cable."
    )
    others = sorted({r["rank"] for r in every if r.get("rank") is not None})
    if others:
        d.rules_in.append(f"Reported by {w.ranks_phrase(others)}, i.e. by every process using that adapter.")
    d.rules_out.append(
        "Errors about one's own port do not come from a peer process dying; no crash is needed to explain them."
    )
    d.evidence = [evidence(r) for h in hosts for r in _first(local[h], 2)][:8]
    d.remediation = _remediation(ctx.library, every[:3])
    return d


def _peer_fault(
    ctx: Context, edges: list[tuple[str | None, str, dict[str, Any]]], category: str, ib: bool
) -> Draft | None:
    touch: Counter[str] = Counter()
    reporters_of: dict[str, set[tuple[Any, Any]]] = defaultdict(set)
    for me, peer, r in edges:
        for h in {me, peer} - {None}:
            assert h is not None
            touch[h] += 1
        reporters_of[peer].add((me, r["rank"]))
    ranked = sorted(touch.items(), key=lambda kv: (-kv[1], -len(reporters_of.get(kv[0], ())), kv[0]))
    top, n_top = ranked[0]
    if len(ranked) > 1 and ranked[1][1] == n_top and len(edges) > 1:
        return None
    everywhere = n_top == len(edges)
    rows = [r for me, peer, r in edges if top in (me, peer)]
    reps = reporters_of.get(top, set())
    # "No route to host" / "Network is unreachable": the reporters have no path to that address
    # (interface selection, routing), which says nothing against the processes behind it.
    unroutable = all(_unroutable(r) for r in rows)
    ranks = [] if unroutable else ctx.book.ranks_on(top)
    d = Draft(category=category, culprits=tuple(ranks), hosts=(top,), kind="network")
    d.score = (0.75 if ib else 0.6) + (0.05 if everywhere and len(edges) > 1 else 0.0)
    detail = _net_detail(rows)
    on = f" (ranks {w.rank_list(ranks)})" if ranks else ""
    rep_hosts = {h for h, _ in reps if h}
    d.summary = (
        f"{w.plural(len(reps) or len(rows), 'rank').capitalize()} on {w.plural(len(rep_hosts) or 1, 'host')} lost "
        f"{'InfiniBand' if ib else 'socket'} connections to {top}{on}{': ' + detail if detail else ''}; "
        f"every failing connection has {top} at one end, so its link or NIC is the suspect."
        if everywhere
        else f"{w.plural(len(rows), 'failing connection').capitalize()} involve {top}{on}"
        f"{': ' + detail if detail else ''}; its link or NIC is the suspect."
    )
    d.rules_in.append(
        f"{n_top} of the {len(edges)} failing connections have {top} at one end"
        + (
            " (all of them)."
            if everywhere
            else f"; the next host is at {ranked[1][1]}."
            if len(ranked) > 1
            else "."
        )
    )
    addrs = sorted({(r["peer_addr"] or r["peer"] or "") for me, peer, r in edges if peer == top})
    if addrs:
        d.rules_in.append(f"Peer address(es) {', '.join(a for a in addrs[:4] if a)} belong to {top}.")
    died = [
        st.failure
        for rk in ranks
        if (st := ctx.states.get(rk))
        and st.failure
        and st.failure.signal not in FAILSTOP_EXCLUDE
        and st.failure.weight >= 0.5
    ]
    t_net = min((r["ctime"] for r in rows if r["ctime"] is not None), default=None)
    if died:
        f = sorted(died, key=failure_order)[0]
        if f.time is None or t_net is None or f.time <= t_net:
            d.score *= 0.5
            d.after = True
            d.rules_out.append(
                f"Rank {f.rank} on {top} failed itself ({_failure_text(f)}) before the network errors: "
                "its peers lost it because it died."
            )
    else:
        d.rules_out.append(
            f"No process on {top} logged a crash, OOM or exception before the errors: the connection failed, "
            "not the peer process."
        )
    statuses = {r["ib_status"] for r in rows if r.get("ib_status") is not None}
    if statuses and statuses <= {5}:
        d.score -= 0.2
        d.rules_out.append(
            "Only status 5 (WR_FLUSH_ERR) was seen: the queue pair was already in error, a secondary symptom."
        )
    if unroutable:
        d.summary = (
            f"{w.plural(len(reps) or len(rows), 'rank').capitalize()} on {w.plural(len(rep_hosts) or 1, 'host')} "
            f"found no route to {top}'s address ({', '.join(a for a in addrs[:4] if a) or top}): the interface "
            "NCCL chose for that address is not reachable from the other nodes."
        )
        d.rules_in.append(
            "Every failure is 'no route' / 'unreachable': a routing or interface-selection problem "
            "(NCCL_SOCKET_IFNAME), not a process or NIC that failed."
        )
    d.evidence = [evidence(r) for r in _first(rows, 6)]
    d.remediation = _remediation(ctx.library, rows[:3])
    return d


def _unroutable(r: dict[str, Any]) -> bool:
    text = f"{r.get('error') or ''} {r.get('message') or ''}".lower()
    return "no route to host" in text or "network is unreachable" in text


RESTRICTIVE_ENV = {
    "NCCL_P2P_DISABLE": ("1",),
    "NCCL_SHM_DISABLE": ("1",),
    "NCCL_P2P_LEVEL": ("LOC", "0"),
}


def _intra_node(ctx: Context, intra: list[dict[str, Any]]) -> Draft:
    hosts = sorted({r["host"] for r in intra if r.get("host")})
    d = Draft(category="p2p_topology", culprits=(), kind="p2p")
    d.score = 0.65
    env = ctx.ev.filter(pl.col("env_var").is_in(list(RESTRICTIVE_ENV)))
    bad = sorted(
        {
            f"{v}={val}"
            for v, val in env.select("env_var", "env_value").iter_rows()
            if val is not None and str(val).strip().rstrip(".").upper() in RESTRICTIVE_ENV.get(v, ())
        }
    )
    d.summary = (
        f"Processes on the same host ({w.host_list(hosts)}) failed talking to each other over the network transport"
        + (f" because {', '.join(bad)} turned off the intra-node paths" if bad else "")
        + "; the GPU peer-to-peer / shared-memory setup is the problem, not the network."
    )
    d.rules_in.append(
        f"{len(intra)} connection error(s) have both ends on the same host: intra-node traffic went through sockets/IB."
    )
    if bad:
        d.score += 0.15
        d.rules_in.append(f"The environment sets {', '.join(bad)}, which forbids P2P/SHM between local GPUs.")
        d.evidence.extend(evidence(r) for r in env.head(3).to_dicts())
    d.rules_out.append("No remote host is involved, so neither a remote peer nor the fabric can be at fault.")
    d.evidence = [evidence(r) for r in _first(intra, 4)] + d.evidence
    d.remediation = [
        "Unset NCCL_P2P_DISABLE / NCCL_P2P_LEVEL / NCCL_SHM_DISABLE unless a measured problem requires them.",
        "Check the GPU topology (nvidia-smi topo -m) and, on PCIe systems, ACS/IOMMU settings that break P2P.",
    ]
    return d


def _bare(addr: str) -> str:
    from nccllog.correlate.network import strip_port

    return strip_port(addr)


def _net_detail(rows: list[dict[str, Any]]) -> str:
    r = rows[0]
    if r.get("ib_status") is not None:
        txt = f"IB error {r['ib_status']}"
        if r.get("vendor_err") is not None:
            txt += f", vendor err {r['vendor_err']}"
        return txt
    return str(r.get("error") or "")


# --------------------------------------------------------------------------- bootstrap / init / version


def bootstrap(ctx: Context) -> list[Draft]:
    """Store/rendezvous timeouts: who was waited for."""
    rows = ctx.ev.filter((pl.col("signal") == "store_timeout") & (pl.col("_fw") > 0)).to_dicts()
    if not rows:
        return []
    named: Counter[int] = Counter()
    for r in rows:
        if (t := _awaited_rank(r)) is not None:
            named[t] += 1
    d = Draft(category="bootstrap_rendezvous", culprits=(), kind="bootstrap")
    d.evidence = [evidence(r) for r in _first(rows, 4)]
    d.remediation = _remediation(ctx.library, rows[:3])
    writers = sorted({r["rank"] for r in rows if r["rank"] is not None})
    if named:
        target = [r for r, _ in named.most_common() if named[r] == named.most_common(1)[0][1]]
        d.culprits = tuple(sorted(target))
        # What the waiters say points at the awaited rank, but its own log is what would prove it:
        # without a line of its own the verdict stays an inference (medium at most).
        d.score = 0.8 if _own_failure_seen(ctx, target) else 0.65
        d.summary = (
            f"{w.ranks_phrase(writers, capital=True) if writers else 'The other ranks'} timed out in the store waiting for "
            f"{w.ranks_phrase(target)}, which had not published its part: {w.ranks_phrase(target)} was late."
        )
        d.rules_in.append(f"The store errors name {w.ranks_phrase(target)} as the rank they waited for.")
        return [d]
    joined = [
        (r["joined"], r["world_size"]) for r in rows if r.get("joined") is not None and r.get("world_size")
    ]
    absent = [r for r in ctx.world if not ctx.states[r].seen] if ctx.world else []
    if joined:
        j, n = joined[0]
        if absent and len(absent) == n - j:
            d.culprits = tuple(absent)
            d.score = 0.75
            d.summary = f"Only {j} of {n} ranks joined the rendezvous; {w.ranks_phrase(absent)} never did."
            d.rules_in.append(
                f"{n - j} rank(s) missing from the rendezvous and no log from {w.ranks_phrase(absent)}."
            )
        else:
            d.score = 0.6
            d.summary = f"Only {j} of {n} ranks joined the rendezvous before the store timed out."
            d.rules_in.append(f"The store counted {j}/{n} clients.")
        return [d]
    addrs = sorted({a for r in rows if (a := _store_address(r))})
    hosts = sorted({ctx.book.host_of(a) or a for a in addrs})
    reporters = {r["host"] for r in rows if r.get("host")}
    known = set(ctx.book.host_ranks) | {h for h in ctx.ev["host"].drop_nulls().unique().to_list()}
    quiet = sorted(known - reporters)
    if addrs and all(ctx.book.host_of(a) is None for a in addrs) and len(quiet) == 1 and len(reporters) >= 2:
        # The store's address maps to no host we know, but one host is the only one not trying to
        # reach it: that is where the store (rank 0's node) should have been listening.
        hosts = quiet
        d.rules_in.append(
            f"Every host but {quiet[0]} reports failing to reach {', '.join(addrs)}; {quiet[0]} is the one the store runs on."
        )
    d.hosts = tuple(hosts)
    d.score = 0.55
    d.summary = (
        f"{w.ranks_phrase(writers, capital=True) if writers else 'The ranks'} could not reach the rendezvous store"
        + (f" at {', '.join(addrs)}" if addrs else "")
        + (f" on {w.host_list(hosts)}" if hosts and hosts != addrs else "")
        + ": the node that hosts it was not up (or not listening) in time."
    )
    d.rules_in.append("Store connect/wait timeouts before any collective ran.")
    return [d]


def _awaited_rank(r: dict[str, Any]) -> int | None:
    """The global rank a store waiter waits for, where the line lets us know it.

    ``waits_for`` is a rank of the waiter's group; it is a global rank only when the group is the
    world, which shows as the waiter's group rank (``target_rank``) equal to its global rank (or
    the global rank unknown, as in a bare paste).
    """
    t = r.get("waits_for")
    if t is None:
        return None
    own_group_rank, own_rank = r.get("target_rank"), r.get("rank")
    if own_rank is not None and own_group_rank is not None and own_rank != own_group_rank:
        return None
    return None if t == own_rank else int(t)


def failure_lines(ev: pl.DataFrame) -> pl.DataFrame:
    """Error-level lines with a weight as a cause: what a rank's own failure looks like."""
    return ev.filter(pl.col("severity").is_in(["error", "critical"]) & (pl.col("_fw") > 0))


def _own_failure_seen(ctx: Context, ranks: list[int]) -> bool:
    """Whether every one of ``ranks`` has a failure line of its own (one it wrote or is about)."""
    own = set(failure_lines(ctx.ev)["subject"].drop_nulls().to_list())
    return all(r in own for r in ranks)


_STORE_ADDR = regex.compile(r"\(([\w.\-:]+), \d+\)|(?:to|host) \[?([\w.\-]+?)\]?:\d+\b")


def _store_address(r: dict[str, Any]) -> str | None:
    """The store address a rendezvous error names (its field, or ``(host, port)`` / ``host:port`` in the text)."""
    if r.get("target_host"):
        return str(r["target_host"])
    for text in (r.get("error"), r.get("message")):
        m = _STORE_ADDR.search(text or "")
        if m:
            return m.group(1) or m.group(2)
    return None


def versions(ctx: Context) -> list[Draft]:
    """Ranks that run a different NCCL/torch version than the rest."""
    drafts = []
    for fld, name in (("nccl_version", "NCCL"), ("torch_version", "PyTorch")):
        rows = ctx.ev.filter(pl.col(fld).is_not_null() & pl.col("rank").is_not_null())
        if rows.height == 0:
            continue
        per = rows.group_by("rank").agg(pl.col(fld).first())
        by_v: dict[str, list[int]] = defaultdict(list)
        for rank, v in per.iter_rows():
            by_v[v].append(rank)
        if len(by_v) < 2:
            continue
        groups = sorted(by_v.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        odd = sorted(r for _, rs in groups[1:] for r in rs)
        d = Draft(
            category="version_mismatch",
            culprits=tuple(odd) if len(odd) < len(groups[0][1]) else (),
            kind="version",
        )
        d.score = 0.55
        parts = "; ".join(f"{w.ranks_phrase(rs)}: {v}" for v, rs in groups)
        d.summary = f"The ranks run different {name} versions ({parts})."
        d.rules_in.append(f"{name} versions differ across ranks: {parts}.")
        d.evidence = [evidence(r) for r in rows.filter(pl.col("rank").is_in(odd)).head(3).to_dicts()]
        drafts.append(d)
    drafts.extend(_system_version(ctx))
    return drafts


def _system_version(ctx: Context) -> list[Draft]:
    """A host service that refused to start because its version does not match the driver (the
    fabric manager of an NVSwitch node): the GPUs of that host cannot carry collectives, so every
    rank there waits in the first one. A cause, not a rank fault."""
    rows = ctx.ev.filter(
        (pl.col("signal") == "version")
        & (pl.col("category") == "version_mismatch")
        & pl.col("severity").is_in(["error", "critical"])
    )
    if rows.height == 0:
        return []
    first = _first(rows.to_dicts(), 3)
    hosts = sorted({r["host"] for r in rows.to_dicts() if r.get("host")})
    lead = first[0]
    d = Draft(category="version_mismatch", culprits=(), hosts=tuple(hosts), kind="system_version")
    # Above the generic failure reading of the same line: this one says what the service is for.
    d.score = 0.62
    where = f" on {', '.join(hosts)}" if hosts else ""
    versions_text = (
        f" ({lead['local_version']} against driver {lead['remote_version']})"
        if lead.get("local_version") and lead.get("remote_version")
        else ""
    )
    d.summary = (
        f"A GPU system service{where} did not start because its version does not match the loaded "
        f"driver{versions_text}: the GPUs there cannot carry collectives, so the ranks wait in them. "
        "This is a node setup problem, not a rank problem."
    )
    d.rules_in.append(f"{lead['pattern']}: {lead['message'].strip()[:200]}")
    d.rules_out.append(
        "An init or first-collective hang on every rank, with no rank failing first, is what a "
        "node whose GPU fabric was never set up produces; no rank is to blame."
    )
    d.evidence = [evidence(r) for r in first]
    d.remediation = _remediation(ctx.library, first)
    return [d]


def driver_hang(ctx: Context) -> list[Draft]:
    """The GPU driver stopped answering on a host (a process asleep inside the driver, nvidia-smi
    failing): ranks that waited there were waiting on the driver, not on another rank. A cause,
    even when it was only observed after the timeouts: a process cannot leave such a state."""
    rows = ctx.ev.filter(pl.col("signal") == "driver_hang")
    if rows.height == 0:
        return []
    found = rows.to_dicts()
    first = _first(found, 3)
    hosts = tuple(sorted({r["host"] for r in found if r.get("host")}))
    d = Draft(category="gpu_hardware_xid", culprits=(), hosts=hosts, kind="driver_hang")
    d.score = 0.6
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


# --------------------------------------------------------------------------- hangs without a watchdog


def stalls(ctx: Context) -> list[Draft]:
    """Every worker reports a stall but no watchdog fired and no rank is behind: the wait is outside the ranks."""
    if ctx.main is not None:
        return []
    stalled = sorted(r for r, st in ctx.states.items() if st.stalls)
    rows = ctx.ev.filter(pl.col("signal") == "stall")
    total = int(rows["repeat"].sum()) if rows.height else 0
    if not rows.height:
        return []
    if stalled and len(stalled) * 2 <= len(ctx.seen) and total <= len(stalled):
        d = Draft(category="straggler_hang", culprits=tuple(stalled), kind="stall_subset")
        d.score = 0.5
        d.summary = f"{w.ranks_phrase(stalled, capital=True)} stopped making progress while the other ranks did not report a stall."
        d.rules_in.append(f"Stall lines come from {w.ranks_phrase(stalled)} only.")
        d.evidence = [evidence(r) for r in _first(rows.to_dicts(), 4)]
        return [d]
    d = Draft(category="other", culprits=(), kind="stall_all")
    d.score = 0.5
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
    d.collect.extend(COLLECT_NEXT_TIME)
    return [d]


STOP_WORDS = (
    "^C",
    "SIGINT",
    "SIGTERM",
    "SIGKILL",
    "death signal",
    "CANCELLED",
    "Cancelled",
    "cancelled",
    "Terminated",
    "closing signal",
    "Killed",
    "killed",
    "TIME LIMIT",
    "time limit",
    "Global timeout",
    "timed out",
)
VIRTUAL_IFACE = regex.compile(
    r"(?:^|[\s\]])(veth\w*|docker\d*|br-[0-9a-f]+|virbr\d*|cni\d*|flannel\.\d+|cali\w+|lo):|\bfe80::"
)
LOOPBACK = ("localhost", "127.0.0.1", "::1", "0.0.0.0")


def startup_hang(ctx: Context) -> list[Draft]:
    """The job was stopped from outside (cancelled, interrupted, killed by a time limit) with no
    watchdog timeout and no rank failure: how far did the ranks get before they stopped moving?

    Never reached NCCL -> the rendezvous did not complete; NCCL set up but no communicator
    finished init -> communicator init hung (often interface selection); every communicator ready
    and nothing after -> the first collective hung (often the P2P path)."""
    if ctx.main is not None:
        return []
    if any(st.failure is not None and st.failure.weight >= 0.5 for st in ctx.states.values()):
        return []
    if any(f.weight >= 0.5 for f in ctx.unattributed):
        return []
    ev = ctx.ev
    exits = ev.filter(pl.col("signal") == "process_exit")
    words = pl.concat_str(pl.col("signal_name").fill_null(""), pl.lit(" "), pl.col("message").fill_null(""))
    stopped = exits.filter(words.str.contains_any(list(STOP_WORDS))).to_dicts()
    stalls = ev.filter(pl.col("signal") == "stall").to_dicts()
    if not stopped and not stalls:
        return []
    if ev.filter(
        (pl.col("signal") == "progress") & (pl.col("op_count").is_not_null() | pl.col("step").is_not_null())
    ).height:
        return []
    init = ev.filter(pl.col("signal") == "init")
    boot = ev.filter(pl.col("signal") == "bootstrap")
    complete = init.filter(
        pl.col("phase").fill_null("").str.contains("COMPLETE")
        | pl.col("message").str.contains("Init COMPLETE")
    )
    stop_ev = [evidence(r) for r in _first(stopped or stalls, 2)]
    env = _rendezvous_env(ctx)
    if init.height == 0 and boot.height == 0:
        d = Draft(category="bootstrap_rendezvous", culprits=(), kind="startup")
        d.score = 0.55
        d.summary = (
            "The job was stopped before any rank set up NCCL: the ranks never got through the rendezvous "
            "(init_process_group)" + (f"; {env[0]}" if env else "") + "."
        )
        d.rules_in.append(
            "No NCCL line from any rank, no collective, and the job ended by being stopped from outside."
        )
        if env:
            d.score += 0.2
            d.rules_in.extend(env)
        d.rules_out.append(
            "No rank crashed or reported an error, so nothing but the rendezvous explains the wait."
        )
        d.evidence = stop_ev
        d.remediation = [
            "Give every node the same MASTER_ADDR (the first node's routable address, not localhost) and the same "
            "MASTER_PORT; under Slurm derive them from SLURM_NODELIST / SLURM_JOB_ID on every node alike.",
            "Set TORCH_DISTRIBUTED_DEBUG=INFO and TORCH_CPP_LOG_LEVEL=INFO to see the store connection attempts.",
        ]
        return [d]
    ranks_init = {r for r in init["rank"].to_list() if r is not None}
    ranks_done = {r for r in complete["rank"].to_list() if r is not None}
    if complete.height == 0 or (ranks_init and not ranks_init <= ranks_done):
        virtual = boot.filter(
            pl.col("message").map_elements(
                lambda m: bool(VIRTUAL_IFACE.search(m or "")), return_dtype=pl.Boolean
            )
        )
        socket = boot.filter(pl.col("message").str.contains("Socket")).height > 0 or bool(
            boot.filter(pl.col("net") == "Socket").height
        )
        if virtual.height:
            names = sorted(
                {
                    m.group(1) or "link-local IPv6"
                    for t in virtual["message"].to_list()
                    if (m := VIRTUAL_IFACE.search(t))
                }
            )
            d = Draft(category="network_socket", culprits=(), kind="startup")
            d.score = 0.55
            d.summary = (
                f"NCCL's communicator setup hung on every rank after it picked up the virtual interface(s) "
                f"{', '.join(names)} alongside the real one; the socket connections over them never completed."
            )
            d.rules_in.append(
                f"The NET/Socket lines list {', '.join(names)} (container/bridge or link-local) among the interfaces NCCL uses."
            )
            d.rules_in.append(
                "No communicator finished init, and the job was stopped from outside without any error."
            )
            d.evidence = [evidence(r) for r in virtual.head(2).to_dicts()] + stop_ev
            d.remediation = [
                "Pin NCCL to the real interface(s): NCCL_SOCKET_IFNAME=eth0 (or =^veth,docker,lo to exclude).",
            ]
            return [d]
        d = Draft(category="network_socket" if socket else "init_failure", culprits=(), kind="startup")
        d.score = 0.4
        d.summary = "NCCL communicator init never completed on any rank; the job was stopped while the ranks waited in it."
        d.rules_in.append("NCCL bootstrap lines but no 'Init COMPLETE', no error, and an external stop.")
        d.evidence = stop_ev
        d.collect.extend(COLLECT_NEXT_TIME[2:])
        return [d]
    p2p = init.filter(pl.col("message").str.contains("via P2P")).height > 0
    d = Draft(category="p2p_topology" if p2p else "straggler_hang", culprits=(), kind="startup")
    d.score = 0.5 if p2p else 0.35
    d.summary = (
        "Every communicator finished init over P2P and then nothing moved until the job was stopped: the first "
        "collective hung on the GPU peer-to-peer path."
        if p2p
        else "Every communicator finished init and then nothing moved until the job was stopped."
    )
    d.rules_in.append("Init COMPLETE on every rank, no collective progress and no error afterwards.")
    d.evidence = [evidence(r) for r in complete.head(2).to_dicts()] + stop_ev
    if p2p:
        d.evidence[:0] = [
            evidence(r) for r in init.filter(pl.col("message").str.contains("via P2P")).head(1).to_dicts()
        ]
        # GPU peer traffic through PCIe switches (PIX/PXB), or P2P settings in play: the PCIe
        # peer path (ACS, IOMMU) is the usual reason P2P connects and then never moves data.
        switch = init.filter(pl.col("path_type").fill_null("").str.contains(r"\bPIX\b|\bPXB\b"))
        p2p_env = ev.filter(
            (pl.col("signal") == "env_setting") & pl.col("env_var").fill_null("").str.starts_with("NCCL_P2P")
        )
        if switch.height:
            d.score += 0.1
            d.rules_in.append(
                f"NCCL's topology search routes GPU peer traffic through PCIe switches (type {switch['path_type'][0]}): "
                "with ACS or an IOMMU (VT-d) active, switch-local peer transfers are redirected or dropped."
            )
            d.evidence.insert(1, evidence(switch.head(1).to_dicts()[0]))
        if p2p_env.height:
            d.rules_in.append(
                "P2P settings were in play: "
                + ", ".join(sorted({f"{r['env_var']}={r['env_value']}" for r in p2p_env.to_dicts()}))[:200]
                + "."
            )
        d.remediation = [
            "Test with NCCL_P2P_DISABLE=1: if it then runs, the P2P path is broken (PCIe ACS / IOMMU redirecting "
            "peer traffic); disable ACS on the PCIe switches or set iommu=pt.",
        ]
    return [d]


def _rendezvous_env(ctx: Context) -> list[str]:
    """What the MASTER_ADDR / MASTER_PORT settings the ranks printed say about the rendezvous."""
    rows = ctx.ev.filter(
        pl.col("env_var").is_in(["MASTER_ADDR", "MASTER_PORT"]) & pl.col("env_value").is_not_null()
    )
    if rows.height == 0:
        return []
    out = []
    addrs = sorted(set(rows.filter(pl.col("env_var") == "MASTER_ADDR")["env_value"].to_list()))
    ports = sorted(set(rows.filter(pl.col("env_var") == "MASTER_PORT")["env_value"].to_list()))
    hosts = {h for h in ctx.ev["host"].drop_nulls().unique().to_list()} | set(ctx.book.host_ranks)
    if any(a in LOOPBACK for a in addrs) and len(hosts) > 1:
        out.append(
            f"MASTER_ADDR is {', '.join(a for a in addrs if a in LOOPBACK)} on a job spanning {len(hosts)} hosts"
        )
    if len(addrs) > 1:
        out.append(f"the ranks were given {len(addrs)} different MASTER_ADDR values")
    if len(ports) > 1:
        out.append(f"the ranks were given {len(ports)} different MASTER_PORT values")
    return out


def leftovers(ctx: Context, covered: set[str]) -> list[Draft]:
    """Errors no other rule explained: their pattern's category, low confidence."""
    rows = ctx.ev.filter(
        pl.col("severity").is_in(["error", "critical"])
        & pl.col("category").is_not_null()
        & ~pl.col("category").is_in(list(covered))
    )
    rows = rows.filter(
        ~pl.col("signal").is_in(["collective_timeout", "work_status", "root_cause", "process_exit"])
    )
    drafts = []
    for cat, sub in rows.group_by("category", maintain_order=True):
        d = Draft(category=str(cat[0]), culprits=(), kind="leftover")
        ranks = (
            sorted({r for r in sub["subject"].to_list() if r is not None}) if "subject" in sub.columns else []
        )
        if ranks and not set(ranks) >= set(ctx.seen):
            d.culprits = tuple(ranks)
        d.score = 0.3
        first = _first(sub.to_dicts(), 1)[0]
        d.summary = f"{w.ranks_phrase(ranks, capital=True) if ranks else 'The logs'} show {first['pattern']} ({cat[0]})."
        d.rules_in.append(
            f"{sub.height} line(s) of pattern(s) {', '.join(sorted(set(sub['pattern'].to_list())))[:200]}."
        )
        d.evidence = [evidence(r) for r in _first(sub.to_dicts(), 4)]
        d.remediation = _remediation(ctx.library, sub.head(3).to_dicts())
        drafts.append(d)
    return drafts


# --------------------------------------------------------------------------- verdict

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
    causes = [d for d in drafts if d.kind in CAUSE_KINDS and d.score >= 0.5 and not d.after]
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
                c.score = min(0.97, h.score + 0.05)
            h.rules_out.append(f"What explains the wait: {c.summary}")
    _hardware_first(ctx, drafts)


# Failures a broken GPU or its link produces in the process using it.
HARDWARE_CONSEQUENCES = ("oom", "cuda_error", "segfault_crash", "other")
HARDWARE_LEAD_S = 60  # a hardware event this long after a failure did not cause it


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
            if t_hw is not None and t_sw is not None and (t_hw - t_sw).total_seconds() > HARDWARE_LEAD_S:
                continue
            if hw.score <= sw.score:
                hw.score = min(0.97, sw.score + 0.02)
            if not hw.culprits:
                hw.culprits = sw.culprits
            sw.rules_out.append(f"It follows a hardware fault on the same machine: {hw.summary}")
            hw.rules_in.append(f"What the hardware fault caused: {sw.summary}")


def _earliest(d: Draft) -> datetime | None:
    times = [datetime.fromisoformat(e.time) for e in d.evidence if e.time]
    return min(times) if times else None


def root_causes(ctx: Context) -> list[dict[str, Any]]:
    """torchrun's "Root Cause (first observed failure)" entries: rank, exit code and the rows.

    The block is one line per field; the entry after a ``Root Cause`` header line is the root.
    """
    rows = ctx.ev.filter(pl.col("signal") == "root_cause").sort("_i").to_dicts()
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
            d.penalise(0.1 if share > 0.25 else 0.05, f"no log from {w.ranks_phrase(ctx.missing)}")
        if ctx.coverage.truncated_lines or ctx.coverage.skipped:
            d.penalise(0.05, "some input was truncated or skipped")
        if repeat and d.kind in ("silent", "lone_reporter", "mismatch", "seq_skew", "nobody", "config"):
            d.penalise(
                0.15,
                "Ray folded identical lines of several processes into one ([repeated Nx]); who said what is partly unknown",
            )
        if d.culprits and not d.hosts:
            d.hosts = tuple(
                sorted({h for r in d.culprits if (h := ctx.book.rank_host.get(r) or _host(ctx, r))})
            )
        if d.hosts and single and d.category not in HOST_CAUSES:
            # Naming a host singles it out from others; with one log of one host there is no
            # other, and a job-wide cause (a setting, a peer, an endpoint) is no fault of the host.
            d.hosts = ()


def ranked(drafts: list[Draft]) -> list[Hypothesis]:
    """The drafts as hypotheses, best first."""
    drafts.sort(key=lambda d: (-round(d.score, 6), d.category, d.culprits))
    return [_hypothesis(d) for d in drafts]


def _hosts_seen(ctx: Context) -> set[str]:
    """Every machine the logs show: line hosts, hosts from file names, hosts of known ranks."""
    seen = set(ctx.book.host_ranks) | set(ctx.book.rank_host.values())
    for col in ("host", "_file_host", "_ip"):
        if col in ctx.ev.columns:
            seen |= set(ctx.ev[col].drop_nulls().unique().to_list())
    return seen


def _host(ctx: Context, rank: int) -> str | None:
    st = ctx.states.get(rank)
    return st.host if st else None


def confidence(score: float) -> str:
    """Score -> high / medium / low."""
    if score >= STRONG:
        return "high"
    if score >= MEDIUM:
        return "medium"
    return "low"


def _hypothesis(d: Draft) -> Hypothesis:
    conf = confidence(d.score - d.penalty)
    rules_out = list(d.rules_out) + [f"Confidence lowered: {why}." for why in d.penalty_why]
    if conf == "high" and d.ceiling_why:
        conf = "medium"
        rules_out.append(f"Confidence held at medium: {d.ceiling_why}.")
    return Hypothesis(
        category=d.category,
        culprit_ranks=tuple(sorted(d.culprits)),
        culprit_hosts=tuple(sorted(d.hosts)),
        confidence=conf,  # type: ignore[arg-type]
        summary=d.summary,
        score=round(max(0.0, min(1.0, d.score)), 4),
        evidence=tuple(_culprits_first(_dedupe(d.evidence), d))[:12],
        rules_in=tuple(d.rules_in),
        rules_out=tuple(rules_out),
        remediation=tuple(d.remediation),
        collect_next_time=tuple(dict.fromkeys(d.collect)),
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
