"""What every renderer shows, computed once from the frozen Incident (no log text is parsed here).

The renderers only lay these views out: which per-rank rows to show for a large job (outliers
first, the rest collapsed into groups), the window of the merged timeline around the failure
(consecutive events of the same pattern folded into one row), the collective alignment grid
(ranks x sequence numbers, identical rows folded). Log text shown anywhere goes through
``nccllog.text_safety.clean``.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

import polars as pl

from nccllog.correlate.wording import plural, rank_list
from nccllog.ingest.timestamps import parse_iso as parse_iso  # re-exported: the model's times, read once
from nccllog.model import CollectiveRow, Evidence, Finding, Incident, RankInfo, TimelineEntry
from nccllog.text_safety import clean
from nccllog.vocab import CATEGORY_TITLES as CATEGORY_TITLES  # re-exported for the renderers

SEVERITY_ORDER = {"info": 0, "warning": 1, "error": 2, "critical": 3}


def rank_ranges(ranks: Iterable[int], limit: int | None = None) -> str:
    """The reports' rank lists: ``[0, 1, 2, 5, 7, 8]`` -> ``"0-2, 5, 7-8"`` (at most ``limit``
    runs, then ``…``), in the one format of ``correlate.wording.rank_list``."""
    return rank_list(ranks, sep=", ", pairs=False, limit=limit)


def natural_key(text: str) -> tuple[object, ...]:
    """Sort key that puts ``rank2.log`` before ``rank10.log``."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


def short_time(iso: str | None, with_date: bool = False) -> str:
    t = parse_iso(iso)
    if t is None:
        return "-" if not iso else clean(iso, 32)
    ms = f"{t.microsecond // 1000:03d}"
    return t.strftime("%m-%d %H:%M:%S") + f".{ms}" if with_date else t.strftime("%H:%M:%S") + f".{ms}"


def spans_days(times: Iterable[str | None]) -> bool:
    days = {t.date() for t in (parse_iso(x) for x in times) if t is not None}
    return len(days) > 1


def offset_label(seconds: float | None) -> str:
    """Seconds relative to the failure, e.g. ``-12.0s``, ``+0.3s``, ``+2m05s``."""
    if seconds is None:
        return ""
    sign = "-" if seconds < 0 else "+"
    s = abs(seconds)
    if s < 60:
        return f"{sign}{s:.1f}s"
    if s < 3600:
        return f"{sign}{int(s // 60)}m{int(s % 60):02d}s"
    return f"{sign}{int(s // 3600)}h{int(s % 3600 // 60):02d}m"


# ----------------------------------------------------------------------------------------------
# Headline


def culprit_line(incident: Incident) -> str:
    v = incident.verdict
    parts = []
    if v.culprit_ranks:
        parts.append(("rank " if len(v.culprit_ranks) == 1 else "ranks ") + rank_ranges(v.culprit_ranks, 12))
    if v.culprit_hosts:
        hosts = sorted(v.culprit_hosts)
        shown = ", ".join(clean(h, 64) for h in hosts[:6]) + (", …" if len(hosts) > 6 else "")
        parts.append(("on host " if len(hosts) == 1 else "on hosts ") + shown)
    return " ".join(parts) if parts else "no single culprit named"


def ranks_seen_line(incident: Incident) -> str:
    seen = len(incident.ranks_seen)
    ws = incident.world_size
    text = f"{seen} of {ws} ranks seen" if ws else plural(seen, "rank") + " seen"
    if incident.ranks_missing:
        text += f"; no logs from {plural(len(incident.ranks_missing), 'rank')} ({rank_ranges(incident.ranks_missing, 8)})"
    return text


def coverage_line(incident: Incident) -> str:
    c = incident.coverage
    parts = [
        plural(c.files, "file"),
        f"{c.lines:,} {'line' if c.lines == 1 else 'lines'}",
        f"{c.matched:,} matched",
        f"{c.unmatched:,} unmatched",
    ]
    if c.skipped_lines:
        parts.append(f"{c.skipped_lines:,} counted only")
    if c.unattributed:
        parts.append(f"{c.unattributed:,} without a rank")
    if c.skipped:
        parts.append(f"{len(c.skipped)} skipped")
    if c.decode_replacements:
        parts.append(f"{c.decode_replacements:,} undecodable bytes replaced")
    if c.truncated_lines:
        parts.append(f"{c.truncated_lines:,} over-long lines cut")
    return ", ".join(parts)


def all_evidence(incident: Incident) -> list[Evidence]:
    """The verdict's evidence, in the order the engine gave it (that order is meaning)."""
    return list(incident.verdict.evidence)


def remediation(incident: Incident) -> list[str]:
    """The verdict's remediation steps, then each piece of advice's title (deduplicated)."""
    out: list[str] = []
    for step in incident.verdict.remediation:
        if step not in out:
            out.append(step)
    return out


# ----------------------------------------------------------------------------------------------
# Per-rank table


@dataclass(frozen=True)
class RankRow:
    """One row of the per-rank table: one rank, or a group of ranks that look alike."""

    ranks: tuple[int, ...]
    info: RankInfo  # the rank itself, or the group's first member
    culprit: bool = False
    outlier: bool = False
    hosts: tuple[str, ...] = ()

    @property
    def group(self) -> bool:
        return len(self.ranks) > 1

    @property
    def label(self) -> str:
        return rank_ranges(self.ranks, 6) if self.group else str(self.ranks[0])


def _signature(r: RankInfo) -> tuple[object, ...]:
    first = r.first_error.pattern if r.first_error else None
    return (r.status, r.last_enqueued, r.last_completed, r.timed_out_seq, first)


def rank_rows(incident: Incident, max_rows: int) -> tuple[list[RankRow], int]:
    """Per-rank rows, at most about ``max_rows``: every rank when they fit, otherwise the culprits
    and the ranks that differ from the crowd one by one, and the crowd folded into groups of ranks
    with the same status and progress. Returns the rows and how many ranks are not listed singly."""
    infos = sorted(incident.ranks, key=lambda r: r.rank)
    culprits = set(incident.verdict.culprit_ranks)
    if len(infos) <= max_rows:
        return [RankRow((r.rank,), r, culprit=r.rank in culprits, hosts=_h(r)) for r in infos], 0
    groups: dict[tuple[object, ...], list[RankInfo]] = defaultdict(list)
    for r in infos:
        groups[_signature(r)].append(r)
    sizes = {sig: len(members) for sig, members in groups.items()}
    crowd = max(sizes.values()) if sizes else 0
    singles: list[RankInfo] = [r for r in infos if r.rank in culprits]
    budget = max(max_rows - 3, len(singles))
    # Outliers: members of the smallest groups first (a rank alone in its group is the oddest).
    for sig in sorted(groups, key=lambda s: (sizes[s], groups[s][0].rank)):
        if sizes[sig] == crowd and len(groups) > 1:
            continue
        if sizes[sig] > max(2, len(infos) // 20):
            continue
        for r in groups[sig]:
            if len(singles) >= budget:
                break
            if r.rank not in culprits:
                singles.append(r)
    single_ids = {r.rank for r in singles}
    rows: list[RankRow] = [
        RankRow((r.rank,), r, culprit=r.rank in culprits, outlier=r.rank not in culprits, hosts=_h(r))
        for r in sorted(singles, key=lambda r: r.rank)
    ]
    rest = [(sig, [r for r in members if r.rank not in single_ids]) for sig, members in groups.items()]
    rest = [(sig, m) for sig, m in rest if m]
    rest.sort(key=lambda item: (-len(item[1]), item[1][0].rank))
    room = max(max_rows - len(rows), 1)
    folded = rest[:room] if len(rest) <= room else rest[: room - 1]
    for _sig, members in folded:
        hosts = tuple(sorted({m.host for m in members if m.host}))
        rows.append(RankRow(tuple(m.rank for m in members), members[0], hosts=hosts))
    leftover = [m for _sig, members in rest[len(folded) :] for m in members]
    if leftover:
        hosts = tuple(sorted({m.host for m in leftover if m.host}))
        rows.append(
            RankRow(tuple(sorted(m.rank for m in leftover)), RankInfo(rank=-1, status="(mixed)"), hosts=hosts)
        )
    return rows, len(infos) - len(singles)


def _h(r: RankInfo) -> tuple[str, ...]:
    return (r.host,) if r.host else ()


def hosts_label(hosts: Sequence[str], limit: int = 2) -> str:
    if not hosts:
        return "-"
    if len(hosts) <= limit:
        return ", ".join(clean(h, 40) for h in hosts)
    return plural(len(hosts), "host")


def progress_label(r: RankInfo) -> str:
    """``enq 4813 / done 4811`` style summary of a rank's last collective progress."""
    parts = []
    if r.last_enqueued is not None:
        parts.append(f"enq {r.last_enqueued}")
    if r.last_completed is not None:
        parts.append(f"done {r.last_completed}")
    if r.timed_out_seq is not None and r.timed_out_seq != r.last_enqueued:
        parts.append(f"timeout {r.timed_out_seq}")
    if r.last_step is not None:
        parts.append(f"step {r.last_step}")
    return " ".join(parts) or "-"


def first_error_label(f: Finding | None, limit: int = 60) -> str:
    if f is None:
        return "-"
    return f"{f.pattern}"[:limit]


# ----------------------------------------------------------------------------------------------
# Timeline


@dataclass(frozen=True)
class TimelineRow:
    """Consecutive timeline entries of the same pattern, folded into one row."""

    entries: tuple[TimelineEntry, ...]
    anchor: bool = False  # the row of the failure

    @property
    def first(self) -> TimelineEntry:
        return self.entries[0]

    @property
    def ranks(self) -> tuple[int, ...]:
        return tuple(sorted({e.rank for e in self.entries if e.rank is not None}))

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(sorted({e.host for e in self.entries if e.host}))

    @property
    def severity(self) -> str:
        return max((e.severity for e in self.entries), key=lambda s: SEVERITY_ORDER.get(s, 0))

    @property
    def last_time(self) -> str | None:
        times = [e.time for e in self.entries if e.time]
        return times[-1] if times else None

    def who(self, limit: int = 6) -> str:
        ranks = self.ranks
        if ranks:
            return ("rank " if len(ranks) == 1 else "ranks ") + rank_ranges(ranks, limit)
        hosts = self.hosts
        return hosts_label(hosts) if hosts else "-"


def failure_index(incident: Incident) -> int | None:
    """Index in ``incident.timeline`` of the failure: the verdict's first evidence line if it is
    on the timeline, else the first error or critical entry."""
    tl = incident.timeline
    spots = {(e.source, e.line) for e in incident.verdict.evidence[:1]}
    for i, e in enumerate(tl):
        if (e.source, e.line) in spots:
            return i
    for i, e in enumerate(tl):
        if SEVERITY_ORDER.get(e.severity, 0) >= 2:
            return i
    return None


def fold_timeline(entries: Sequence[TimelineEntry], anchor: int | None = None) -> list[TimelineRow]:
    """Consecutive entries of the same pattern and severity become one row; a line that several
    patterns matched (the same source:line again) is kept once."""
    rows: list[list[TimelineEntry]] = []
    anchor_row: int | None = None
    for i, e in enumerate(entries):
        if rows and (rows[-1][-1].source, rows[-1][-1].line) == (e.source, e.line):
            if i == anchor:
                anchor_row = len(rows) - 1
            continue
        if rows and i != anchor and rows[-1][0].pattern == e.pattern and rows[-1][0].severity == e.severity:
            rows[-1].append(e)
            continue
        rows.append([e])
        if i == anchor:
            anchor_row = len(rows) - 1
    return [TimelineRow(tuple(r), anchor=(k == anchor_row)) for k, r in enumerate(rows)]


def timeline_window(incident: Incident, before: int, after: int) -> tuple[list[TimelineRow], int, int]:
    """Folded timeline rows around the failure: ``before`` rows before it, ``after`` from it on.
    Returns the rows and how many rows were left out before and after."""
    return around_anchor(fold_timeline(incident.timeline, failure_index(incident)), before, after)


def around_anchor(rows: list[TimelineRow], before: int, after: int) -> tuple[list[TimelineRow], int, int]:
    """``before`` rows before the anchor row and ``after`` from it on, and how many were left out
    before and after; without an anchor, the end (where a hang or crash shows)."""
    if not rows:
        return [], 0, 0
    at = next((k for k, r in enumerate(rows) if r.anchor), None)
    if at is None:
        start = max(len(rows) - before - after, 0)
        return rows[start:], start, 0
    start = max(at - before, 0)
    end = min(at + after, len(rows))
    return rows[start:end], start, len(rows) - end


def failure_time(incident: Incident) -> datetime | None:
    i = failure_index(incident)
    if i is not None:
        t = parse_iso(incident.timeline[i].time)
        if t is not None:
            return t
    for e in incident.verdict.evidence:
        t = parse_iso(e.time)
        if t is not None:
            return t
    return None


def relative(iso: str | None, zero: datetime | None) -> str:
    t = parse_iso(iso)
    if t is None or zero is None:
        return ""
    return offset_label((t - zero).total_seconds())


# ----------------------------------------------------------------------------------------------
# Collective alignment grid

OK, SILENT, MISMATCH, ABSENT = "ok", "silent", "mismatch", ""


@dataclass(frozen=True)
class GridRow:
    ranks: tuple[int, ...]
    cells: tuple[str, ...]  # one state per column
    odd: bool = False


@dataclass(frozen=True)
class Grid:
    pg: str
    seqs: tuple[int, ...]
    ops: tuple[str, ...]  # the majority op of each column
    rows: tuple[GridRow, ...]
    hidden_seqs: int = 0  # older sequence numbers left out
    notes: tuple[str, ...] = ()


def _cells(
    row: CollectiveRow, ranks: list[int], op: str | None, numel: tuple[int | None, int | None] | None
) -> list[str]:
    """The state of each of ``ranks`` in ``row``; membership is tested in sets built once per row
    (testing the row's tuples per rank was quadratic in ranks: 19 s of HTML at 65,536 ranks)."""
    present = {*row.expected, *row.reporters}
    silent = set(row.silent)
    out: list[str] = []
    for rank in ranks:
        if rank not in present:
            out.append(ABSENT)
        elif rank in silent:
            out.append(SILENT)
        elif (op is not None and row.ops.get(rank, op) != op) or (
            numel is not None and rank in row.numel and row.numel[rank] != numel
        ):
            out.append(MISMATCH)
        else:
            out.append(OK)
    return out


def collective_grids(incident: Incident, max_seqs: int = 16, max_rows: int = 24) -> list[Grid]:
    """One grid per process group that has collective rows; the groups with silent or mismatched
    ranks first. Columns are the last ``max_seqs`` sequence numbers; rows are ranks, and ranks
    whose whole row is identical are folded into one row (the odd rows are the minority)."""
    by_pg: dict[str, list[CollectiveRow]] = defaultdict(list)
    for c in incident.collectives:
        by_pg[c.pg].append(c)
    grids: list[Grid] = []
    for pg, rows in by_pg.items():
        rows = sorted(rows, key=lambda c: c.seq)
        hidden = max(len(rows) - max_seqs, 0)
        rows = rows[hidden:]
        ops: list[str] = []
        states: dict[int, list[str]] = {}
        ranks = sorted({r for c in rows for r in (*c.expected, *c.reporters)})
        for r in ranks:
            states[r] = []
        for c in rows:
            op_counts = Counter(v for v in c.ops.values())
            op = op_counts.most_common(1)[0][0] if op_counts else c.op
            numel_counts = Counter(c.numel.values())
            numel = numel_counts.most_common(1)[0][0] if numel_counts else None
            ops.append(op or c.op or "?")
            for r, cell in zip(ranks, _cells(c, ranks, op, numel), strict=True):
                states[r].append(cell)
        folded: dict[tuple[str, ...], list[int]] = defaultdict(list)
        for r in ranks:
            folded[tuple(states[r])].append(r)
        counts = {k: len(v) for k, v in folded.items()}
        top = max(counts.values()) if counts else 0
        grid_rows = [
            GridRow(
                tuple(members),
                cells,
                odd=len(folded) > 1 and (counts[cells] < top or any(s in (SILENT, MISMATCH) for s in cells)),
            )
            for cells, members in folded.items()
        ]
        grid_rows.sort(key=lambda g: g.ranks[0])
        notes: list[str] = [f"seq {c.seq}: {clean(c.note, 200)}" for c in rows if c.note]
        if len(grid_rows) > max_rows:
            keep = sorted(grid_rows, key=lambda g: (not g.odd, -len(g.ranks), g.ranks[0]))[: max_rows - 1]
            dropped = [g for g in grid_rows if g not in keep]
            notes.append(
                f"{plural(sum(len(g.ranks) for g in dropped), 'more rank')} in {len(dropped)} other row patterns not shown"
            )
            grid_rows = sorted(keep, key=lambda g: g.ranks[0])
        grids.append(Grid(pg, tuple(c.seq for c in rows), tuple(ops), tuple(grid_rows), hidden, tuple(notes)))
    grids.sort(key=lambda g: (not any(r.odd for r in g.rows), g.pg))
    return grids


# ----------------------------------------------------------------------------------------------
# Findings summary and raw excerpts


@dataclass(frozen=True)
class PatternCount:
    pattern: str
    severity: str
    count: int
    ranks: tuple[int, ...]
    example: Finding


def finding_counts(incident: Incident) -> list[PatternCount]:
    """Findings per pattern, most severe then most frequent first."""
    by: dict[str, list[Finding]] = defaultdict(list)
    for f in incident.findings:
        by[f.pattern].append(f)
    out = [
        PatternCount(
            p,
            max((f.severity for f in fs), key=lambda s: SEVERITY_ORDER.get(s, 0)),
            len(fs),
            tuple(sorted({f.rank for f in fs if f.rank is not None})),
            fs[0],
        )
        for p, fs in by.items()
    ]
    out.sort(key=lambda c: (-SEVERITY_ORDER.get(c.severity, 0), -c.count, c.pattern))
    return out


@dataclass(frozen=True)
class ExcerptLine:
    line: int
    text: str
    severity: str
    pattern: str
    evidence: bool
    gap_before: bool = False


@dataclass(frozen=True)
class Excerpt:
    source: str
    lines: tuple[ExcerptLine, ...]
    ranks: tuple[int, ...]
    hidden: int = 0


def excerpts(incident: Incident, max_sources: int = 12, max_lines: int = 40) -> tuple[list[Excerpt], int]:
    """The matched lines of the most telling sources (evidence sources, then the culprits', then
    those with the most severe findings), each capped at ``max_lines`` (evidence and severe lines
    kept first). Returns the excerpts and how many sources with matched lines were left out.
    Vectorised: the events table can hold millions of rows."""
    ev = incident.events
    if ev.height == 0:
        return [], 0
    spots: set[tuple[str, int]] = set()
    for h in (incident.verdict, *incident.hypotheses):
        spots.update((e.source, e.line) for e in h.evidence)
    culprits = sorted(set(incident.verdict.culprit_ranks))
    cols = [c for c in ("source", "line", "text", "severity", "pattern", "rank") if c in ev.columns]
    rows = ev.select(cols).unique(subset=["source", "line"], keep="first", maintain_order=True)
    for c, dtype in (
        ("text", pl.String),
        ("severity", pl.String),
        ("pattern", pl.String),
        ("rank", pl.Int64),
    ):
        if c not in rows.columns:
            rows = rows.with_columns(pl.lit(None, dtype=dtype).alias(c))
    marks = pl.DataFrame(
        {"source": [x[0] for x in spots], "line": [x[1] for x in spots], "ev": [True] * len(spots)},
        schema={"source": pl.String, "line": pl.Int64, "ev": pl.Boolean},
    )
    rows = rows.join(marks, on=["source", "line"], how="left").with_columns(
        pl.col("ev").fill_null(False),
        pl.col("severity").replace_strict(SEVERITY_ORDER, default=0, return_dtype=pl.Int64).alias("sev"),
        pl.col("rank").is_in(culprits).fill_null(False).alias("culprit"),
    )
    summary = rows.group_by("source").agg(
        pl.col("ev").any(),
        pl.col("culprit").any(),
        pl.col("sev").max(),
        pl.len().alias("n"),
        pl.col("rank").drop_nulls().unique().sort().alias("ranks"),
    )
    info = {r["source"]: r for r in summary.iter_rows(named=True)}

    def priority(src: str) -> tuple[object, ...]:
        r = info[src]
        return (not r["ev"], not r["culprit"], -(r["sev"] or 0), natural_key(src))

    chosen = sorted(info, key=priority)[:max_sources]
    out: list[Excerpt] = []
    for src in chosen:
        part = (
            rows.filter(pl.col("source") == src)
            .sort(["ev", "sev", "line"], descending=[True, True, False])
            .head(max_lines)
            .sort("line")
        )
        ex_lines: list[ExcerptLine] = []
        prev: int | None = None
        for r in part.iter_rows(named=True):
            line_no = int(r["line"])
            ex_lines.append(
                ExcerptLine(
                    line=line_no,
                    text=str(r["text"] or ""),
                    severity=str(r["severity"] or "info"),
                    pattern=str(r["pattern"] or ""),
                    evidence=bool(r["ev"]),
                    gap_before=prev is not None and line_no != prev + 1,
                )
            )
            prev = line_no
        meta = info[src]
        out.append(
            Excerpt(
                src, tuple(ex_lines), tuple(int(x) for x in meta["ranks"]), hidden=meta["n"] - part.height
            )
        )
    return out, len(info) - len(chosen)


def anchor_id(source: str, line: int) -> str:
    """A stable HTML id for ``source:line`` (only [a-z0-9-] characters)."""
    slug = re.sub(r"[^a-z0-9]+", "-", source.lower()).strip("-")[-60:]
    digest = hashlib.sha1(source.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"l-{slug}-{digest}-{line}"
