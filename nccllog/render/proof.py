"""The evidence that proves the verdict, as every report shows it (new shared view data).

The engine's evidence is a list of lines; a reader needs the line that proves the verdict first
(the culprit's own), one representative of the other ranks' alike lines with how many it stands
for, and the fields in which the culprit differs from the rest, side by side:
``rank 7: BROADCAST, 5,056 elements | ranks 0-6, 8, 9: ALLREDUCE, 2,106,881 elements``.
Nothing here parses log text: it reads the Incident's evidence, findings, collectives and ranks.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from nccllog.model import CollectiveRow, Evidence, Finding, Incident
from nccllog.render.view import SEVERITY_ORDER, rank_ranges

# Fields that differ from rank to rank on lines that say the same thing (who, when, how long).
_PER_RANK_FIELDS = frozenset(
    {
        "elapsed_ms",
        "elapsed_s",
        "own_rank",
        "own_local_rank",
        "comm_rank",
        "target_rank",
        "target_local_rank",
        "target_pid",
        "target_host",
        "pid",
        "cuda_dev",
        "bus_id",
        "failure_time",
        "comm",
    }
)
OWN_LINE_NOTE = "the culprit's own line"


@dataclass(frozen=True)
class ProofLine:
    """One evidence line, standing for ``count`` alike lines of ``ranks``."""

    evidence: Evidence
    count: int = 1
    ranks: tuple[int, ...] = ()
    culprit: bool = False


def _findings_at(incident: Incident) -> dict[tuple[str, int], Finding]:
    out: dict[tuple[str, int], Finding] = {}
    for f in incident.findings:
        out.setdefault((f.source, f.line), f)
    return out


def _own_line(incident: Incident, first: Finding | None) -> Evidence | None:
    """The culprit's own line when the engine's evidence has none: one of the same pattern as
    the first evidence line, else its most severe error line."""
    culprits = set(incident.verdict.culprit_ranks)
    mine = [f for f in incident.findings if f.rank in culprits]
    same = [f for f in mine if first is not None and f.pattern == first.pattern]
    severe = [f for f in mine if SEVERITY_ORDER.get(f.severity, 0) >= 2]
    severe.sort(key=lambda f: -SEVERITY_ORDER.get(f.severity, 0))
    if not (same or severe):
        return None
    pick = (same or severe)[0]
    return Evidence(pick.source, pick.line, pick.rank, pick.text, pick.host, pick.time, OWN_LINE_NOTE)


def _fold_key(e: Evidence, found: Finding | None) -> tuple[object, ...]:
    if found is None:
        return ("text", e.source, e.line)
    fields = tuple(sorted((k, str(v)) for k, v in found.fields.items() if k not in _PER_RANK_FIELDS))
    return ("fields", found.pattern, fields)


def proof(incident: Incident) -> list[ProofLine]:
    """The verdict's evidence: the culprits' lines first (their own line added when the engine
    gave none), then the others; lines of the same pattern and the same fields (rank, pid,
    elapsed time aside) folded into one, counting every such finding of the Incident."""
    v = incident.verdict
    culprits = set(v.culprit_ranks)
    at = _findings_at(incident)
    evidence = list(v.evidence)
    if culprits and not any(e.rank in culprits for e in evidence):
        own = _own_line(incident, at.get((evidence[0].source, evidence[0].line)) if evidence else None)
        if own is not None:
            evidence.insert(0, own)
    groups: dict[tuple[object, ...], list[Evidence]] = defaultdict(list)
    order: list[tuple[object, ...]] = []
    for e in evidence:
        key = (e.rank in culprits, *_fold_key(e, at.get((e.source, e.line))))
        if key not in groups:
            order.append(key)
        groups[key].append(e)
    # Every finding alike to a shown line counts, not only the few the engine quoted: 511 ranks
    # timing out at one collective read "×511 alike".
    alike: dict[tuple[object, ...], set[tuple[str, int, int | None]]] = defaultdict(set)
    for f in incident.findings:
        key = (f.rank in culprits, *_fold_key(Evidence(f.source, f.line, f.rank, f.text), f))
        if key in groups:
            alike[key].add((f.source, f.line, f.rank))
    for k, es in groups.items():
        alike[k].update((e.source, e.line, e.rank) for e in es)
    lines = [
        ProofLine(
            groups[k][0],
            len(alike[k]),
            tuple(sorted({r for _s, _l, r in alike[k] if r is not None})),
            culprit=bool(k[0]),
        )
        for k in order
    ]
    return sorted(lines, key=lambda p: not p.culprit)  # stable: the engine's order otherwise


def _who(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + rank_ranges(ranks, 8)


def _call(c: CollectiveRow, rank: int) -> str:
    op = c.ops.get(rank) or c.op or "?"
    numel = c.numel.get(rank, (None, None))[0]
    return op if numel is None else f"{op}, {numel:,} elements"


def contrast(incident: Incident) -> str | None:
    """The fields in which the culprits differ from the other ranks, side by side; None when the
    Incident holds no such difference."""
    culprits = set(incident.verdict.culprit_ranks)
    if not culprits:
        return None
    for c in incident.collectives:
        calls = {r: _call(c, r) for r in sorted(set(c.ops) | set(c.numel))}
        mine = {calls[r] for r in culprits if r in calls}
        others = Counter(call for r, call in calls.items() if r not in culprits)
        if len(mine) == 1 and others and not mine & set(others):
            crowd = others.most_common(1)[0][0]
            left = _who(sorted(r for r in culprits if r in calls))
            right = _who([r for r, call in calls.items() if call == crowd])
            return f"{left}: {next(iter(mine))} | {right}: {crowd} (#{c.seq})"
    status: dict[str, list[int]] = defaultdict(list)
    for r in incident.ranks:
        status[r.status or "-"].append(r.rank)
    mine_status = {r.status for r in incident.ranks if r.rank in culprits}
    rest = [(s, rs) for s, rs in status.items() if s not in mine_status and not culprits & set(rs)]
    if len(mine_status) != 1 or not rest:
        return None
    crowd_status, crowd_ranks = max(rest, key=lambda item: (len(item[1]), item[0]))
    mine_ranks = sorted(r.rank for r in incident.ranks if r.rank in culprits)
    return f"{_who(mine_ranks)}: {next(iter(mine_status))} | {_who(crowd_ranks)}: {crowd_status}"
