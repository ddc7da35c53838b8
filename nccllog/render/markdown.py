"""Markdown renderer: a short report to paste into a ticket or a chat.

Verdict, the key evidence in fenced blocks, a short timeline table, the outlier ranks, versions
and NCCL settings seen, and what to do; it stays short for 1000 ranks (everything is folded the
way the terminal report folds it). Log text can never break out: evidence goes in fences longer
than any backtick run it contains, and text in tables goes in code spans of the same kind with
``|`` escaped; text outside code is escaped (markdown punctuation, ``<``, ``&``, ``@`` mentions)
and its web addresses made inert (``https[:]//…``, ``www[.]…``: a tracker links them by itself).
Every string is first cleaned (nccllog.text_safety): control, escape and bidi characters shown as
visible escapes.
"""

from __future__ import annotations

import re

from nccllog.model import Incident
from nccllog.render import layout, proof, view
from nccllog.text_safety import clean, defang

MAX_EVIDENCE = 3
MAX_RANK_ROWS = 8
_ALWAYS = re.compile(r"([\\`*\[\]|~])")
_EDGE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
_ENTITY = re.compile(r"&(?=#?[A-Za-z0-9]+;)")
_NUMBERED = re.compile(r"^(\s*\d+)([.)])")
_LINE_START = re.compile(r"^(\s*)([#>+=-])")


def esc(text: str | None, limit: int | None = None, line_start: bool = False) -> str:
    """Text for markdown prose, made inert (no emphasis, links, autolinks, code, headings, lists,
    HTML, entities or @-mentions) while staying readable where markdown is shown raw (few escapes).
    Web addresses are defanged (``https[:]//``, ``www[.]``) before the brackets are escaped."""
    out = defang(clean(text, limit))
    out = _ENTITY.sub("&amp;", out).replace("<", "&lt;")
    out = _ALWAYS.sub(r"\\\1", out)
    out = _EDGE_UNDERSCORE.sub(r"\\_", out)
    if line_start:
        out = _LINE_START.sub(lambda m: m.group(1) + "\\" + m.group(2), out)
        out = _NUMBERED.sub(lambda m: m.group(1) + "\\" + m.group(2), out)
    # "@name" would notify someone on GitHub/Slack; a zero-width joiner breaks the mention.
    return out.replace("@", "@\u200d")


def code(text: str | None, limit: int | None = 160, in_table: bool = True) -> str:
    """An inline code span that holds ``text`` verbatim (a backtick run longer than any inside)."""
    out = clean(text, limit)
    if in_table:
        out = out.replace("|", "\\|")
    if not out:
        return ""
    run = max((len(m) for m in re.findall(r"`+", out)), default=0)
    tick = "`" * (run + 1)
    pad = (
        " " if out.startswith("`") or out.endswith("`") or (out.startswith(" ") and out.endswith(" ")) else ""
    )
    return f"{tick}{pad}{out}{pad}{tick}"


def fence(lines: list[str], info: str = "text") -> str:
    """A fenced block that its content cannot close: the fence is longer than any backtick run."""
    body = "\n".join(lines)
    run = max((len(m) for m in re.findall(r"`+", body)), default=0)
    tick = "`" * max(3, run + 1)
    return f"{tick}{info}\n{body}\n{tick}"


def render_markdown(incident: Incident) -> str:
    v = incident.verdict
    out: list[str] = []

    def cell(text: str | None, limit: int | None = None) -> str:
        return esc(text, limit, line_start=False)

    title = view.CATEGORY_TITLES.get(v.category, v.category)
    out.append(f"### nccllog: {esc(title)}")
    out.append("")
    if incident.mixed_input:
        out += [f"> **Mixed input:** {esc(incident.mixed_input, 1000)}", ""]
    facts = [
        f"**Verdict:** `{v.category}`",
        f"**Culprit:** {esc(view.culprit_line(incident))}",
        f"**Confidence:** {v.confidence}",
        esc(view.ranks_seen_line(incident)),
    ]
    out.append(" · ".join(facts))
    if v.summary:
        out += ["", esc(v.summary, 800, line_start=True)]
    if v.rules_in or v.rules_out:
        out.append("")
        out += [f"- **+** {esc(r, 300)}" for r in v.rules_in[:4]]
        out += [f"- **−** {esc(r, 300)}" for r in v.rules_out[:3]]

    evidence = proof.proof(incident)
    if evidence:
        out += ["", "#### Evidence", ""]
        side = proof.contrast(incident)
        if side:
            out += [f"**{esc(side, 400)}**", ""]
        for p in evidence[:MAX_EVIDENCE]:
            e = p.evidence
            where = f"{e.source}:{e.line}"
            who = f"rank {e.rank}" if e.rank is not None else "rank unknown"
            if e.host:
                who += f" on {e.host}"
            head = f"{code(where, 200, in_table=False)} ({esc(who, 120)}"
            head += f", {esc(view.short_time(e.time))})" if e.time else ")"
            if p.count > 1:
                head += f", ×{p.count} alike: ranks {esc(view.rank_ranges(p.ranks, 8))}"
            if e.note:
                head += f": {esc(e.note, 400)}"
            out += [head, "", fence([clean(e.text, 2000)]), ""]
        if len(evidence) > MAX_EVIDENCE:
            out.append(
                f"*{view.plural(len(evidence) - MAX_EVIDENCE, 'more evidence line')} in the HTML/JSON report.*"
            )
            out.append("")
        if out[-1] == "":
            out.pop()

    rows, before, after = layout.timeline_rows(incident, before=3, after=5)
    if rows:
        zero = view.failure_time(incident)
        with_date = view.spans_days(r.first.time for r in rows)
        bodies = layout.messages(incident, ((r.first.source, r.first.line) for r in rows))
        out += ["", "#### Timeline around the failure", ""]
        out += ["| time | Δ | who | event |", "|---|---:|---|---|"]
        if before:
            out.append(f"| … | | | *{view.plural(before, 'earlier row')}* |")
        for r in rows:
            n_ranks = len(r.ranks)
            count = ""
            if len(r.entries) > 1:
                count = f"×{view.plural(n_ranks, 'rank') if n_ranks > 1 else view.plural(len(r.entries), 'line')}: "
            mark = "**▶** " if r.anchor else ""
            out.append(
                f"| {cell(view.short_time(r.first.time, with_date))} | {view.relative(r.first.time, zero)} "
                f"| {cell(r.who(4), 60)} | {mark}{count}{code(layout.row_message(r, bodies), 200)} |"
            )
        if after:
            out.append(f"| … | | | *{view.plural(after, 'later row')}* |")

    if incident.ranks:
        rank_rows, folded = view.rank_rows(incident, MAX_RANK_ROWS)
        note = f" ({view.plural(folded, 'rank')} folded into groups)" if folded else ""
        out += ["", f"#### Ranks{note}", ""]
        out += ["| rank | host | status | progress | last heard |", "|---|---|---|---|---|"]
        for row in rank_rows:
            info = row.info
            label = f"{len(row.ranks)} ranks: {view.rank_ranges(row.ranks, 4)}" if row.group else row.label
            if row.culprit:
                label = f"**{label}** ◀"
            out.append(
                f"| {cell(label) if not row.culprit else label} | {cell(view.hosts_label(row.hosts), 60)} "
                f"| {cell(info.status or '-', 120)} | {cell(view.progress_label(info)) if info.rank >= 0 else '-'} "
                f"| {cell(view.short_time(info.last_time)) if info.rank >= 0 else '-'} |"
            )
        legend = layout.rank_legend(incident, rank_rows)
        if legend:
            out += ["", "<sub>" + esc(" · ".join(legend)) + "</sub>"]

    env = incident.environment
    env_lines = []
    if env.versions:
        env_lines.append(
            "- Versions: "
            + ", ".join(f"{esc(k)} {esc('/'.join(vs), 80)}" for k, vs in sorted(env.versions.items()))
        )
    if env.frameworks or env.launcher:
        bits = [*env.frameworks, *([f"launcher {env.launcher}"] if env.launcher else [])]
        env_lines.append("- Framework: " + esc(", ".join(bits), 200))
    if env.settings:
        shown = sorted(env.settings.items())[:16]
        env_lines.append(
            "- Settings: " + ", ".join(code(f"{k}={val}", 80, in_table=False) for k, val in shown)
        )
        if len(env.settings) > 16:
            env_lines[-1] += f", … ({len(env.settings) - 16} more)"
    for sf in env.setting_findings[:4]:
        env_lines.append(f"- ⚠ {code(f'{sf.name}={sf.value}', 80, in_table=False)}: {esc(sf.message, 200)}")
    if env_lines:
        out += ["", "#### Environment seen", "", *env_lines]

    steps = view.remediation(incident)
    todo = [f"{i}. {esc(s, 400)}" for i, s in enumerate(steps[:5], 1)]
    for a in incident.advice:  # whole: advice is short, and a cut step names nothing
        todo.append(f"- **{esc(a.title)}**" + (f": {esc(a.why)}" if a.why else ""))
        todo += [f"  - first step: {esc(a.steps[0])}"] if a.steps else []
    if v.collect_next_time:
        todo.append("- Next time also collect: " + "; ".join(esc(c) for c in v.collect_next_time[:4]))
    if todo:
        out += ["", "#### What to do", "", *todo]

    others = [h for h in incident.hypotheses if h != v][:3]
    if others:
        out += ["", "<details><summary>Other explanations considered</summary>", ""]
        for h in others:
            who = f" (ranks {view.rank_ranges(h.culprit_ranks, 4)})" if h.culprit_ranks else ""
            out.append(f"- `{h.category}` {h.confidence}{esc(who)}: {esc(h.summary, 200)}")
        out += ["", "</details>"]

    foot = f"nccllog · {esc(view.coverage_line(incident))}"
    if incident.coverage.skipped:
        foot += f" · skipped: {esc(incident.coverage.skipped[0].source, 80)} ({esc(incident.coverage.skipped[0].reason, 400)})"
        if len(incident.coverage.skipped) > 1:
            foot += f" and {len(incident.coverage.skipped) - 1} more"
    if incident.redacted:
        foot += " · hosts, addresses, users and secrets redacted"
    out += ["", f"<sub>{foot}</sub>"]
    return "\n".join(out) + "\n"
