"""Redaction of an Incident before it is rendered or shared.

Host names, IPv4/IPv6 addresses, user names, e-mail addresses, secret-looking tokens and Slurm
node lists are replaced by stable aliases (``host-1``, ``ip-1``, ``user-1``, ``email-1``,
``secret-1``, ``nodes-1``) everywhere in the model. The same machine always gets the same alias,
whatever the spelling (short name or FQDN, any case, IPv4 or IPv4-mapped IPv6), so the story
still reads.

Two passes over the model. Pass 1 collects: the hosts the analysis established (attribution,
culprits, timeline, host offsets, host-valued pattern fields, hosts read from file names) and
everything the detectors (``nccllog.redact.detectors``) find in the *log-derived* strings: line
texts, file names, inputs, field values, settings. Pass 2 rewrites every string with one
expression built from all of them.

nccllog's own wording (verdict summaries, reasons, remediation, advice, notes, attribution
explanations) is never scanned: it changes only where it quotes a value found in the logs.
Vocabulary (pattern ids, categories, severities, variable names) is never touched.

Not redacted on purpose: loopback and unspecified addresses (``127.0.0.1``, ``::1``,
``0.0.0.0``), ``localhost``, public documentation sites, and generic words after ``host:``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable
from typing import Any, Literal

import polars as pl

from nccllog.attribution.paths import attrs_from_path
from nccllog.model import Incident
from nccllog.redact.aliases import KINDS, WITHHELD, Redactor
from nccllog.redact.detectors import ALIAS, detect

ALIAS_RE = ALIAS
Mode = Literal["log", "own", "vocab"]

# How each field of the model (and column of the events table) is treated. Unlisted fields are
# log-derived: scanned and rewritten. "own": nccllog's wording, rewritten but never scanned.
# "vocab": ids, enums and variable names, never touched.
_MODES: dict[str, Mode] = {
    "pattern": "vocab", "category": "vocab", "severity": "vocab", "confidence": "vocab",
    "signal": "vocab", "schema_version": "vocab", "name": "vocab", "launcher": "vocab",
    "frameworks": "vocab",
    "summary": "own", "rules_in": "own", "rules_out": "own", "remediation": "own",
    "collect_next_time": "own", "note": "own", "notes": "own", "reason": "own", "status": "own",
    "title": "own", "why": "own", "steps": "own", "applies_to": "own", "message": "own",
    "replacement": "own", "attribution": "own",
}  # fmt: skip
_COLUMN_MODES: dict[str, Mode] = {
    "pattern": "vocab", "signal": "vocab", "category": "vocab", "severity": "vocab",
    "env_var": "vocab", "attribution": "own",
}  # fmt: skip
# Dictionaries whose keys are log-derived (elsewhere keys are field or variable names).
_LOG_KEYS = frozenset({"host_offsets"})
_PATH_FIELDS = frozenset({"source", "sources", "inputs", "unmatched_templates"})
_HOST_FIELDS = frozenset({"host", "target_host", "master_addr", "peer_addr", "culprit_hosts", "host_offsets"})

__all__ = ["ALIAS_RE", "KINDS", "WITHHELD", "Redactor", "detect", "redact", "redact_text", "redact_with_map"]


def _walk(obj: Any, fn: Callable[[str, Mode, str], str], name: str = "", mode: Mode = "log") -> Any:
    """A copy of ``obj`` with every string passed through ``fn(text, mode, field)``."""
    if isinstance(obj, str):
        return obj if mode == "vocab" else fn(obj, mode, name)
    if obj is None or isinstance(obj, int | float):
        return obj
    if isinstance(obj, tuple):
        return tuple(_walk(x, fn, name, mode) for x in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {
            f.name: _walk(getattr(obj, f.name), fn, f.name, _MODES.get(f.name, "log"))
            for f in dataclasses.fields(obj)
        }
        return dataclasses.replace(obj, **changes)
    if isinstance(obj, pl.DataFrame):
        return _walk_frame(obj, fn)
    if isinstance(obj, list):
        return [_walk(x, fn, name, mode) for x in obj]
    if isinstance(obj, dict):
        key_mode: Mode = "log" if name in _LOG_KEYS else "vocab"
        # a value is named by its key (fields["target_host"], settings["MASTER_ADDR"])
        return {
            _walk(k, fn, name, key_mode): _walk(v, fn, k if isinstance(k, str) else name, mode)
            for k, v in obj.items()
        }
    return obj


def _string_columns(df: pl.DataFrame) -> list[tuple[str, Mode]]:
    return [
        (c, _COLUMN_MODES.get(c, "log"))
        for c, t in df.schema.items()
        if t == pl.String and _COLUMN_MODES.get(c) != "vocab"
    ]


def _walk_frame(df: pl.DataFrame, fn: Callable[[str, Mode, str], str]) -> pl.DataFrame:
    exprs = []
    for col, mode in _string_columns(df):
        old, new = [], []
        for u in df.get_column(col).drop_nulls().unique().sort().to_list():
            r = fn(u, mode, col)
            if r != u:
                old.append(u)
                new.append(r)
        if old:
            exprs.append(pl.col(col).replace(old, new))
    return df.with_columns(exprs) if exprs else df


def _add_host(r: Redactor, value: str) -> None:
    """A value the analysis holds as a host: the whole of it when it is one name, plus what the
    detectors find in it (``node-3<54321>``, ``[node-3]:29500``)."""
    token = value.strip().split("<", 1)[0]
    if token.startswith("["):
        token = token[1:].split("]", 1)[0]
    elif token.count(":") == 1:
        token = token.split(":", 1)[0]
    r.add("host", token)
    r.scan(value)


def _collect(incident: Incident, r: Redactor) -> None:
    """Pass 1: the hosts of the analysis (ranks in order first: host-1 is rank 0's host), then the
    detectors over every log-derived string, and hosts read from file names."""
    for info in sorted(incident.ranks, key=lambda i: i.rank):
        if info.host:
            _add_host(r, info.host)
    ev = incident.events
    seen: set[tuple[str, str]] = set()

    def visit(text: str, mode: Mode, name: str) -> str:
        if mode == "log" and (name, text) not in seen:
            seen.add((name, text))
            if name.lower() in _HOST_FIELDS or name.lower().endswith("host"):
                _add_host(r, text)
            else:
                r.scan(text, template=name == "unmatched_templates")
            if name in _PATH_FIELDS:
                r.add("host", attrs_from_path(text.rsplit(":", 1)[0]).host)
        return text

    if ev.height and "host" in ev.columns:
        for h in ev.get_column("host").drop_nulls().unique().sort().to_list():
            _add_host(r, h)
    _walk(dataclasses.replace(incident, events=pl.DataFrame()), visit)
    for col, mode in _string_columns(ev) if ev.height else ():
        if col == "message" and "text" in ev.columns:
            continue  # the message is the tail of the line's text: scanning the text finds it all
        for u in ev.get_column(col).drop_nulls().unique().sort().to_list():
            visit(u, mode, col)


def redactor_for(incident: Incident, extra: Iterable[tuple[str, str]] = ()) -> Redactor:
    """A Redactor that knows every sensitive value of ``incident`` (plus ``extra`` (kind, value))."""
    r = Redactor()
    _collect(incident, r)
    for kind, value in extra:
        r.add(kind, value)
    return r


def redact(incident: Incident, redactor: Redactor | None = None) -> Incident:
    """The incident with every host, address, user, e-mail, secret and node list replaced by its alias."""
    r = redactor or redactor_for(incident)
    out: Incident = _walk(incident, lambda text, _mode, name: r.apply(text, name == "unmatched_templates"))
    return dataclasses.replace(out, redacted=True)


def redact_with_map(incident: Incident) -> tuple[Incident, dict[str, str]]:
    """``redact`` plus the alias table (alias -> original) for the owner of the logs."""
    r = redactor_for(incident)
    return redact(incident, r), r.aliases


def alias_table_json(aliases: dict[str, str]) -> str:
    """The alias table as written by ``--redact-map``: ``{"host-1": "node-a07", ...}``."""
    return json.dumps(aliases, indent=2, ensure_ascii=False) + "\n"


def redact_text(text: str) -> str:
    """Redact one log-derived text on its own (what the detectors find in it)."""
    r = Redactor()
    r.scan(text)
    return r.apply(text)
