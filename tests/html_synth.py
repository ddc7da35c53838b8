"""A straggler hang of any size with the detail the HTML charts draw: each waiting rank's elapsed time
in the stuck collective (its "ran for N ms"), watchdog fire times spread over seconds, a few ranks
that crashed earlier, and the watchdog's work status (last enqueued / last completed) in two
process groups. Built on synth.straggler; deterministic."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any

import polars as pl
from synth import straggler

from nccllog.model import CollectiveRow, Incident

SEQ = 4812
PP_SEQ = 130  # the second process group's sequence numbers


def _crashed(world: int, culprit: int) -> set[int]:
    """A few ranks that died before the hang (one per 500 ranks, none for small jobs)."""
    return {r for r in range(7, world, 500) if r != culprit} if world >= 500 else set()


def job(world: int, culprit: int | None = None) -> Incident:
    """The incident of a ``world``-rank job whose rank ``culprit`` never entered ALLREDUCE SEQ."""
    culprit = world // 2 + 1 if culprit is None else culprit
    base = straggler(world, culprit=culprit, seq=SEQ)
    crashed = _crashed(world, culprit)
    ev = base.events
    wd = pl.col("pattern") == "torch.watchdog_timeout"
    elapsed = (600_000 + (pl.col("rank") * 37) % 900).cast(pl.Int64)
    ev = ev.with_columns(elapsed_ms=pl.when(wd).then(elapsed).otherwise(None))
    ev = ev.filter(~(wd & pl.col("rank").is_in(sorted(crashed))))
    status: list[dict[str, Any]] = []
    for r in range(world):
        if r == culprit or r in crashed:
            continue
        row = ev.filter((pl.col("rank") == r) & wd).row(0, named=True)
        t: datetime = row["time"] + timedelta(milliseconds=1)
        # pipeline group: every fourth rank is one stage behind
        pp_enq = PP_SEQ - (1 if r % 4 == 3 else 0)
        for pg, enq, done, line in (("0", SEQ, SEQ - 1, 901), ("1", pp_enq, pp_enq - 1, 902)):
            text = (
                f"[rank{r}]:[E1023 14:12:30.000000000 ProcessGroupNCCL.cpp:2168] [PG ID {pg} PG GUID {pg}"
                f" Rank {r}] failure detected by watchdog at work sequence id: {enq} PG status: last "
                f"enqueued work: {enq}, last completed work: {done}"
            )
            status.append(
                {
                    **row,
                    "line": line,
                    "text": text,
                    "message": text.split("] ", 2)[-1],
                    "pattern": "torch.watchdog_failure_detected",
                    "signal": "work_status",
                    "pg": pg,
                    "time": t,
                    "seq": enq,
                    "elapsed_ms": None,
                    "last_enqueued": enq,
                    "last_completed": done,
                }
            )
    ev = ev.with_columns(last_enqueued=pl.lit(None, pl.Int64), last_completed=pl.lit(None, pl.Int64))
    if status:
        ev = pl.concat([ev, pl.DataFrame(status, schema=ev.schema)])
    ranks = []
    for info in base.ranks:
        if info.rank in crashed:
            t = datetime(2025, 10, 23, 14, 5, 0) + timedelta(seconds=info.rank % 60)
            info = dataclasses.replace(
                info, status="exited -6", last_time=t.isoformat(), first_error=None, timed_out_seq=None
            )
        ranks.append(info)
    collectives = tuple(_with_elapsed(c, ev, crashed) for c in base.collectives)
    timeline = tuple(e for e in base.timeline if not (e.rank in crashed and e.severity == "error"))
    return dataclasses.replace(
        base, events=ev, ranks=tuple(ranks), collectives=collectives, timeline=timeline
    )


def _with_elapsed(c: CollectiveRow, ev: pl.DataFrame, crashed: set[int]) -> CollectiveRow:
    if c.seq != SEQ:
        return c
    rows = ev.filter(pl.col("elapsed_ms").is_not_null()).select("rank", "elapsed_ms").iter_rows()
    reporters = tuple(r for r in c.reporters if r not in crashed)
    return dataclasses.replace(
        c,
        reporters=reporters,
        silent=tuple(sorted({*c.silent, *crashed})),
        elapsed_ms={int(r): int(e) for r, e in rows},
    )
