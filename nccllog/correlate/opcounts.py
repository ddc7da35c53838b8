"""NCCL's own call trace (``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL``) aligned across ranks.

Every ``<Op>: opCount N … comm 0x… [nranks=K]`` line is one call a process made on one of its
communicators (signal ``progress`` with an ``op_count``). The comm pointer is only valid inside
its process; the init line with the same (host, pid, pointer) gives the communicator's ``commId``,
which is the same on every rank. Lines are therefore compared per communicator key: (nranks,
commId) when every line of that size has one, else nranks alone, and then only when that cannot
mix communicators (each rank writes through one pointer and there are no more ranks than nranks).

Two readings, one owner:

- **mismatch**: at the same opCount the ranks made different calls (op, element count, datatype,
  built-in reduction op, root): the minority is the culprit, and both sides' lines are the proof;
- **straggler** (no watchdog line): the calls agree, but a minority's last opCount is behind the
  others': they never issued the collective the others waited in.

Only the last lines of each writer survive the reader's sampling (``ingest.reader.SAMPLED_KEEP``),
so a rank's oldest kept opCount may hold only the tail of a group of calls: calls at one opCount
are compared on their common tail. Communicators with point-to-point calls and more than two ranks
are left alone: a Send/Recv moves the counter of the two ranks involved only.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from nccllog.correlate import outliers
from nccllog.correlate import wording as w
from nccllog.correlate.rules.base import Context, Draft, evidence
from nccllog.correlate.rules.remedies import steps

P2P_OPS = frozenset({"Send", "Recv", "SendRecv"})
ROOTED_OPS = frozenset({"Broadcast", "Reduce"})
# ncclDataType_t and the built-in ncclRedOp_t values (nccl.h); a higher op is a process's own
# PreMulSum handle, which differs between ranks by construction and is not compared.
DATATYPES = {
    0: "int8",
    1: "uint8",
    2: "int32",
    3: "uint32",
    4: "int64",
    5: "uint64",
    6: "float16",
    7: "float32",
    8: "float64",
    9: "bfloat16",
}
REDOPS = {0: "sum", 1: "prod", 2: "max", 3: "min", 4: "avg"}
MISMATCH_SCORE = 0.8  # both sides' calls are in the logs: proof, not inference
TIE_SCORE = 0.5
STRAGGLER_SCORE = 0.6


@dataclass(frozen=True, order=True)
class CommKey:
    """A communicator as every rank can name it."""

    nranks: int | None
    comm_id: str | None

    def label(self) -> str:
        size = f"{self.nranks}-rank" if self.nranks is not None else "unsized"
        return f"{size} communicator" + (f" (commId {self.comm_id})" if self.comm_id else "")


@dataclass(frozen=True)
class Call:
    """What one COLL line asked NCCL to do; equal calls are the same collective on every rank."""

    op: str
    count: int | None = None
    datatype: int | None = None
    redop: int | None = None
    root: int | None = None

    @classmethod
    def of(cls, row: dict[str, Any]) -> Call:
        op = row.get("op") or "?"
        if op in P2P_OPS:
            # A Send on one rank is a Recv on its peer, with the peer as root and sizes per pair.
            return cls(op="Send/Recv")
        redop = row.get("redop")
        return cls(
            op=op,
            count=row.get("count"),
            datatype=row.get("datatype"),
            redop=redop if redop is None or redop in REDOPS else -1,
            root=row.get("root"),
        )

    def text(self, other: Call) -> str:
        """``Broadcast (count 5056, root 0)``: the count, and the fields that differ from ``other``."""
        if self.op == "Send/Recv":
            return self.op
        parts = [f"count {self.count}"] if self.count is not None else []
        if self.datatype != other.datatype and self.datatype is not None:
            parts.append(
                f"datatype {self.datatype}"
                + (f" ({DATATYPES[self.datatype]})" if self.datatype in DATATYPES else "")
            )
        if self.redop != other.redop and self.redop is not None:
            parts.append(f"reduction {REDOPS.get(self.redop, 'custom')}")
        if self.root is not None and (
            self.op in ROOTED_OPS or (self.root != other.root and self.op == other.op)
        ):
            parts.append(f"root {self.root}")
        return f"{self.op} ({', '.join(parts)})" if parts else self.op


def coll_alignment(ctx: Context) -> list[Draft]:
    """Per communicator: the first opCount at which the ranks' calls differ, else who stopped early."""
    lines = call_lines(ctx.ev)
    if not lines.height:
        return []
    drafts: list[Draft] = []
    for key, rows in _by_key(lines):
        if not _comparable(key, rows):
            continue
        mismatch = _mismatch(ctx, key, rows)
        if mismatch is not None:
            drafts.append(mismatch)
        elif ctx.main is None:
            drafts.extend(_straggler(ctx, key, rows))
    return drafts


def call_lines(ev: pl.DataFrame) -> pl.DataFrame:
    """The COLL lines of known ranks, in file order, with ``_cid``: the commId of their communicator
    (from the init line with the same host, pid and comm pointer) where every line of that size has one."""
    rows = ev.filter(
        (pl.col("signal") == "progress") & pl.col("op_count").is_not_null() & pl.col("rank").is_not_null()
    )
    inits = (
        ev.filter(
            (pl.col("signal") == "init") & pl.col("comm").is_not_null() & pl.col("comm_id").is_not_null()
        )
        .select("host", "pid", "comm", _cid=pl.col("comm_id"))
        .unique(subset=["host", "pid", "comm"], keep="first", maintain_order=True)
    )
    rows = rows.join(inits, on=["host", "pid", "comm"], how="left").sort("_i")
    every = pl.col("_cid").is_not_null().all().over("nranks")
    return rows.with_columns(_cid=pl.when(every).then(pl.col("_cid")))


def _by_key(lines: pl.DataFrame) -> list[tuple[CommKey, list[dict[str, Any]]]]:
    groups: dict[CommKey, list[dict[str, Any]]] = defaultdict(list)
    for r in lines.to_dicts():
        groups[CommKey(r["nranks"], r["_cid"])].append(r)
    return sorted(groups.items(), key=lambda kv: (kv[0].nranks or 0, kv[0].comm_id or ""))


def _comparable(key: CommKey, rows: list[dict[str, Any]]) -> bool:
    """Whether the opCounts of these lines count the same sequence on every rank."""
    if key.nranks is not None and key.nranks > 2 and any(r["op"] in P2P_OPS for r in rows):
        return False
    if key.comm_id is not None:
        return True
    writers: dict[int, set[tuple[Any, ...]]] = defaultdict(set)
    for r in rows:
        writers[r["rank"]].add((r["host"], r["pid"], r["comm"]))
    one_each = all(len(ws) == 1 for ws in writers.values())
    return one_each and (key.nranks is None or len(writers) <= key.nranks)


def _mismatch(ctx: Context, key: CommKey, rows: list[dict[str, Any]]) -> Draft | None:
    at: dict[int, dict[int, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        at[r["op_count"]][r["rank"]].append(r)
    for n in sorted(at):
        per_rank = at[n]
        if len(per_rank) < 2:
            continue
        tail = min(len(rs) for rs in per_rank.values())
        sigs: dict[tuple[Call, ...], list[int]] = defaultdict(list)
        for rank, rs in per_rank.items():
            sigs[tuple(Call.of(r) for r in rs[-tail:])].append(rank)
        split = outliers.odd_one_out(sigs)
        if split is not None:
            return _mismatch_draft(ctx, key, n, split, {r: rs[-tail:] for r, rs in per_rank.items()})
    return None


def _mismatch_draft(
    ctx: Context,
    key: CommKey,
    n: int,
    split: outliers.Split[tuple[Call, ...]],
    lines: dict[int, list[dict[str, Any]]],
) -> Draft:
    (maj_sig, maj), rest = split.groups[0], split.groups[1:]
    where = f"opCount 0x{n:x} of the {key.label()}"
    clauses = []
    for sig, ranks in rest:
        i = _first_difference(sig, maj_sig)
        clauses.append(f"{w.ranks_phrase(ranks)} called {sig[i].text(maj_sig[i])}")
    i = _first_difference(rest[0][0], maj_sig)
    majority = f"{w.ranks_phrase(maj)} called {maj_sig[i].text(rest[0][0][i])}"
    minority = "; ".join(clauses)
    d = Draft(category="collective_mismatch", culprits=(), kind="coll_mismatch")
    d.rules_in.append(
        f"NCCL's call trace (NCCL_DEBUG_SUBSYS=COLL) at {where}: {minority}, while {majority}. "
        "Each rank logged its own call, so the calls themselves differ."
    )
    if not split.tie:
        d.culprits = tuple(split.odd)
        d.score = MISMATCH_SCORE
        theirs = "its" if len(split.odd) == 1 else "their"
        d.summary = (
            f"{minority[:1].upper()}{minority[1:]} at {where} where {majority}: {w.ranks_phrase(split.odd)} "
            f"went off the others' sequence of collectives, and {theirs} call is the odd one."
        )
    else:
        d.score = TIE_SCORE
        d.summary = (
            f"At {where} {minority}, while {majority}: the ranks issued different collectives; "
            "neither side is a majority, so the logs do not say which side diverged."
        )
    d.rules_out.append(
        "A plain straggler would make the same call late; here the calls at the same position of the "
        "communicator's sequence differ, and waiting longer would not have matched them."
    )
    odd_rows = [lines[r][_first_difference(sig, maj_sig)] for sig, ranks in rest for r in ranks[:2]]
    d.evidence = [evidence(r, "the odd call") for r in odd_rows[:4]]
    d.evidence.append(evidence(lines[maj[0]][i], f"the call of {w.ranks_phrase(maj)}"))
    d.remediation = steps("mismatch", ctx.versions)
    return d


def _first_difference(a: Sequence[Call], b: Sequence[Call]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y), 0)


def _straggler(ctx: Context, key: CommKey, rows: list[dict[str, Any]]) -> list[Draft]:
    """No watchdog line: a minority whose last opCount on this communicator is behind the others'."""
    last: dict[int, dict[str, Any]] = {}
    for r in rows:
        if r["rank"] not in last or r["op_count"] >= last[r["rank"]]["op_count"]:
            last[r["rank"]] = r
    vals = {rank: r["op_count"] for rank, r in last.items()}
    behind = list(outliers.last_behind(vals))
    if not behind:
        return []
    top = max(vals.values())
    ahead = sorted(r for r in vals if r not in behind)
    d = Draft(category="straggler_hang", culprits=tuple(behind), kind="progress")
    d.score = STRAGGLER_SCORE
    counts = ", ".join(f"rank {r}: {vals[r]}" for r in behind[:6])
    d.summary = (
        f"{w.ranks_phrase(behind, capital=True)} fell behind: {'its' if len(behind) == 1 else 'their'} last NCCL "
        f"collective was #{min(vals[r] for r in behind)} while {w.others_phrase(ahead, ctx.world_size)} had already "
        f"issued #{top} and waited; no watchdog fired before the job ended."
    )
    d.rules_in.append(
        f"Last NCCL opCount on the {key.label()}: {counts}, {top} on {w.ranks_phrase(ahead)}: "
        f"{w.ranks_phrase(behind)} had not issued the collective the others were in."
    )
    d.rules_out.append(
        "No rank logged an error, OOM or crash: nothing but slowness explains the gap. "
        "Without a watchdog line the length of the wait is unknown."
    )
    d.evidence = [evidence(last[r]) for r in [*behind, *ahead][:6]]
    d.collect.extend(steps("collect_hang", ctx.versions))
    return [d]
