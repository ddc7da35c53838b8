"""Collective alignment: per process group and sequence number, who timed out with what, who was silent.

A rank "reports" a collective when its watchdog names it (the timeout line, or the follow-up
``failure detected by watchdog at work sequence id`` / ``Timeout at NCCL work`` line). The
expected members are the world for the default group; for other groups only the ranks that the
logs show in that group (their membership is rarely printed), so silence is only judged where
membership is known.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import polars as pl

from nccllog.correlate.frame import DEFAULT_PG, row_dicts
from nccllog.correlate.ranks_state import Timeout
from nccllog.correlate.rules.vocabulary import vocabulary
from nccllog.correlate.timeline import wait_began
from nccllog.model import CollectiveRow


def collect_timeouts(ev: pl.DataFrame) -> list[Timeout]:
    """Every rank's watchdog timeouts, one per (rank, group, seq), first line kept."""
    status = (
        ev.filter(
            (pl.col("signal") == "work_status") & pl.col("seq").is_not_null() & pl.col("pgk").is_not_null()
        )
        .select("rank", "seq", ws_pg=pl.col("pgk"))
        .unique(subset=["rank", "seq"], keep="first", maintain_order=True)
    )
    wd = ev.filter(pl.col("signal") == "collective_timeout").join(
        status, on=["rank", "seq"], how="left", nulls_equal=False
    )
    wd = wd.with_columns(pgk=pl.coalesce("pgk", "ws_pg", pl.lit(DEFAULT_PG))).drop("ws_pg")
    # Follow-up lines name the seq a rank timed out at even when its timeout line is missing
    # (cut logs, Ray dedup): count them, without op or sizes.
    follow = ev.filter((pl.col("signal") == "work_status") & pl.col("seq").is_not_null()).with_columns(
        pgk=pl.col("pgk").fill_null(DEFAULT_PG)
    )
    out: list[Timeout] = []
    seen: set[tuple[Any, str, Any]] = set()
    for frame, primary in ((wd, True), (follow, False)):
        for r in row_dicts(frame.sort("ctime", "_i", nulls_last=True)):
            rank = r["rank"]
            key = (rank, r["pgk"], r["seq"])
            if rank is not None and key in seen:
                continue
            if rank is not None:
                seen.add(key)
            if not primary and rank is None:
                continue
            out.append(
                Timeout(
                    rank=rank,
                    pg=r["pgk"],
                    seq=r["seq"],
                    op=r["op"] if primary else None,
                    numel_in=r["numel_in"] if primary else None,
                    numel_out=r["numel_out"] if primary else None,
                    shape=r["shape"] if primary else None,
                    timeout_ms=r["timeout_ms"] if primary else None,
                    elapsed_ms=r["elapsed_ms"] if primary else None,
                    repeat=r["repeat"] or 1,
                    row=r,
                    primary=primary,
                )
            )
    return out


def group_size_floor(timeouts: list[Timeout]) -> int:
    """The largest group size the timed-out all-gathers and reduce-scatters imply (an all-gather's
    output holds every member's input, a reduce-scatter's input every member's output), or 0. No
    group is bigger than the world, so this bounds the world size from below whichever group the
    line belongs to."""
    vocab = vocabulary()
    best = 0
    for t in timeouts:
        if not t.numel_in or not t.numel_out:
            continue
        if t.op in vocab.gather_ops:
            big, small = t.numel_out, t.numel_in
        elif t.op in vocab.scatter_ops:
            big, small = t.numel_in, t.numel_out
        else:
            continue
        if big % small == 0:
            best = max(best, big // small)
    return best


@dataclass(frozen=True)
class Aligned:
    """One (group, seq) with everything the hypotheses need."""

    pg: str
    seq: int | None
    reports: tuple[Timeout, ...]
    reporters: tuple[int, ...]
    expected: tuple[int, ...]
    silent: tuple[int, ...]
    hidden: int  # reporters Ray folded into a "[repeated Nx]" line: how many, identity unknown
    membership_known: bool
    by_rank: dict[int, Timeout] = field(default_factory=dict)

    @property
    def size(self) -> int:
        """How many processes reported it (named or folded)."""
        return len(self.reporters) + self.hidden

    @property
    def op(self) -> str | None:
        """The op most reporters name."""
        ops = Counter(t.op for t in self.reports if t.op)
        return ops.most_common(1)[0][0] if ops else None

    @property
    def timeout_ms(self) -> int | None:
        """The timeout most reporters name."""
        ms = Counter(t.timeout_ms for t in self.reports if t.timeout_ms)
        return ms.most_common(1)[0][0] if ms else None

    @property
    def first_time(self) -> datetime | None:
        """When the first reporter's watchdog fired."""
        ts = [t.time for t in self.reports if t.time is not None]
        return min(ts) if ts else None

    @property
    def wait_start(self) -> datetime | None:
        """When the first reporter started waiting (fire time minus elapsed)."""
        starts = [
            s for t in self.reports if t.time and t.elapsed_ms and (s := wait_began(t.time, t.elapsed_ms))
        ]
        return min(starts) if starts else None

    def row(self) -> CollectiveRow:
        """The contract's CollectiveRow."""
        numel: dict[int, tuple[int | None, int | None]] = {
            r: (t.numel_in, t.numel_out) for r, t in sorted(self.by_rank.items()) if t.numel_in is not None
        }
        ops = {r: t.op for r, t in sorted(self.by_rank.items()) if t.op}
        elapsed = {r: t.elapsed_ms for r, t in sorted(self.by_rank.items()) if t.elapsed_ms is not None}
        notes = []
        if self.hidden:
            notes.append(f"{self.hidden} more report(s) folded by Ray log deduplication")
        if not self.membership_known:
            notes.append("group membership not in the logs; silent ranks not judged")
        return CollectiveRow(
            pg=self.pg,
            seq=self.seq if self.seq is not None else -1,
            op=self.op,
            reporters=self.reporters,
            expected=self.expected,
            silent=self.silent,
            numel=numel,
            ops=ops,
            timeout_ms=self.timeout_ms,
            elapsed_ms=elapsed,
            note="; ".join(notes),
        )


def align(timeouts: list[Timeout], world: tuple[int, ...], members: dict[str, set[int]]) -> list[Aligned]:
    """Group the timeouts by (group, seq), biggest and earliest first."""
    groups: dict[tuple[str, int | None], list[Timeout]] = {}
    for t in timeouts:
        groups.setdefault((t.pg, t.seq), []).append(t)
    out = []
    for (pg, seq), reps in groups.items():
        by_rank: dict[int, Timeout] = {}
        unnamed: list[Timeout] = []
        for t in reps:
            rank = t.rank
            if rank is None and pg == DEFAULT_PG and t.row.get("pg_rank") is not None:
                rank = int(t.row["pg_rank"])  # in the default group the group rank is the global rank
            if rank is None:
                unnamed.append(t)
            elif rank not in by_rank or (by_rank[rank].op is None and t.op is not None):
                by_rank[rank] = t if t.rank == rank else replace(t, rank=rank)
        reporters = tuple(sorted(by_rank))
        hidden = max(
            sum(t.repeat - 1 for t in reps if t.primary),
            sum(t.repeat - 1 for t in reps if not t.primary),
        )
        # Unattributed timeout lines (a rethrown what(), a line without prefix) may repeat a named
        # rank or be another one: they count only where nobody is named.
        if not by_rank:
            hidden += sum(1 for t in unnamed if t.primary)
        if pg == DEFAULT_PG and world:
            expected, known = world, True
        else:
            expected, known = tuple(sorted(members.get(pg, set()) | set(reporters))), False
        silent = tuple(r for r in expected if r not in by_rank) if known else ()
        out.append(
            Aligned(
                pg=pg,
                seq=seq,
                reports=tuple(reps),
                reporters=reporters,
                expected=expected,
                silent=silent,
                hidden=hidden,
                membership_known=known,
                by_rank=by_rank,
            )
        )
    out.sort(key=lambda a: (-a.size, a.first_time or datetime.max, a.pg, a.seq if a.seq is not None else -1))
    return out


def group_members(ev: pl.DataFrame) -> dict[str, set[int]]:
    """Ranks the logs show in each process group (lines carrying that group's prefix)."""
    rows = (
        ev.filter(pl.col("pgk").is_not_null() & pl.col("rank").is_not_null())
        .select("pgk", "rank")
        .unique(maintain_order=True)
    )
    out: dict[str, set[int]] = {}
    for pg, rank in rows.iter_rows():
        out.setdefault(pg, set()).add(rank)
    return out
