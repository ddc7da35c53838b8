"""Saved ``ncclras`` output: a rank whose collective operation count differs from its communicator's.

Under ``MISMATCH`` the client prints the counts most ranks share (``7 ranks have launched up to
operation 1818``) and then each rank that stands alone (``Rank 5 has launched up to operation 1817
-- GPU 1 managed by process 48231 on node gpu-node-08``). The process id and node map that line to
a global rank through the NCCL init lines (``target_rank``, filled by ``attribution/``). A
rank behind the others is the one they wait for; a rank ahead launched an extra operation.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from nccllog.correlate import wording as w
from nccllog.correlate.hypotheses import Context, Draft, evidence

MAJORITY = "nccl.ras_client_ranks_ops"
OUTLIER = "nccl.ras_client_rank_ops"
SCORE = 0.7  # counts of launched operations, not of completed ones: medium


def rule(ctx: Context) -> list[Draft]:
    """A hypothesis per rank the RAS report shows behind (straggler) or ahead (mismatch)."""
    rows = ctx.ev.filter(pl.col("pattern").is_in([MAJORITY, OUTLIER])).sort("_i").to_dicts()
    behind: dict[int, list[dict[str, Any]]] = {}
    ahead: dict[int, list[dict[str, Any]]] = {}
    majority: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row["pattern"] == MAJORITY:
            majority[str(row["source"])] = row
            continue
        ref = majority.get(str(row["source"]))
        rank = row.get("target_rank")
        if ref is None or rank is None:
            continue
        mine, theirs = int(row.get("ras_op_count") or 0), int(ref.get("ras_op_count") or 0)
        if mine != theirs:
            (behind if mine < theirs else ahead).setdefault(int(rank), []).extend([ref, row])
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
