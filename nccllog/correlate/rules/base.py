"""What every rule shares: the draft a rule proposes, the context it reads, and evidence records."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from nccllog.correlate import wording as w
from nccllog.correlate.collectives import Aligned
from nccllog.correlate.network import AddressBook
from nccllog.correlate.ranks_state import HANG_SIGNALS, Failure, RankState
from nccllog.correlate.rules.remedies import Version, steps
from nccllog.correlate.rules.scores import S
from nccllog.match.library import Library
from nccllog.model import CollectiveRef, Coverage, Evidence
from nccllog.vocab import Severity


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
    collective: CollectiveRef | None = None  # the collective the ranks hung in, where known

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
    unaligned: tuple[str, ...] = ()  # hosts whose clocks no sync point tied to the others'
    versions: dict[str, Version | None] = field(default_factory=dict)  # torch/NCCL shown (remedies)

    @property
    def main(self) -> Aligned | None:
        """The collective most ranks timed out on."""
        return self.aligned[0] if self.aligned else None


def collect_next_time(ctx: Context) -> list[str]:
    """What to capture next time when the logs name no culprit (``remedy.collect_*``)."""
    return steps("collect_hang", ctx.versions) + steps("collect_logs", ctx.versions)


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


def _reporters_text(ctx: Context, a: Aligned) -> str:
    named = w.others_phrase(a.reporters, ctx.world_size)
    if a.hidden:
        return f"{named} (and {a.hidden} more Ray folded into one line)"
    return named


def _first_collective(ctx: Context, a: Aligned) -> bool:
    """Whether ``a`` is its group's first collective, with no collective of the group completed
    before it by any reporter: the path between the ranks had never carried data."""
    if a.seq is None or a.seq > 1:
        return False
    done = (st.last_completed.get(a.pg) for r in a.reporters if (st := ctx.states.get(r)))
    return all(c is None or c < 1 for c in done)


def _timeout_rows(a: Aligned, n: int = 3) -> list[dict[str, Any]]:
    return _first((t.row for t in a.reports if t.primary), n) or _first((t.row for t in a.reports), n)


def _only_attributed_lines(ctx: Context) -> bool:
    """One input whose every recognised line has its writer's rank, hang lines aside: nothing in
    it could be a missing rank's unprefixed output. (A rank-less line of the hang itself, torch's
    "Some NCCL operations have failed" after a timeout, is the reporters' or a waiter's: it would not
    show a missing rank elsewhere either.)"""
    unranked = ctx.ev.filter(pl.col("rank").is_null() & ~pl.col("signal").is_in(list(HANG_SIGNALS)))
    return ctx.ev["source"].n_unique() <= 1 and unranked.height == 0


def _active_after(st: RankState, t: datetime | None) -> bool:
    return bool(
        t is not None
        and st.last_active is not None
        and st.last_active > t + timedelta(seconds=S.silent_active_after_s)
    )


def failure_lines(ev: pl.DataFrame) -> pl.DataFrame:
    """Error-level lines with a weight as a cause: what a rank's own failure looks like."""
    return ev.filter(pl.col("severity").is_in([Severity.ERROR, Severity.CRITICAL]) & (pl.col("_fw") > 0))


LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0"})


def _hosts_seen(ctx: Context) -> set[str]:
    """Every machine the logs show: line hosts, hosts from file names, hosts of known ranks."""
    seen = set(ctx.book.host_ranks) | set(ctx.book.rank_host.values())
    for col in ("host", "_file_host", "_ip"):
        if col in ctx.ev.columns:
            seen |= set(ctx.ev[col].drop_nulls().unique().to_list())
    # a launcher's "host : localhost" is the machine it runs on, not one more machine
    named = {h for h in seen if h not in LOOPBACK_NAMES}
    return named if named else seen


def writer_hosts(ctx: Context) -> set[str]:
    """Hosts whose own lines are in the logs (not hosts only named as the other end)."""
    return set(ctx.ev["host"].drop_nulls().unique().to_list()) if "host" in ctx.ev.columns else set()


def _host(ctx: Context, rank: int) -> str | None:
    st = ctx.states.get(rank)
    return st.host if st else None
