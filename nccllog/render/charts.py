"""Chart data for the HTML report: plain rows of bars and dots that the template draws as inline SVG.

Three charts an on-call engineer reads first, each bounded whatever the job's size:

- **last heard**: per rank, its last line and the silence up to the failure;
- **stuck collective**: per rank, the wait in the collective the watchdogs fired on, from its start
  (fire time minus the "ran for N ms" the line gives) to the watchdog firing, with the ranks that
  never entered it;
- **enqueued/completed skew**: per process group, each rank's last enqueued and last completed
  sequence number.

Ranks in the same state whose bars would fall on the same pixels are one band ("4095 ranks");
culprits always get their own row; past ``MAX_ROWS`` the rest is one "… N more ranks" line. So the
page stays the same size at 8 or 4,096 ranks. Also the few lines kept around each evidence line.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import polars as pl

from nccllog.correlate.frame import pg_key
from nccllog.model import CollectiveRow, Evidence, Incident
from nccllog.render import view
from nccllog.text_safety import clean

WIDTH = 1100
LABEL_W = 250  # rank label and its sub-label
NOTE_W = 110  # the value at the right end of a row
ROW_H = 22
TOP = 30  # room for the markers' labels
MAX_ROWS = 14
MAX_GROUPS = 6  # process groups in the skew chart
MAX_TICKS = 12
NO_TIME = "no timed line"


@dataclass(frozen=True)
class Seg:
    """A bar from ``x`` to ``x2`` (pixels); ``cls`` picks its colour in the stylesheet."""

    x: float
    x2: float
    cls: str
    title: str


@dataclass(frozen=True)
class Dot:
    x: float
    cls: str
    title: str


@dataclass(frozen=True)
class Row:
    """One rank, or a band of ranks in the same state."""

    y: float
    label: str
    sub: str
    title: str
    culprit: bool
    segs: tuple[Seg, ...]
    dots: tuple[Dot, ...]
    note: str


@dataclass(frozen=True)
class Marker:
    """A vertical line across the rows (the failure, the first watchdog)."""

    x: float
    label: str
    cls: str


@dataclass(frozen=True)
class Chart:
    id: str
    title: str
    caption: str
    rows: tuple[Row, ...]
    ticks: tuple[tuple[float, str], ...]
    markers: tuple[Marker, ...]
    more: str  # the "… N more ranks" line, or ""
    height: int
    axis_y: int
    x0: int = LABEL_W + 10
    x1: int = WIDTH - NOTE_W
    width: int = WIDTH
    label_w: int = LABEL_W


@dataclass(frozen=True)
class _Item:
    """One rank's state before banding."""

    rank: int
    state: Hashable  # ranks band together only with the same state
    x: float  # where its bar starts and ends, in pixels
    x2: float
    culprit: bool


# a row before layout: its band, sub-label, bars, dots, right-hand note, tooltip
_RowSpec = tuple[list[_Item], str, tuple[Seg, ...], tuple[Dot, ...], str, str]


def _bands(items: Sequence[_Item], cap: int) -> tuple[list[list[_Item]], list[_Item]]:
    """Band the items: culprits alone, the rest by state and position, the buckets widening until
    at most ``cap`` bands remain; past that the smallest bands are returned as left over."""
    if len(items) <= cap:  # a small job: one row per rank
        return sorted(([i] for i in items), key=lambda g: (g[0].x, g[0].rank)), []
    alone = [[i] for i in items if i.culprit]
    rest = [i for i in items if not i.culprit]
    room = max(cap - len(alone), 1)
    width = 2.0
    while True:
        groups: dict[tuple[object, ...], list[_Item]] = defaultdict(list)
        for i in rest:
            groups[(i.state, int(i.x // width), int(i.x2 // width))].append(i)
        if len(groups) <= room or width > WIDTH:
            break
        width *= 2
    bands = sorted(groups.values(), key=lambda g: (-len(g), g[0].rank))
    kept, left = bands[:room], [i for g in bands[room:] for i in g]
    if left:  # one row goes to the "… more" line
        kept, left = bands[: room - 1], [i for g in bands[room - 1 :] for i in g]
    out = alone + kept
    out.sort(key=lambda g: (min(i.x for i in g), min(i.rank for i in g)))
    return out, left


def _label(ranks: Sequence[int]) -> tuple[str, str]:
    """("rank 3", "") or ("4095 ranks", "0-2, 4-…")."""
    if len(ranks) == 1:
        return f"rank {ranks[0]}", ""
    return f"{len(ranks)} ranks", view.rank_ranges(ranks, 2)


def fit_sub(sub: str, label: str, label_w: int = LABEL_W) -> str:
    """``sub`` cut to the room the label leaves in the label column (about 7 px a label character
    at 12 px, 5.8 px a sub-label character at 10 px)."""
    room = int((label_w - 20 - 7 * len(label)) / 5.8)
    return sub if len(sub) <= room else sub[: max(room - 1, 0)].rstrip(" ,") + "…"


def _more(left: Sequence[_Item], what: str) -> str:
    if not left:
        return ""
    states = len({i.state for i in left})
    return f"… {len(left)} more ranks ({view.plural(states, 'other state')}); {what}"


class _Axis:
    """Time to pixels between ``lo`` and ``hi`` (padded), with ticks relative to ``zero``."""

    def __init__(self, lo: datetime, hi: datetime, zero: datetime) -> None:
        span = max((hi - lo).total_seconds(), 0.001)
        self.lo, self.span, self.zero = lo - timedelta(seconds=span * 0.03), span * 1.06, zero

    def x(self, t: datetime) -> float:
        x0, x1 = LABEL_W + 10, WIDTH - NOTE_W
        return round(x0 + (t - self.lo).total_seconds() / self.span * (x1 - x0), 1)

    def ticks(self) -> tuple[tuple[float, str], ...]:
        step = _step(self.span, MAX_TICKS // 2)
        start = (self.lo - self.zero).total_seconds()
        n = math.ceil(start / step)
        out: list[tuple[float, str]] = []
        while (k := n * step) <= start + self.span and len(out) < MAX_TICKS * 2:
            out.append((self.x(self.zero + timedelta(seconds=k)), _offset(k, step)))
            n += 1
        return tuple(out)


def _step(span: float, target: int) -> float:
    for s in (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600):
        if span / s <= target:
            return s
    return 3600.0 * max(1, int(span / 3600 / target) + 1)


def _offset(seconds: float, step: float = 1.0) -> str:
    """``+12.0s``, ``-7m23s``, or ``+40ms`` where a tenth of a second is too coarse."""
    if abs(seconds) < 1 and step < 0.1:
        return f"{seconds * 1000:+.0f}ms"
    return view.offset_label(seconds)


def _dur(seconds: float) -> str:
    return _offset(seconds, 0.0 if seconds < 1 else 1.0).lstrip("+-")


def _chart(
    id_: str,
    title: str,
    caption: str,
    rows: Sequence[_RowSpec],
    ticks: tuple[tuple[float, str], ...],
    markers: tuple[Marker, ...],
    more: str,
) -> Chart:
    out = []
    for k, (band, sub_state, segs, dots, note, title_) in enumerate(rows):
        ranks = sorted(i.rank for i in band)
        label, sub = _label(ranks)
        out.append(
            Row(
                y=TOP + 12 + k * ROW_H,
                label=label,
                sub=fit_sub(sub_state if len(ranks) == 1 else sub, label),
                title=title_,
                culprit=any(i.culprit for i in band),
                segs=segs,
                dots=dots,
                note=note,
            )
        )
    axis_y = TOP + 12 + len(out) * ROW_H
    return Chart(id_, title, caption, tuple(out), ticks, markers, more, axis_y + 24, axis_y)


# ----------------------------------------------------------------------------------------------
# Last heard


def last_heard(incident: Incident) -> Chart | None:
    """Per rank, when its last line was written, and the silence from then to the failure."""
    culprits = set(incident.verdict.culprit_ranks)
    heard = {r.rank: (t, r) for r in incident.ranks if (t := view.parse_iso(r.last_time)) is not None}
    if not heard:
        return None
    times = [t for t, _ in heard.values()]
    zero = view.failure_time(incident) or max(times)
    axis = _Axis(min([*times, zero]), max([*times, zero]), zero)
    items = [
        _Item(rank, clean(info.status, 40) or "no status", axis.x(t), axis.x(t), rank in culprits)
        for rank, (t, info) in sorted(heard.items())
    ]
    # ranks with lines but no time on any of them: rows of their own, no bar; a culprit's first,
    # the others' last (placed before the left or past the right end)
    no_time = [r.rank for r in incident.ranks if r.rank not in heard]
    for r in no_time:
        x = -1.0 if r in culprits else float(WIDTH)
        items.append(_Item(r, NO_TIME, x, x, r in culprits))
    bands, left = _bands(items, MAX_ROWS)
    fail_x = axis.x(zero)
    rows: list[_RowSpec] = []
    for band in bands:
        if band[0].state == NO_TIME:
            title = (
                f"{_who(band)}: no line of {'this rank' if len(band) == 1 else 'these ranks'} carries a time"
            )
            rows.append((band, NO_TIME, (), (), "no time", title))
            continue
        ts = sorted(heard[i.rank][0] for i in band)
        first, last = ts[0], ts[-1]
        status = str(band[0].state)
        span = view.short_time(first.isoformat()) + (
            f" – {view.short_time(last.isoformat())}" if last != first else ""
        )
        where = f"{(first - zero).total_seconds():+.3f} s from the failure"
        title = f"{_who(band)} · {status} · last heard {span} ({where})"
        segs = [Seg(axis.x(first), axis.x(last), "heard", title)]
        if axis.x(last) < fail_x:
            silence = (zero - last).total_seconds()
            segs.insert(
                0, Seg(axis.x(last), fail_x, "silence", f"silent for {_dur(silence)} before the failure")
            )
        rows.append(
            (band, status, tuple(segs), (Dot(axis.x(first), "heard", title),), _rel(first, zero), title)
        )
    more = _more(left, "the ranks table lists them")
    caption = (
        "Each rank's last line, and the silence from it to the failure (dashed line). A rank that went "
        "quiet long before the others is the first place to look."
    )
    markers = (Marker(fail_x, "failure", "fail"),)
    return _chart("last-heard", "Last heard, per rank", caption, rows, axis.ticks(), markers, more)


def _rel(t: datetime, zero: datetime) -> str:
    return _offset((t - zero).total_seconds(), 0.0)


def _who(band: Sequence[_Item]) -> str:
    ranks = sorted(i.rank for i in band)
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {view.rank_ranges(ranks, 12)} ({len(ranks)})"


# ----------------------------------------------------------------------------------------------
# The stuck collective


def stuck_collective(incident: Incident) -> CollectiveRow | None:
    """The collective the most ranks timed out in (one with a timeout or elapsed time first, the
    earliest on a tie)."""
    rows = [c for c in incident.collectives if c.reporters]
    if not rows:
        return None
    timed = [c for c in rows if c.timeout_ms or c.elapsed_ms] or rows
    return min(timed, key=lambda c: (-(len(c.reporters) + len(c.silent)), c.seq, c.pg))


def _fired(incident: Incident, c: CollectiveRow) -> dict[int, tuple[datetime, int | None]]:
    """Per reporting rank: when its watchdog fired on ``c`` (host clock offsets applied) and the
    elapsed milliseconds its line gives."""
    ev = incident.events
    need = {"signal", "seq", "rank", "time", "host"}
    if not ev.height or not need <= set(ev.columns):
        return {}
    cols = ["rank", "time", "host", *(["elapsed_ms"] if "elapsed_ms" in ev.columns else [])]
    rows = (
        ev.filter(
            (pl.col("signal") == "collective_timeout")
            & (pl.col("seq") == c.seq)
            & pl.col("rank").is_in(list(c.reporters))
            & pl.col("time").is_not_null()
        )
        .select(cols)
        .sort("time", "rank")
        .unique(subset=["rank"], keep="first", maintain_order=True)
    )
    out = {}
    for r in rows.iter_rows(named=True):
        t = r["time"] + timedelta(seconds=incident.host_offsets.get(r["host"] or "", 0.0))
        elapsed = c.elapsed_ms.get(r["rank"], r.get("elapsed_ms"))
        out[int(r["rank"])] = (t, elapsed)
    return out


def stuck_gantt(incident: Incident) -> Chart | None:
    """Per rank, the wait in the stuck collective: from its start (fire time minus the elapsed time
    the watchdog line gives) to the watchdog firing; the part past the timeout is the watchdog's
    own delay. The ranks that never entered it are rows of their own, at their last line."""
    try:
        return _stuck_gantt(incident)
    except OverflowError:  # a time at an end of the calendar (a garbled year) minus a wait: no chart
        return None


def _stuck_gantt(incident: Incident) -> Chart | None:
    c = stuck_collective(incident)
    if c is None:
        return None
    fired = _fired(incident, c)
    if not fired:
        return None
    timeout = timedelta(milliseconds=c.timeout_ms) if c.timeout_ms else None
    spans: dict[int, tuple[datetime, datetime, bool]] = {}
    for rank, (end, elapsed) in fired.items():
        if elapsed is not None:
            spans[rank] = (end - timedelta(milliseconds=elapsed), end, True)
        elif timeout is not None:
            spans[rank] = (end - timeout, end, False)
    if not spans:
        return None
    infos = {r.rank: r for r in incident.ranks}
    silent_t = {
        r: t
        for r in c.silent
        if (t := view.parse_iso(infos[r].last_time if r in infos else None)) is not None
    }
    starts = [s for s, _, _ in spans.values()]
    ends = [e for _, e, _ in spans.values()]
    zero = min(starts)
    axis = _Axis(min([*starts, *silent_t.values()]), max(ends), zero)
    culprits = set(incident.verdict.culprit_ranks)
    items = [
        _Item(r, "measured" if known else "estimated", axis.x(s), axis.x(e), r in culprits)
        for r, (s, e, known) in sorted(spans.items())
    ]
    items += [_Item(r, "silent", axis.x(t), axis.x(t), r in culprits) for r, t in sorted(silent_t.items())]
    items += [
        _Item(r, "silent, no time", axis.x(zero), axis.x(zero), r in culprits)
        for r in c.silent
        if r not in silent_t
    ]
    bands, left = _bands(items, MAX_ROWS)
    bands.sort(key=lambda b: not any(i.culprit for i in b))  # the culprits' rows first, else by start
    op = clean(c.op or "collective", 30)
    rows: list[_RowSpec] = []
    for band in bands:
        state = str(band[0].state)
        if state.startswith("silent"):
            t = silent_t.get(band[0].rank)
            title = f"{_who(band)} never entered {op} #{c.seq}" + (
                f"; last line at {view.short_time(t.isoformat())}" if t else ""
            )
            dots = (Dot(band[0].x, "silent", title),) if state == "silent" else ()
            rows.append((band, "never entered", (), dots, "never entered", title))
            continue
        s = min(spans[i.rank][0] for i in band)
        e = max(spans[i.rank][1] for i in band)
        deadline = s + timeout if timeout is not None else e
        how = (
            "from the elapsed time in its line"
            if state == "measured"
            else "start estimated as fire time minus the timeout"
        )
        title = (
            f"{_who(band)} waited in {op} #{c.seq}: from {view.short_time(s.isoformat())} "
            f"to {view.short_time(e.isoformat())} ({how})"
        )
        cls = "wait" if state == "measured" else "wait est"
        segs = [Seg(axis.x(s), axis.x(min(deadline, e)), cls, title)]
        if deadline < e:
            segs.append(
                Seg(
                    axis.x(deadline),
                    axis.x(e),
                    "late",
                    f"watchdog fired {_dur((e - deadline).total_seconds())} after the timeout",
                )
            )
        rows.append((band, "waited", tuple(segs), (), _dur((e - s).total_seconds()), title))
    first_fire = min(ends)
    markers = (Marker(axis.x(first_fire), "first watchdog", "fail"),)
    caption = (
        f"{op} #{c.seq} of process group {clean(c.pg, 40)}"
        + (f", timeout {c.timeout_ms:,} ms" if c.timeout_ms else "")
        + ": each rank's wait, from when it entered (the watchdog's fire time minus the elapsed time its"
        " line gives) to the watchdog firing; the darker end is the delay past the timeout. Time is"
        " relative to the first rank entering."
    )
    more = _more(left, "the collective alignment lists them")
    return _chart("stuck", "The stuck collective, per rank", caption, rows, axis.ticks(), markers, more)


# ----------------------------------------------------------------------------------------------
# Enqueued / completed skew


@dataclass(frozen=True)
class Skew:
    pg: str
    summary: str
    chart: Chart


def _work_status(incident: Incident, main_pg: str) -> dict[str, dict[int, tuple[int | None, int | None]]]:
    """Per process group and rank: the last enqueued and last completed sequence numbers the logs
    give (the watchdog's "last enqueued work: N, last completed work: M"), else the rank table's."""
    out: dict[str, dict[int, tuple[int | None, int | None]]] = defaultdict(dict)
    ev = incident.events
    if ev.height and {"last_enqueued", "last_completed", "rank", "pg"} <= set(ev.columns):
        agg = (
            ev.filter(
                pl.col("rank").is_not_null()
                & (pl.col("last_enqueued").is_not_null() | pl.col("last_completed").is_not_null())
            )
            .with_columns(pgk=pg_key(pl.col("pg")).fill_null(main_pg))
            .group_by("pgk", "rank")
            .agg(enq=pl.col("last_enqueued").max(), done=pl.col("last_completed").max())
        )
        for pgk, rank, enq, done in agg.iter_rows():
            out[str(pgk)][int(rank)] = (enq, done)
    for r in incident.ranks:
        if r.rank not in out[main_pg] and (r.last_enqueued is not None or r.last_completed is not None):
            out[main_pg][r.rank] = (r.last_enqueued, r.last_completed)
    if out[main_pg]:  # the culprits say nothing: a row that says so, not a missing one
        for culprit in incident.verdict.culprit_ranks:
            out[main_pg].setdefault(culprit, (None, None))
    return {pg: ranks for pg, ranks in out.items() if ranks}


def skew(incident: Incident) -> tuple[list[Skew], int]:
    """Per process group (the stuck collective's first), each rank's last enqueued and completed
    sequence numbers, banded by identical values. Returns the charts and how many groups are left
    out."""
    stuck = stuck_collective(incident)
    main_pg = stuck.pg if stuck is not None else "0"
    status = _work_status(incident, main_pg)
    culprits = set(incident.verdict.culprit_ranks)
    order = sorted(status, key=lambda pg: (pg != main_pg, -len(status[pg]), view.natural_key(pg)))
    out = [_skew_chart(k, pg, status[pg], culprits) for k, pg in enumerate(order[:MAX_GROUPS])]
    return out, max(len(order) - MAX_GROUPS, 0)


def _skew_chart(k: int, pg: str, ranks: dict[int, tuple[int | None, int | None]], culprits: set[int]) -> Skew:
    seqs = [s for pair in ranks.values() for s in pair if s is not None]
    lo, hi = min(seqs), max(seqs)
    pad = max((hi - lo) * 0.05, 0.6)
    x0, x1 = LABEL_W + 10, WIDTH - NOTE_W

    def x_of(seq: float) -> float:
        return round(x0 + (seq - lo + pad) / (hi - lo + 2 * pad) * (x1 - x0), 1)

    def x_pair(enq: int | None, done: int | None) -> tuple[float, float]:
        if enq is None and done is None:
            return 0.0, 0.0
        return x_of(done if done is not None else enq or 0), x_of(enq if enq is not None else done or 0)

    items = [_Item(r, pair, *x_pair(*pair), r in culprits) for r, pair in sorted(ranks.items())]
    top = max((e for e, _ in ranks.values() if e is not None), default=0)
    bands, left = _bands(items, MAX_ROWS)
    bands.sort(key=lambda b: (not any(i.culprit for i in b), _key(b[0].state), b[0].rank))
    rows: list[_RowSpec] = []
    for band in bands:
        enq, done = ranks[band[0].rank]
        if enq is None and done is None:
            title = f"{_who(band)}: no work status line in this group"
            rows.append((band, "no status line", (), (), "not logged", title))
            continue
        what = f"enq {_num(enq)} · done {_num(done)}"
        behind = top - enq if enq is not None else 0
        sub = f"{behind} behind" if behind else ""
        title = f"{_who(band)}: last enqueued {_num(enq)}, last completed {_num(done)}"
        segs: tuple[Seg, ...] = ()
        dots = []
        if enq is not None and done is not None and enq > done:
            segs = (Seg(x_of(done), x_of(enq), "inflight", f"{enq - done} enqueued, not completed"),)
        if enq is not None:
            dots.append(Dot(x_of(enq), "enq", f"last enqueued {enq}"))
        if done is not None:  # drawn last: where all enqueued work completed, the full dot shows
            dots.append(Dot(x_of(done), "done", f"last completed {done}"))
        rows.append((band, sub, segs, tuple(dots), what, title))
    step = max(1, int(_step(hi - lo + 2 * pad, MAX_TICKS // 2)))
    ticks = tuple((x_of(s), str(s)) for s in range(lo - lo % step, hi + 1, step) if s >= lo - pad)
    parts = [view.plural(len(ranks), "rank")]
    for name, vals in (
        ("enqueued", [e for e, _ in ranks.values() if e is not None]),
        ("completed", [d for _, d in ranks.values() if d is not None]),
    ):
        if vals:
            parts.append(f"last {name} {min(vals)}–{max(vals)} (skew {max(vals) - min(vals)})")
    more = _more(left, "the JSON report has each rank")
    chart = _chart(f"skew-{k}", f"Process group {clean(pg, 40)}", "", rows, ticks, (), more)
    return Skew(clean(pg, 40), " · ".join(parts), chart)


def _num(n: int | None) -> str:
    return "not logged" if n is None else str(n)


def _key(state: Hashable) -> tuple[int, int]:
    enq, done = state if isinstance(state, tuple) else (None, None)
    return (enq if enq is not None else -1, done if done is not None else -1)


# ----------------------------------------------------------------------------------------------
# Context of the evidence lines


@dataclass(frozen=True)
class ContextLine:
    line: int
    text: str
    evidence: bool
    gap: int  # lines between the previous shown line and this one that nccllog did not keep


def evidence_context(
    incident: Incident, evidence: Sequence[Evidence], before: int = 3, after: int = 2, reach: int = 200
) -> list[tuple[ContextLine, ...]]:
    """For each evidence line, up to ``before`` and ``after`` kept lines of the same file around it
    (within ``reach`` line numbers). Only the lines the analysis kept (the matched ones and each
    file's last lines) are in the events table; the files are not read again."""
    ev = incident.events
    if not ev.height or not {"source", "line", "text"} <= set(ev.columns):
        return [() for _ in evidence]
    near = (
        ev.filter(pl.col("source").is_in(sorted({e.source for e in evidence})))
        .select("source", "line", "text")
        .unique(subset=["source", "line"], keep="first")
        .sort("source", "line")
    )
    out = []
    for e in evidence:
        part = near.filter(
            (pl.col("source") == e.source) & pl.col("line").is_between(e.line - reach, e.line + reach)
        )
        lines = [(int(n), str(t or "")) for n, t in part.select("line", "text").iter_rows()]
        up = [x for x in lines if x[0] < e.line][-before:] if before else []
        down = [x for x in lines if x[0] > e.line][:after]
        shown = [*up, (e.line, e.text), *down]
        ctx = []
        for k, (n, t) in enumerate(shown):
            gap = n - shown[k - 1][0] - 1 if k else 0
            ctx.append(ContextLine(n, clean(t, 2000), n == e.line, gap))
        out.append(tuple(ctx))
    return out
