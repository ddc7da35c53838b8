"""Saved ``ncclras`` output: ranks whose operation count differs from their communicator's, and
processes NCCL's RAS network found dead or unresponsive.

Under ``MISMATCH`` the client prints the counts of each group of ranks, the most common first
(``7 ranks have launched up to operation 1818``), and each rank of a small group (``Rank 5 has
launched up to operation 1817 -- GPU 1 managed by process 48231 on node gpu-node-08``;
``ingest/ras.py`` writes a group member's line in that form too). The process id and node map that
line to a global rank through the NCCL init lines (``target_rank``, filled by
``attribution/``). A rank behind the others is the one they wait for; a rank ahead launched an
extra operation. Under ``DEAD`` and ``INCOMPLETE`` (and monitor mode's ``PEER_DEAD`` events) the
processes RAS lost are named the same way: a rank that is gone or does not answer is the one the
others wait for.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from nccllog.correlate import wording as w
from nccllog.correlate.rules.base import Context, Draft, evidence

MAJORITY = "nccl.ras_client_ranks_ops"
OUTLIER = "nccl.ras_client_rank_ops"
DEAD = "nccl.ras_process_dead"
INCOMPLETE = "nccl.ras_process_incomplete"
SCORE = 0.7  # counts of launched operations, not of completed ones: medium
# A dead process explains a hang, not what killed it: below the fail-stop causes (0.8+) that would.
DEAD_SCORE = 0.6
UNRESPONSIVE_SCORE = 0.45  # may still answer at the next query


def rule(ctx: Context) -> list[Draft]:
    """Hypotheses from ncclras: ranks behind (straggler) or ahead (mismatch), ranks dead or silent."""
    return _counts(ctx) + _lost(ctx)


def _counts(ctx: Context) -> list[Draft]:
    rows = ctx.ev.filter(pl.col("pattern").is_in([MAJORITY, OUTLIER])).sort("_i").to_dicts()
    behind: dict[int, list[dict[str, Any]]] = {}
    ahead: dict[int, list[dict[str, Any]]] = {}
    majority: dict[str, Any] | None = None
    prev: dict[str, Any] | None = None
    for row in rows:
        # One block per communicator and collective: consecutive lines of one file, whose first
        # count is the most common (the client sorts them).
        if prev is None or row["source"] != prev["source"] or row["line"] != prev["line"] + 1:
            majority = None
        prev = row
        if row["pattern"] == MAJORITY:
            majority = majority or row
            continue
        rank = row.get("target_rank")
        if majority is None or rank is None:
            continue
        mine, theirs = int(row.get("ras_op_count") or 0), int(majority.get("ras_op_count") or 0)
        if mine != theirs:
            (behind if mine < theirs else ahead).setdefault(int(rank), []).extend([majority, row])
    drafts = []
    for category, found, what in (
        ("straggler_hang", behind, "launched fewer collective operations than the rest of its communicator"),
        (
            "collective_mismatch",
            ahead,
            "launched more collective operations than the rest of its communicator",
        ),
    ):
        if not found:
            continue
        culprits = tuple(sorted(found))
        d = Draft(category=category, culprits=culprits, kind="ras", score=SCORE)
        d.summary = f"{w.ranks_phrase(culprits, capital=True)} {what} (ncclras)."
        d.rules_in.append(
            "ncclras MISMATCH: "
            + "; ".join(str(r["message"]).strip() for rs in found.values() for r in rs[-1:])
        )
        d.evidence = [evidence(r) for rs in found.values() for r in rs][:4]
        drafts.append(d)
    return drafts


def _lost(ctx: Context) -> list[Draft]:
    """A rank whose process RAS declared dead, else one that did not answer (straggler_hang)."""
    rows = ctx.ev.filter(pl.col("pattern").is_in([DEAD, INCOMPLETE]) & pl.col("target_rank").is_not_null())
    drafts = []
    seen: set[int] = set()
    for pattern, score, what in (
        (DEAD, DEAD_SCORE, "declared dead by NCCL's RAS network (unreachable)"),
        (INCOMPLETE, UNRESPONSIVE_SCORE, "did not answer NCCL's RAS network (unresponsive)"),
    ):
        found = rows.filter(pl.col("pattern") == pattern).sort("_i").to_dicts()
        by_rank: dict[int, dict[str, Any]] = {}
        for r in found:
            if int(r["target_rank"]) not in seen:
                by_rank.setdefault(int(r["target_rank"]), r)
        if not by_rank:
            continue
        seen.update(by_rank)
        culprits = tuple(sorted(by_rank))
        where = "; ".join(
            f"rank {k}: process {r.get('target_pid')} on {r.get('target_host')}"
            for k, r in sorted(by_rank.items())
        )
        d = Draft(category="straggler_hang", culprits=culprits, kind="ras_lost", score=score)
        d.summary = (
            f"{w.ranks_phrase(culprits, capital=True)} {'was' if len(culprits) == 1 else 'were'} {what}: "
            "the others wait for a rank that is gone (ncclras)."
        )
        d.rules_in.append(f"ncclras: {where}.")
        d.rules_out.append(
            "RAS says the process stopped answering, not why: a crash, a kill or a hang on that node."
        )
        d.evidence = [evidence(r) for r in by_rank.values()][:4]
        d.remediation.append(
            "Read the named rank's last lines and its node's kernel log (Xid, OOM killer) and the launcher's "
            "exit report around the time RAS lost it."
        )
        drafts.append(d)
    return drafts
