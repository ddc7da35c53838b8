"""Scale: memory that follows writers, not lines, and the hot spots that were quadratic."""

from __future__ import annotations

import json
import random
import statistics
from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
from hypothesis import given
from hypothesis import strategies as st

import nccllog
from nccllog.correlate.timeline import MIN_OFFSET_S, estimate_offsets, sync_points
from nccllog.match.library import load_library
from nccllog.match.matcher import KEEP_FIRST, KEEP_LAST, match_lines
from nccllog.render.json import dumps_indented

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
    | st.datetimes()
)
_JSON = st.recursive(
    _SCALARS,
    lambda kids: (
        st.lists(kids, max_size=4)
        | st.tuples(kids, kids)
        | st.dictionaries(st.text(max_size=4) | st.integers() | st.booleans() | st.none(), kids, max_size=4)
    ),
    max_leaves=30,
)


@given(_JSON)
def test_indented_json_is_byte_identical_to_the_json_module(value: object) -> None:
    assert dumps_indented(value) == json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _reference_offsets(ev: pl.DataFrame) -> dict[str, float]:
    """The straightforward form of ``estimate_offsets`` (medians recomputed per host)."""
    pts = sync_points(ev)
    by_key: dict[str, dict[str, float]] = defaultdict(dict)
    for key, host, t in pts.iter_rows():
        by_key[key][host] = t
    shared = {k: v for k, v in by_key.items() if len(v) >= 2}
    count: dict[str, int] = defaultdict(int)
    for v in shared.values():
        for h in v:
            count[h] += 1
    if not count:
        return {}
    offsets = {sorted(count, key=lambda h: (-count[h], h))[0]: 0.0}
    added = True
    while added:
        added = False
        for host in sorted(count):
            if host in offsets:
                continue
            diffs = [
                statistics.median(v[h] + offsets[h] for h in v if h in offsets) - v[host]
                for v in shared.values()
                if host in v and any(h in offsets for h in v)
            ]
            if diffs:
                offsets[host] = statistics.median(diffs)
                added = True
    return {h: (round(o, 3) if abs(o) >= MIN_OFFSET_S else 0.0) for h, o in sorted(offsets.items())}


def test_clock_offsets_match_the_per_host_medians() -> None:
    rng = random.Random(7)
    for _ in range(20):
        hosts = [f"node-{i}" for i in range(rng.randrange(2, 12))]
        skew = {h: rng.uniform(-30, 30) for h in hosts}
        rows = []
        for seq in range(rng.randrange(1, 6)):
            at = datetime(2026, 3, 14, 9, 0) + timedelta(minutes=seq)
            for h in rng.sample(hosts, rng.randrange(1, len(hosts) + 1)):
                for _rank in range(rng.randrange(1, 3)):
                    t = at + timedelta(seconds=skew[h] + rng.uniform(0, 0.9))
                    rows.append((t, h, "collective_timeout", 100 + seq, "0", None, None))
        ev = pl.DataFrame(
            rows,
            schema={
                "time": pl.Datetime("us"),
                "host": pl.String,
                "signal": pl.String,
                "seq": pl.Int64,
                "pgk": pl.String,
                "comm_id": pl.String,
                "phase": pl.String,
            },
            orient="row",
        )
        assert estimate_offsets(ev) == _reference_offsets(ev)


def _watchdog(rank: int, n: int) -> str:
    return (
        f"[rank{rank}]:[E314 09:{n // 60 % 60:02d}:{n % 60:02d}.000000000 ProcessGroupNCCL.cpp:632] [Rank {rank}] "
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE, NumelIn=64, "
        "NumelOut=64, Timeout(ms)=600000) ran for 600123 milliseconds before timing out.\n"
    )


def test_repeated_lines_of_one_writer_are_kept_first_and_last_and_counted(tmp_path: Path) -> None:
    repeats = 3 * (KEEP_FIRST + KEEP_LAST)
    (tmp_path / "rank_0.log").write_text("".join(_watchdog(0, i) for i in range(repeats)))
    (tmp_path / "rank_1.log").write_text("[rank1]:step 40 | loss 2.0\n")
    incident = nccllog.analyze(tmp_path)
    ev = incident.events.filter(pl.col("pattern").is_not_null() & (pl.col("rank") == 0))
    kept = sorted(ev["line"].to_list())
    assert kept == [*range(1, KEEP_FIRST + 1), *range(repeats - KEEP_LAST + 1, repeats + 1)]
    c = incident.coverage
    thinned = dict(c.skipped_line_reasons)
    assert sum(thinned.values()) == repeats - KEEP_FIRST - KEEP_LAST
    assert c.lines == c.matched + c.unmatched + c.skipped_lines
    assert incident.verdict.culprit_ranks == (1,)
    # every kept row is in input order
    assert ev["line"].to_list() == kept


def test_lines_of_many_writers_are_all_kept(tmp_path: Path) -> None:
    ranks = KEEP_FIRST + KEEP_LAST + 10
    (tmp_path / "console.log").write_text("".join(_watchdog(r, r) for r in range(ranks)))
    incident = nccllog.analyze(tmp_path)
    ev = incident.events.filter(pl.col("pattern").is_not_null())
    assert ev["rank"].n_unique() == ranks
    assert not incident.coverage.skipped_line_reasons


def test_repeats_are_bounded_per_file_whether_files_come_together_or_interleaved() -> None:
    # Counts per file are dropped once a file's lines end only when each file's lines come
    # together; interleaved files keep every count: both give the same rows.
    repeats = 2 * (KEEP_FIRST + KEEP_LAST)
    lines = [(f"rank_{r}.log", n + 1, _watchdog(r, n).rstrip("\n")) for r in range(2) for n in range(repeats)]
    together = pl.DataFrame(lines, schema=["source", "line", "text"], orient="row")
    interleaved = together.sort("line", "source")
    library = load_library(())

    def kept(frame: pl.DataFrame) -> list[tuple[str, int]]:
        ev = match_lines(frame, library).events.filter(pl.col("pattern").is_not_null())
        return sorted(set(ev.select("source", "line").iter_rows()))

    want = [
        (f"rank_{r}.log", n)
        for r in range(2)
        for n in [*range(1, KEEP_FIRST + 1), *range(repeats - KEEP_LAST + 1, repeats + 1)]
    ]
    assert kept(together) == want
    assert kept(interleaved) == want
