"""Renderers: every one reads the same frozen Incident and re-parses nothing.

``render(incident, fmt)`` gives ``text`` (the terminal report, plain unless ``color``),
``markdown`` (for tickets and chats), ``html`` (one self-contained file) or ``json`` (the versioned
contract of docs/json.md). With ``redact=True`` the incident is redacted first (nccllog.redact).
Every format is deterministic: the same incident gives byte-identical output.
"""

from __future__ import annotations

from nccllog.errors import UsageError
from nccllog.model import Incident

FORMATS = ("text", "markdown", "html", "json")


def render(
    incident: Incident,
    fmt: str = "text",
    *,
    redact: bool = False,
    color: bool = False,
    width: int | None = None,
) -> str:
    """Render ``incident`` as ``text``, ``markdown``, ``html`` or ``json``.

    ``color`` and ``width`` apply to ``text`` only (ANSI styling and the line width, default 100).
    """
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if redact and not incident.redacted:
        from nccllog.redact import redact as _redact

        incident = _redact(incident)
    if fmt == "json":
        from nccllog.render.json import render_json

        return render_json(incident)
    if fmt == "markdown":
        from nccllog.render.markdown import render_markdown

        return render_markdown(incident)
    if fmt == "html":
        from nccllog.render.html import render_html

        return render_html(incident)
    from nccllog.render.text import render_text

    return render_text(incident, color=color, width=width)
