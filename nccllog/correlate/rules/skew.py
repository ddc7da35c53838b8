"""Ranks of one group that timed out at different sequence numbers: streams that diverged, or
one side of a one-sided collective that finished before the other received."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from nccllog.correlate import wording as w
from nccllog.correlate.collectives import Aligned
from nccllog.correlate.rules.base import Context, Draft, _first, _first_collective, _reporters_text, evidence
from nccllog.correlate.rules.remedies import steps
from nccllog.correlate.rules.scores import S
from nccllog.correlate.rules.vocabulary import vocabulary
from nccllog.model import CollectiveRef
from nccllog.vocab import Category


def seq_skew(ctx: Context, a: Aligned) -> Draft | None:
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
    reports = [t for b in ctx.aligned if b.pg == a.pg for t in b.reports]
    unnamed = all(t.row.get("pg") is None for t in reports)
    per_rank = Counter(t.rank for t in reports if t.primary and t.rank is not None)
    if unnamed and (max(seqs) - min(seqs) > S.seq_skew_far or any(n > 1 for n in per_rank.values())):
        # Lines that name no group (torch < 2.2) put every group in the default one: sequence
        # numbers thousands apart, or one rank timing out at several, are different groups'
        # counters, not one stream.
        return None
    groups = sorted(seqs.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    maj = groups[0][1]
    others = [r for _s, rs in groups[1:] for r in rs]
    parts = []
    for s, rs in sorted(seqs.items()):
        ops = {op for r in rs if (op := at[r][1])}
        parts.append(f"{w.ranks_phrase(rs)} at {w.collective('/'.join(sorted(ops)) if ops else None, s)}")
    one_sided = _one_sided(ctx, a, at, seqs, parts)
    if one_sided is not None:
        return one_sided
    # The ranks stopped at different sequence numbers of the group: no one collective to name.
    d = Draft(
        category=Category.COLLECTIVE_MISMATCH, culprits=(), kind="seq_skew", collective=CollectiveRef(pg=a.pg)
    )
    d.rules_in.append(
        f"In {w.pg_name(a.pg)} the ranks timed out at different sequence numbers ({'; '.join(parts)}): "
        "a rank can only wait at a later number after the others completed the earlier ones with it, so their "
        "collective streams diverged."
    )
    clear = len(maj) >= 2 * len(others) and not ctx.missing and not a.hidden
    if clear:
        d.culprits = tuple(sorted(others))
        d.score = S.seq_skew_clear
        d.summary = (
            f"{w.ranks_phrase(others, capital=True)} timed out at a different point of {w.pg_name(a.pg)} than "
            f"{w.ranks_phrase(maj)} ({'; '.join(parts)}); the collective sequence diverged on "
            f"{'that rank' if len(others) == 1 else 'those ranks'}."
        )
    else:
        d.score = S.seq_skew_unclear
        d.summary = (
            f"The ranks stopped at different collectives of {w.pg_name(a.pg)} ({'; '.join(parts)}): their "
            "collective sequences diverged, and the logs do not show which side went off."
        )
        if ctx.missing:
            d.rules_out.append(
                f"No log from {w.ranks_phrase(ctx.missing)}: either side could be the majority, so no rank is named."
            )
    d.evidence = [evidence(at_row) for at_row in _skew_rows(ctx, a.pg, at)]
    d.remediation = steps("seq_skew", ctx.versions)
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


def _one_sided(
    ctx: Context,
    a: Aligned,
    at: dict[int, tuple[int, str | None]],
    seqs: dict[int, list[int]],
    parts: list[str],
) -> Draft | None:
    """Receivers one number behind, in a collective that completes on its sending side alone (a
    broadcast on its root): the senders moved on with the streams in step, and the data never
    arrived. Which side's path lost it the timeouts cannot say, so no rank is named."""
    if len(seqs) != 2:
        return None
    lo, hi = sorted(seqs)
    ops = {at[r][1] for r in seqs[lo]}
    if hi != lo + 1 or len(ops) != 1 or not ops <= vocabulary().one_sided_ops:
        return None
    op = next(iter(ops))
    behind, ahead = sorted(seqs[lo]), sorted(seqs[hi])
    coll = w.collective(op, lo)
    d = Draft(
        category=Category.STRAGGLER_HANG,
        culprits=(),
        kind="seq_skew_one_sided",
        collective=CollectiveRef(pg=a.pg, seq=lo, op=op),
    )
    d.score = S.seq_skew_one_sided
    d.summary = (
        f"{w.ranks_phrase(behind, capital=True)} still waited in {coll} of {w.pg_name(a.pg)} while "
        f"{w.ranks_phrase(ahead)} had moved on to the next collective ({'; '.join(parts)}): the data of "
        f"{coll} never reached {'it' if len(behind) == 1 else 'them'}."
    )
    d.rules_in.append(
        f"{op} completes on the ranks that only send once NCCL has handed their data to the transport, so "
        f"{w.ranks_phrase(ahead)} could leave {coll} before {w.ranks_phrase(behind)} received it: one "
        "sequence number apart, the two sides still issued the same collectives."
    )
    d.rules_out.append(
        f"Nothing says the ranks issued different collectives: one number apart at a {op} is what ranks "
        "issuing the same ones look like when the data did not arrive."
    )
    if lo <= 1:
        d.rules_in.append(
            f"{coll} is the group's first collective: the path between the ranks (P2P/NVLink, shared memory, "
            "the network) never carried data."
        )
    d.evidence = [evidence(row) for row in _skew_rows(ctx, a.pg, at)]
    d.remediation = steps("first_collective", ctx.versions)
    return d


def first_one_sided(ctx: Context, a: Aligned, d: Draft) -> Draft:
    """A rank silent at its group's first collective, a one-sided one, where nothing had completed:
    it may have been the side that only sends, done, with the data lost on a path never yet used.
    Named "never reached" otherwise; here the logs do not say which, so no rank is named."""
    if (
        d.kind != "silent"
        or not d.culprits
        or a.op not in vocabulary().one_sided_ops
        or not _first_collective(ctx, a)
    ):
        return d
    silent, coll = d.culprits, w.collective(a.op, a.seq)
    d.culprits, d.hosts = (), ()
    d.score = min(d.score, S.seq_skew_one_sided)
    d.summary = (
        f"{_reporters_text(ctx, a).capitalize()} waited in {coll} of {w.pg_name(a.pg)}, the group's first collective; "
        f"{w.ranks_phrase(silent)} did not report it: {'it' if len(silent) == 1 else 'they'} never reached it, or "
        f"sent {'its' if len(silent) == 1 else 'their'} side and the data never arrived. The logs do not say which."
    )
    d.rules_out.append(
        f"{a.op} completes on the side that only sends once its data is handed to the transport, and no "
        f"collective of {w.pg_name(a.pg)} had completed before: a path between the GPUs that never carried data "
        f"explains the silence of {w.ranks_phrase(silent)} as well as a late rank."
    )
    d.remediation = steps("first_collective", ctx.versions)
    return d
