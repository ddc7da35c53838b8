"""HTML renderer: one self-contained file (no scripts, fonts, images or anything fetched).

jinja2 with autoescape on renders ``templates/report.html.j2`` from plain data prepared here: a
mixed-input banner (when the lines look like several jobs), the verdict, an inline SVG timeline
(swimlanes per rank, per host, or per group of alike ranks for thousands of ranks), the
collective alignment grid (ranks x sequence numbers, the odd rows marked), the per-rank table,
findings, evidence linked to collapsible raw excerpts (source:line), environment, remediation and
coverage. A Content-Security-Policy forbids every script and remote
load, so even a template mistake could not run log text. Log text is data to the template, never
template source, so ``{{ }}`` in a log stays text; every value the template prints is cleaned
(nccllog.text_safety: control, escape and bidi characters shown as ``\\x1b``, ``\\u202e``) and then
escaped.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import jinja2
from markupsafe import Markup

from nccllog.model import Incident, RankInfo, TimelineEntry
from nccllog.render import charts, view
from nccllog.text_safety import clean
from nccllog.version import __version__

MAX_LANES = 40
MAX_RANK_ROWS = 64
FULL_RANK_TABLE_LIMIT = 1024  # past this the ranks are in the JSON report only: the page stays small
SVG_WIDTH = 1100
LABEL_W = 230
LANE_H = 20
SEVERITY_COLOR = {"info": "#8a94a6", "warning": "#d08a00", "error": "#d0342c", "critical": "#8b0000"}
SEVERITY_R = {"info": 3.0, "warning": 4.0, "error": 5.0, "critical": 6.0}

_ENV: jinja2.Environment | None = None


def _env() -> jinja2.Environment:
    global _ENV
    if _ENV is None:
        _ENV = jinja2.Environment(
            loader=jinja2.PackageLoader("nccllog", "render/templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=True,
            finalize=_finalize,
        )
        _ENV.filters["clean"] = clean
    return _ENV


def _finalize(value: object) -> object:
    """Every ``{{ }}`` of the template passes here before autoescaping: a string from a log or a
    file name that a helper above forgot to clean still shows its control, escape and bidi
    characters as visible escapes (cleaning is idempotent, so cleaned text is unchanged)."""
    if isinstance(value, Markup):  # a macro's output: the template's own markup, already escaped
        return value
    return clean(value, newlines=True) if isinstance(value, str) else value


# ----------------------------------------------------------------------------------------------
# Timeline swimlanes


@dataclass
class Lane:
    label: str
    sub: str
    ranks: frozenset[int]
    hosts: frozenset[str] = frozenset()
    culprit: bool = False
    odd: bool = False
    marks: dict[tuple[int, str], list[TimelineEntry]] = field(default_factory=dict)
    last_heard: list[datetime] = field(default_factory=list)


def _lanes(incident: Incident) -> tuple[list[Lane], str]:
    """The swimlanes and what one lane stands for ("rank", "host" or "group")."""
    culprits = set(incident.verdict.culprit_ranks)
    culprit_hosts = set(incident.verdict.culprit_hosts)
    ranks = {r.rank: r for r in incident.ranks}
    tl_ranks = {e.rank for e in incident.timeline if e.rank is not None}
    all_ranks = sorted(set(ranks) | tl_ranks)
    if len(all_ranks) <= MAX_LANES:
        lanes = [
            Lane(
                f"rank {r}",
                clean(ranks[r].host, 40) if r in ranks and ranks[r].host else "",
                frozenset({r}),
                frozenset({h for h in (ranks[r].host if r in ranks else None,) if h}),
                culprit=r in culprits,
            )
            for r in all_ranks
        ]
        return lanes, "rank"
    by_host: dict[str, set[int]] = defaultdict(set)
    for r in incident.ranks:
        if r.host:
            by_host[r.host].add(r.rank)
    for e in incident.timeline:
        if e.host and e.rank is not None:
            by_host[e.host].add(e.rank)
    if by_host and len(by_host) <= MAX_LANES:
        lanes = [
            Lane(
                clean(h, 28),
                "ranks " + view.rank_ranges(rs, 3),
                frozenset(rs),
                frozenset({h}),
                culprit=h in culprit_hosts or bool(rs & culprits),
            )
            for h, rs in sorted(by_host.items(), key=lambda kv: (min(kv[1]), kv[0]))
        ]
        return lanes, "host"
    rows, _folded = view.rank_rows(incident, MAX_LANES - 1)
    lanes = []
    for row in rows:
        if row.group:
            label = f"{len(row.ranks)} ranks"
            sub = clean(row.info.status or "mixed", 24) if row.info.rank >= 0 else "other ranks"
        else:
            label = f"rank {row.ranks[0]}"
            sub = clean(row.info.host, 28) if row.info.host else ""
        lanes.append(Lane(label, sub, frozenset(row.ranks), culprit=row.culprit, odd=row.outlier))
    covered = {r for lane in lanes for r in lane.ranks}
    rest = sorted(set(all_ranks) - covered)
    if rest:
        lanes.append(Lane(f"{len(rest)} ranks", "timeline only", frozenset(rest)))
    return lanes, "group"


def _nice_step(span: float, target: int = 8) -> float:
    raw = span / target
    steps = [
        0.001,
        0.002,
        0.005,
        0.01,
        0.02,
        0.05,
        0.1,
        0.2,
        0.5,
        1,
        2,
        5,
        10,
        15,
        30,
        60,
        120,
        300,
        600,
        900,
    ]
    steps += [1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800]
    return next((s for s in steps if s >= raw), steps[-1] * math.ceil(raw / steps[-1]))


def timeline_svg(incident: Incident, anchors: set[str] | None = None) -> dict[str, Any] | None:
    """Plain data for the SVG: lanes with their marks (deduplicated per pixel), axis ticks, the
    failure line. None when no entry has a time."""
    timed = [(view.parse_iso(e.time), e) for e in incident.timeline]
    points = [(t, e) for t, e in timed if t is not None]
    untimed = len(timed) - len(points)
    if not points:
        return None
    lanes, mode = _lanes(incident)
    by_rank: dict[int, Lane] = {}
    by_host: dict[str, Lane] = {}
    for lane in lanes:
        for r in lane.ranks:
            by_rank.setdefault(r, lane)
        for h in lane.hosts:
            by_host.setdefault(h, lane)
    loose = Lane("no rank", "lines without a rank", frozenset())
    t_min = min(t for t, _ in points)
    t_max = max(t for t, _ in points)
    heard: dict[int, datetime] = {}
    for info in incident.ranks:
        t = view.parse_iso(info.last_time)
        if t is not None:
            heard[info.rank] = t
            t_min, t_max = min(t_min, t), max(t_max, t)
    span = max((t_max - t_min).total_seconds(), 1.0)
    pad = span * 0.03
    x0, x1 = LABEL_W + 10, SVG_WIDTH - 20

    def x_of(t: datetime) -> float:
        return round(x0 + ((t - t_min).total_seconds() + pad) / (span + 2 * pad) * (x1 - x0), 1)

    for t, e in points:
        found = by_rank.get(e.rank) if e.rank is not None else None
        if found is None and e.host:
            found = by_host.get(e.host)
        lane = found or loose
        key = (int(x_of(t) // 3), e.severity)
        lane.marks.setdefault(key, []).append(e)
    for r, t in heard.items():
        if r in by_rank:
            by_rank[r].last_heard.append(t)
    if loose.marks:
        lanes.append(loose)
    zero = view.failure_time(incident)
    out_lanes = []
    for i, lane in enumerate(lanes):
        y = 34 + i * LANE_H
        marks = []
        for (_px, sev), entries in sorted(
            lane.marks.items(), key=lambda kv: (view.SEVERITY_ORDER.get(kv[0][1], 0), kv[0][0])
        ):
            first = entries[0]
            t = view.parse_iso(first.time)
            assert t is not None
            who = view.TimelineRow(tuple(entries)).who(4)
            title = f"{view.short_time(first.time)} {who}"
            if len(entries) > 1:
                title += f" (×{len(entries)})"
            title += f"\n{first.pattern}\n{clean(first.text, 300)}\n{first.source}:{first.line}"
            marks.append(
                {
                    "x": x_of(t),
                    "r": SEVERITY_R.get(sev, 3.0) + (1.0 if len(entries) > 1 else 0.0),
                    "color": SEVERITY_COLOR.get(sev, "#8a94a6"),
                    "title": title,
                    "href": _href(first.source, first.line, anchors),
                }
            )
        band = None
        if lane.last_heard:
            lo, hi = min(lane.last_heard), max(lane.last_heard)
            band = {"x": x_of(lo), "x2": x_of(hi), "title": f"last heard {view.short_time(lo.isoformat())}"}
        times = [view.parse_iso(e.time) for es in lane.marks.values() for e in es]
        known = [t for t in times if t is not None] + lane.last_heard
        track = {"x": x_of(min(known)), "x2": x_of(max(known))} if known else None
        out_lanes.append(
            {
                "y": y,
                "label": lane.label,
                "sub": charts.fit_sub(lane.sub, lane.label, LABEL_W),
                "full": f"{lane.label} {lane.sub}",
                "culprit": lane.culprit,
                "odd": lane.odd,
                "marks": marks,
                "band": band,
                "track": track,
            }
        )
    height = 34 + len(out_lanes) * LANE_H + 30
    step = _nice_step(span + 2 * pad)
    ticks = []
    base = zero or t_min
    first_tick = math.ceil(((t_min - base).total_seconds() - pad) / step) * step
    k = first_tick
    while k <= (t_max - base).total_seconds() + pad:
        t = base + timedelta(seconds=k)
        ticks.append(
            {"x": x_of(t), "label": view.offset_label(k) if zero else view.short_time(t.isoformat())}
        )
        k += step
        if len(ticks) > 30:
            break
    fail_x = x_of(zero) if zero is not None and t_min <= zero <= t_max else None
    return {
        "width": SVG_WIDTH,
        "height": height,
        "lanes": out_lanes,
        "ticks": ticks,
        "axis_y": height - 24,
        "fail_x": fail_x,
        "mode": mode,
        "x0": x0,
        "x1": x1,
        "label_w": LABEL_W,
        "lane_h": LANE_H,
        "start": view.short_time(t_min.isoformat(), with_date=True),
        "end": view.short_time(t_max.isoformat(), with_date=True),
        "untimed": untimed,
        "relative": zero is not None,
    }


# ----------------------------------------------------------------------------------------------
# Tables


def _href(source: str, line: int, anchors: set[str] | None) -> str | None:
    """``#anchor`` of ``source:line`` when the report holds that line (``anchors=None``: always)."""
    a = view.anchor_id(source, line)
    return "#" + a if anchors is None or a in anchors else None


def _rank_row(
    info: RankInfo,
    culprit: bool,
    outlier: bool,
    ranks: tuple[int, ...] = (),
    hosts: tuple[str, ...] = (),
    anchors: set[str] | None = None,
) -> dict[str, Any]:
    group = len(ranks) > 1
    return {
        "label": (f"{len(ranks)} ranks: " + view.rank_ranges(ranks, 8)) if group else str(info.rank),
        "group": group,
        "culprit": culprit,
        "outlier": outlier,
        "host": view.hosts_label(hosts, 1) if group else clean(info.host, 60),
        "local_rank": "" if group or info.local_rank is None else info.local_rank,
        "pids": "" if group else ", ".join(str(p) for p in info.pids[:4]),
        "status": clean(info.status, 60) if info.rank >= 0 else "(mixed)",
        "progress": view.progress_label(info) if info.rank >= 0 else "-",
        "last_time": view.short_time(info.last_time) if info.rank >= 0 else "-",
        "lines": "" if group else info.lines,
        "first_error": (
            {
                "pattern": info.first_error.pattern,
                "where": f"{info.first_error.source}:{info.first_error.line}",
                "href": _href(info.first_error.source, info.first_error.line, anchors),
                "text": clean(info.first_error.text, 400),
            }
            if info.first_error is not None and info.rank >= 0
            else None
        ),
    }


def _context(incident: Incident) -> dict[str, Any]:
    v = incident.verdict
    ex, ex_hidden = view.excerpts(incident)
    anchors = {view.anchor_id(e.source, line.line) for e in ex for line in e.lines}

    def link(source: str, line: int) -> str | None:
        a = view.anchor_id(source, line)
        return "#" + a if a in anchors else None

    context = charts.evidence_context(incident, v.evidence)
    evidence = [
        {
            "id": f"ev-{k + 1}",
            "context": context[k],
            "where": f"{e.source}:{e.line}",
            "href": link(e.source, e.line),
            "rank": e.rank,
            "host": clean(e.host, 80),
            "time": view.short_time(e.time, with_date=True) if e.time else "",
            "text": clean(e.text, 4000),
            "note": clean(e.note, 500),
        }
        for k, e in enumerate(v.evidence)
    ]
    hypotheses = [
        {
            "category": h.category,
            "title": view.CATEGORY_TITLES.get(h.category, h.category),
            "confidence": h.confidence,
            "score": f"{h.score:.2f}",
            "ranks": view.rank_ranges(h.culprit_ranks, 8),
            "hosts": ", ".join(clean(x, 60) for x in sorted(h.culprit_hosts)[:6]),
            "summary": clean(h.summary, 1000),
            "rules_in": [clean(x, 400) for x in h.rules_in],
            "rules_out": [clean(x, 400) for x in h.rules_out],
            "evidence": [
                {"where": f"{e.source}:{e.line}", "href": link(e.source, e.line), "text": clean(e.text, 400)}
                for e in h.evidence[:6]
            ],
        }
        for h in incident.hypotheses
        if h != v
    ]
    rows, before, after = view.timeline_window(incident, before=6, after=12)
    zero = view.failure_time(incident)
    with_date = view.spans_days(r.first.time for r in rows)
    timeline_rows = [
        {
            "time": view.short_time(r.first.time, with_date),
            "rel": view.relative(r.first.time, zero),
            "who": r.who(6),
            "count": len(r.entries),
            "severity": r.severity,
            "anchor": r.anchor,
            "pattern": r.first.pattern,
            "text": clean(r.first.text, 600),
            "where": f"{r.first.source}:{r.first.line}",
            "href": link(r.first.source, r.first.line),
        }
        for r in rows
    ]
    culprits = set(v.culprit_ranks)
    rank_rows, folded = view.rank_rows(incident, MAX_RANK_ROWS)
    ranks_view = [_rank_row(r.info, r.culprit, r.outlier, r.ranks, r.hosts, anchors) for r in rank_rows]
    full_ranks = (
        [
            _rank_row(r, r.rank in culprits, False, anchors=anchors)
            for r in sorted(incident.ranks, key=lambda r: r.rank)
        ]
        if folded and len(incident.ranks) <= FULL_RANK_TABLE_LIMIT
        else []
    )
    grids = []
    fold = len(incident.ranks_seen) > 32 or len({r for c in incident.collectives for r in c.expected}) > 32
    for g in view.collective_grids(incident, max_seqs=16, max_rows=24 if fold else 10_000):
        rows_out = []
        for row in g.rows if fold else _unfold(g):
            rows_out.append(
                {
                    "label": (f"{len(row.ranks)} ranks: " if len(row.ranks) > 1 else "rank ")
                    + view.rank_ranges(row.ranks, 4),
                    "cells": list(row.cells),
                    "odd": row.odd,
                    "culprit": bool(set(row.ranks) & culprits),
                }
            )
        grids.append(
            {
                "pg": clean(g.pg, 60),
                "seqs": list(g.seqs),
                "ops": [clean(o, 24) for o in g.ops],
                "rows": rows_out,
                "hidden": g.hidden_seqs,
                "notes": [clean(n, 300) for n in g.notes],
            }
        )
    skews, skews_hidden = charts.skew(incident)
    env = incident.environment
    counts = view.finding_counts(incident)
    c = incident.coverage
    return {
        "version": __version__,
        "title": view.CATEGORY_TITLES.get(v.category, v.category),
        "category": v.category,
        "mixed_input": clean(incident.mixed_input, 1000),
        "confidence": v.confidence,
        "culprit": view.culprit_line(incident),
        "has_culprit": bool(v.culprit_ranks or v.culprit_hosts),
        "summary": clean(v.summary, 2000),
        "ranks_seen": view.ranks_seen_line(incident),
        "rules_in": [clean(x, 400) for x in v.rules_in],
        "rules_out": [clean(x, 400) for x in v.rules_out],
        "evidence": evidence,
        "remediation": [clean(x, 600) for x in view.remediation(incident)],
        "collect_next_time": [clean(x, 300) for x in v.collect_next_time],
        "advice": [
            {
                "title": clean(a.title, 200),
                "why": clean(a.why, 600),
                "steps": [clean(s, 400) for s in a.steps],
                "applies_to": clean(a.applies_to, 100),
            }
            for a in incident.advice
        ],
        "hypotheses": hypotheses,
        "svg": timeline_svg(incident, anchors),
        "last_heard": charts.last_heard(incident),
        "gantt": charts.stuck_gantt(incident),
        "skews": skews,
        "skews_hidden": skews_hidden,
        "timeline": timeline_rows,
        "timeline_before": before,
        "timeline_after": after,
        "grids": grids,
        "ranks": ranks_view,
        "ranks_folded": folded,
        "full_ranks": full_ranks,
        "rank_count": len(incident.ranks),
        "missing": view.rank_ranges(incident.ranks_missing, 20),
        "findings": [
            {
                "pattern": pc.pattern,
                "severity": pc.severity,
                "count": pc.count,
                "ranks": view.rank_ranges(pc.ranks, 6) or "-",
                "where": f"{pc.example.source}:{pc.example.line}",
                "href": link(pc.example.source, pc.example.line),
                "text": clean(pc.example.text, 300),
            }
            for pc in counts[:40]
        ],
        "findings_hidden": max(len(counts) - 40, 0),
        "env": {
            "frameworks": [clean(x, 60) for x in env.frameworks],
            "launcher": clean(env.launcher, 60),
            "versions": [(clean(k, 40), clean(", ".join(vs), 200)) for k, vs in sorted(env.versions.items())],
            "settings": [(clean(k, 80), clean(val, 300)) for k, val in sorted(env.settings.items())],
            "findings": [
                {
                    "name": clean(sf.name, 80),
                    "value": clean(sf.value, 200),
                    "status": clean(sf.status, 20),
                    "message": clean(sf.message, 400),
                    "replacement": clean(sf.replacement, 200),
                }
                for sf in env.setting_findings
            ],
        },
        "host_offsets": [
            (clean(h, 60), f"{off:+.3f} s")
            for h, off in sorted(incident.host_offsets.items())
            if abs(off) >= 0.0005
        ],
        "excerpts": [
            {
                "source": e.source,
                "ranks": view.rank_ranges(e.ranks, 6),
                "hidden": e.hidden,
                "open": k < 2 and any(line.evidence for line in e.lines),
                "lines": [
                    {
                        "id": view.anchor_id(e.source, line.line),
                        "no": line.line,
                        "text": clean(line.text, 2000),
                        "severity": line.severity,
                        "pattern": line.pattern,
                        "evidence": line.evidence,
                        "gap": line.gap_before,
                    }
                    for line in e.lines
                ],
            }
            for k, e in enumerate(ex)
        ],
        "excerpts_hidden": ex_hidden,
        "coverage": {
            "line": view.coverage_line(incident),
            "files": c.files,
            "lines": c.lines,
            "matched": c.matched,
            "unattributed": c.unattributed,
            "bytes": c.bytes_read,
            "skipped": [
                {"source": clean(s.source, 300), "lines": clean(s.lines, 40), "reason": clean(s.reason, 300)}
                for s in c.skipped
            ],
            "notes": [clean(n, 400) for n in c.notes],
        },
        "templates": [
            {"template": clean(t, 300), "count": n, "example": clean(ex_, 200)}
            for t, n, ex_ in incident.unmatched_templates[:25]
        ],
        "inputs": [clean(i, 300) for i in incident.inputs],
        "redacted": incident.redacted,
    }


def _unfold(g: view.Grid) -> list[view.GridRow]:
    """One row per rank (small jobs): each rank keeps the odd mark of its folded row."""
    rows = [view.GridRow((r,), row.cells, row.odd) for row in g.rows for r in row.ranks]
    return sorted(rows, key=lambda r: r.ranks[0])


NAV = (
    ("verdict", "Verdict", "title"),
    ("evidence", "Evidence", "evidence"),
    ("charts", "Who stopped", "charts"),
    ("todo", "What to do", "todo"),
    ("timeline", "Timeline", "title"),
    ("collectives", "Collectives", "grids"),
    ("ranks", "Ranks", "ranks"),
    ("hypotheses", "Alternatives", "hypotheses"),
    ("findings", "Findings", "findings"),
    ("environment", "Environment", "title"),
    ("coverage", "Coverage", "title"),
    ("excerpts", "Raw lines", "excerpts"),
)


def _nav(ctx: dict[str, Any]) -> list[tuple[str, str]]:
    """The section links at the top: the sections this report has, in page order."""
    ctx = {
        **ctx,
        "charts": ctx["last_heard"] or ctx["gantt"] or ctx["skews"],
        "todo": ctx["remediation"] or ctx["advice"] or ctx["collect_next_time"],
    }
    return [(id_, name) for id_, name, key in NAV if ctx[key]]


def render_html(incident: Incident) -> str:
    ctx = _context(incident)
    ctx["nav"] = _nav(ctx)
    ctx["has_context"] = any(len(e["context"]) > 1 for e in ctx["evidence"])
    return _env().get_template("report.html.j2").render(**ctx)
