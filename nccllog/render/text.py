"""Terminal renderer (rich): verdict panel, key evidence, the timeline around the failure, a
per-rank table that folds to the outliers for large jobs, other hypotheses, remediation,
environment, and a coverage footer.

Log text only ever enters rich as ``Text`` objects built from ``clean`` (nccllog.text_safety:
control, escape and bidi characters made visible), never as markup strings, so ``[bold red]`` in a
log is shown as is; a last pass over the rendered report escapes any control character that is
not rich's own colour code, so no escape sequence from a log reaches the terminal. Output is deterministic for a given width and
colour setting (no clock, no environment lookups).
"""

from __future__ import annotations

import io
import re
from typing import Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from nccllog.model import Incident
from nccllog.render import layout, proof, view
from nccllog.text_safety import UNSAFE_CHARS, clean

DEFAULT_WIDTH = 100
SEVERITY_STYLE = {"critical": "bold red", "error": "red", "warning": "yellow", "info": "dim"}
CONFIDENCE_STYLE = {"high": "bold green", "medium": "yellow", "low": "red"}
MAX_RANK_ROWS = 10
MAX_EVIDENCE = 4
# rich's own colour codes (SGR), or any character a terminal would act on (the newline aside).
_SGR_OR_UNSAFE = re.compile(f"\x1b\\[[0-9;]*m|(?!\n)[{UNSAFE_CHARS}]")


def _t(text: str | None, style: str = "", limit: int | None = None) -> Text:
    return Text(clean(text, limit), style=style)


def _heading(title: str, note: str = "") -> Text:
    out = Text(title, style="bold")
    if note:
        out.append(f"  {note}", style="dim")
    return out


def _table(columns: list[tuple[str, dict[str, Any]]]) -> Table:
    """A borderless table that rich sizes itself: short columns keep their words whole
    (``no_wrap``), long ones take a share of the rest (``ratio``) and wrap (``fold``) rather than
    being cut, so a status or a message is never truncated at any width."""
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), show_edge=False, header_style="bold dim", expand=True)
    for name, kw in columns:
        table.add_column(name, **kw)
    return table


_SHORT: dict[str, Any] = {"no_wrap": True}


def _verdict(incident: Incident) -> Panel:
    v = incident.verdict
    body = Text()
    body.append(view.CATEGORY_TITLES.get(v.category, v.category), style="bold")
    body.append("\n")
    body.append("Culprit: ", style="dim")
    body.append(
        clean(view.culprit_line(incident)), style="bold red" if v.culprit_ranks or v.culprit_hosts else ""
    )
    body.append("   Confidence: ", style="dim")
    body.append(v.confidence, style=CONFIDENCE_STYLE.get(v.confidence, ""))
    body.append("\n")
    body.append(clean(view.ranks_seen_line(incident)), style="dim")
    if v.summary:
        body.append("\n\n")
        body.append(clean(v.summary, 600))
    reasons = [(Text("+", style="green"), _t(r, limit=300)) for r in v.rules_in[:4]]
    reasons += [(Text("-", style="dim"), _t(r, "dim", limit=300)) for r in v.rules_out[:3]]
    content: RenderableType = Group(body, Text(""), _bullets(reasons)) if reasons else body
    title = Text.assemble(
        ("nccllog ", "bold"), (v.category, "bold red" if v.category != "no_failure" else "bold green")
    )
    if incident.redacted:
        title.append("  (redacted)", style="dim")
    return Panel(
        content,
        title=title,
        title_align="left",
        box=box.ROUNDED,
        border_style="red" if v.culprit_ranks else "",
    )


def _evidence(incident: Incident, width: int) -> RenderableType | None:
    """The proof: how the culprits differ from the rest (side by side), then the culprits' own
    line, then one representative of the other ranks' alike lines with how many it stands for.
    Each line under a one-line header (where, rank, time), the log text at full width."""
    lines = proof.proof(incident)
    if not lines:
        return None
    items: list[RenderableType] = []
    side = proof.contrast(incident)
    if side:
        items.append(Padding(_t(side, "bold", limit=400), (0, 0, 0, 0)))
    for p in lines[:MAX_EVIDENCE]:
        e = p.evidence
        where = clean(f"{e.source}:{e.line}", 1000)
        room = max(width - 24, 30)
        if len(where) > room:  # keep the file name and line number; cut the front of the path
            where = "…" + where[-(room - 1) :]
        head = Text(where, style="cyan")
        if e.rank is not None:
            head.append(f"  rank {e.rank}", style="bold red" if p.culprit else "bold")
        if e.time:
            head.append(f"  {view.short_time(e.time)}", style="dim")
        if p.count > 1:
            head.append(f"  ×{p.count} alike: ranks {view.rank_ranges(p.ranks, 8)}", style="bold")
        body = _t(e.text, limit=max(width * 3, 240))
        if e.note:
            body.append("\n")
            body.append(clean(e.note, 400), style="italic dim")
        body.overflow = "fold"
        items.append(Group(head, Padding(body, (0, 0, 0, 2))))
    more = len(lines) - MAX_EVIDENCE
    note = f"{view.plural(more, 'more line')} in --format html/json" if more > 0 else ""
    return Group(_heading("Key evidence", note), *items)


def _timeline(incident: Incident, width: int) -> RenderableType | None:
    rows, skipped_before, skipped_after = layout.timeline_rows(incident, before=4, after=7)
    if not rows:
        return None
    zero = view.failure_time(incident)
    with_date = view.spans_days(r.first.time for r in rows)
    bodies = layout.messages(incident, ((r.first.source, r.first.line) for r in rows))
    table = _table(
        [
            ("time", _SHORT),
            ("Δ", {"justify": "right", "style": "dim", "no_wrap": True}),
            ("who", {"ratio": 1, "overflow": "fold", "min_width": 6}),
            ("event", {"ratio": 4, "overflow": "fold"}),
        ]
    )
    for r in rows:
        style = SEVERITY_STYLE.get(r.severity, "")
        marker = "▶ " if r.anchor else ""
        event = Text(marker, style="bold red" if r.anchor else "")
        count = len(r.entries)
        if count > 1:
            event.append(
                f"×{view.plural(count, 'line') if len(r.ranks) < 2 else view.plural(len(r.ranks), 'rank')}: ",
                style="bold",
            )
        event.append(clean(layout.row_message(r, bodies), 300), style=style)
        table.add_row(
            Text(view.short_time(r.first.time, with_date)),
            Text(view.relative(r.first.time, zero)),
            Text(clean(r.who(4), 60)),
            event,
        )
    notes = []
    if skipped_before:
        notes.append(f"{skipped_before} earlier")
    if skipped_after:
        notes.append(f"{skipped_after} later")
    note = ("(" + ", ".join(notes) + " rows not shown)") if notes else ""
    return Group(_heading("Timeline around the failure", note), table)


def _ranks(incident: Incident, width: int) -> RenderableType | None:
    if not incident.ranks:
        return None
    rows, folded = view.rank_rows(incident, MAX_RANK_ROWS)
    firsts = [r.info.first_error for r in rows if r.info.rank >= 0 and r.info.first_error is not None]
    bodies = layout.messages(incident, ((f.source, f.line) for f in firsts))
    table = _table(
        [
            ("rank", {"no_wrap": True, "max_width": 28, "overflow": "fold"}),
            ("host", {"ratio": 1, "overflow": "fold"}),
            ("status", {"ratio": 2, "overflow": "fold", "min_width": 16}),
            ("progress", {"overflow": "fold", "min_width": 10}),
            ("last heard", _SHORT),
            ("first error", {"ratio": 2, "no_wrap": True, "overflow": "ellipsis"}),
        ]
    )
    for row in rows:
        info = row.info
        if row.group:
            label = Text(f"{len(row.ranks)} ranks ", style="bold")
            label.append(clean(row.label), style="dim")
        else:
            label = Text(row.label, style="bold red" if row.culprit else ("yellow" if row.outlier else ""))
            if row.culprit:
                label.append(" ◀", style="bold red")
        table.add_row(
            label,
            Text(view.hosts_label(row.hosts)),
            Text(clean(info.status or "-", 120), style="red" if row.culprit else ""),
            Text(view.progress_label(info) if info.rank >= 0 else "-"),
            Text(view.short_time(info.last_time) if info.rank >= 0 else "-"),
            Text(
                clean(layout.first_error_text(info.first_error, bodies), 160) if info.rank >= 0 else "-",
                style="dim",
            ),
        )
    note = view.ranks_seen_line(incident)
    if folded:
        note += f"; outliers listed, {view.plural(folded, 'rank')} folded into groups"
    legend = Text(" · ".join(layout.rank_legend(incident, rows)), style="dim")
    return Group(_heading("Ranks", clean(note)), table, legend)


def _bullets(items: list[tuple[Text, Text]]) -> Table:
    """Marker + text rows with a hanging indent (wrapped lines stay right of the marker)."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True, justify="right")
    grid.add_column(overflow="fold")
    for marker, body in items:
        grid.add_row(Text("  ").append_text(marker), body)
    return grid


def _hypotheses(incident: Incident) -> RenderableType | None:
    others = [h for h in incident.hypotheses if h != incident.verdict]
    if not others:
        return None
    items = []
    for h in others[:4]:
        body = Text(h.category, style="bold")
        body.append(f" ({h.confidence})", style=CONFIDENCE_STYLE.get(h.confidence, ""))
        if h.culprit_ranks:
            body.append(f" ranks {view.rank_ranges(h.culprit_ranks, 6)}")
        if h.summary:
            body.append(": ")
            body.append(clean(h.summary, 240), style="dim")
        items.append((Text("•"), body))
    return Group(_heading("Other explanations considered"), _bullets(items))


def _todo(incident: Incident) -> RenderableType | None:
    items: list[tuple[Text, Text]] = []
    for i, step in enumerate(view.remediation(incident)[:6], 1):
        items.append((Text(f"{i}.", style="bold"), _t(step, limit=400)))
    for a in incident.advice:
        body = Text(clean(a.title, 200), style="bold")
        if a.why:
            body.append(" - ")
            body.append(clean(a.why, 600), style="dim")
        if a.steps:  # the first concrete step (command or variable), not only the title
            body.append("\n→ " + clean(a.steps[0], 600))
        items.append((Text("•", style="bold"), body))
    collect = incident.verdict.collect_next_time
    if collect:
        items.append(
            (
                Text("+", style="dim"),
                Text("Next time also collect: " + clean("; ".join(collect[:4]), 400), style="dim"),
            )
        )
    if not items:
        return None
    return Group(_heading("What to do"), _bullets(items))


def _environment(incident: Incident) -> RenderableType | None:
    env = incident.environment
    items: list[tuple[Text, Text]] = []
    if env.versions:
        items.append(
            (
                Text("versions", style="dim"),
                _t(", ".join(f"{k} {'/'.join(v)}" for k, v in sorted(env.versions.items())), limit=400),
            )
        )
    if env.frameworks or env.launcher:
        bits = [*env.frameworks, *([f"launcher {env.launcher}"] if env.launcher else [])]
        items.append((Text("framework", style="dim"), _t(", ".join(bits), limit=200)))
    if env.settings:
        items.append(
            (
                Text("settings", style="dim"),
                _t(" ".join(f"{k}={v}" for k, v in sorted(env.settings.items())), limit=600),
            )
        )
    for sf in env.setting_findings[:5]:
        style = "dim" if sf.status == "ok" else "yellow"
        items.append(
            (Text(sf.status, style=style), _t(f"{sf.name}={sf.value}: {sf.message}", style, limit=300))
        )
    if not items:
        return None
    return Group(_heading("Environment seen"), _bullets(items))


def _coverage(incident: Incident) -> RenderableType:
    c = incident.coverage
    out = Text()
    out.append(clean(view.coverage_line(incident)), style="dim")
    for s in c.skipped[:5]:
        out.append("\n  skipped ", style="dim")
        out.append(clean(s.source, 80))
        if s.lines:
            out.append(clean(f" lines {s.lines}", 40))
        out.append(": ", style="dim")
        out.append(clean(s.reason, 400), style="dim")
    if len(c.skipped) > 5:
        out.append(f"\n  … {len(c.skipped) - 5} more skipped (see --format json)", style="dim")
    for note in c.notes[:5]:
        out.append("\n  note: ", style="dim")
        out.append(clean(note, 1000), style="dim")
    return Group(_heading("Coverage"), out)


def render_text(incident: Incident, *, color: bool = False, width: int | None = None) -> str:
    """The terminal report. ``color`` adds ANSI styling (the CLI turns it on for terminals that
    want it); without it the output is plain text."""
    width = width or DEFAULT_WIDTH
    buf = io.StringIO()
    console = Console(
        file=buf,
        width=width,
        height=50,
        color_system="standard" if color else None,
        force_terminal=color,
        force_jupyter=False,
        force_interactive=False,
        no_color=not color,
        markup=False,
        emoji=False,
        highlight=False,
        legacy_windows=False,
        soft_wrap=False,
        safe_box=True,
        _environ={},
    )
    mixed = Text("Mixed input: ", style="bold yellow").append(
        clean(incident.mixed_input, 1000), style="yellow"
    )
    parts: list[RenderableType | None] = [
        mixed if incident.mixed_input else None,
        _verdict(incident),
        _evidence(incident, width),
        _timeline(incident, width),
        _ranks(incident, width),
        _hypotheses(incident),
        _todo(incident),
        _environment(incident),
        _coverage(incident),
    ]
    for i, part in enumerate(p for p in parts if p is not None):
        if i:
            console.print()
        console.print(part)
    out = buf.getvalue()
    if not color:  # rich pads table rows to the width; plain text has no trailing blanks
        out = "\n".join(line.rstrip() for line in out.split("\n"))
    return _SGR_OR_UNSAFE.sub(lambda m: _keep_sgr(m.group(0), color), out)


def _keep_sgr(found: str, color: bool) -> str:
    """rich's colour codes stay when colour is on; everything else is shown as an escape."""
    return found if color and len(found) > 1 else clean(found)
