"""Renderers: every one reads the same frozen Incident and re-parses nothing."""

from __future__ import annotations

from nccllog.model import Incident

FORMATS = ("text", "markdown", "html", "json")


def render(incident: Incident, fmt: str = "text") -> str:
    """Render ``incident`` as ``text`` (plain terminal text), ``markdown``, ``html`` or ``json``."""
    if fmt == "json":
        from nccllog.render.json import render_json

        return render_json(incident)
    if fmt == "text":
        from nccllog.render.text import render_text

        return render_text(incident)
    raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
