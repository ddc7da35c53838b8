"""JSON renderer: the stable, versioned contract (docs/json.md). Keys are added, never renamed.

Deterministic: keys of maps keyed by data (ranks, hosts, settings) are sorted; lists keep the
order the model gives them (it is meaning: evidence order, timeline order) or are sorted where
order carries no meaning. Control characters that a terminal could interpret (C0 and C1 controls,
DEL, bidi overrides and isolates; nccllog.text_safety) are written as ``\\uXXXX`` escapes, so
printing the JSON is safe; the data is unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from nccllog.model import (
    SCHEMA_VERSION,
    Advice,
    CollectiveRow,
    Evidence,
    Finding,
    Hypothesis,
    Incident,
    RankInfo,
    SettingFinding,
    TimelineEntry,
)
from nccllog.render import proof
from nccllog.text_safety import json_safe
from nccllog.version import __version__


def _evidence(e: Evidence) -> dict[str, Any]:
    return {
        "source": e.source,
        "line": e.line,
        "rank": e.rank,
        "text": e.text,
        "host": e.host,
        "time": e.time,
        "note": e.note,
    }


def _hypothesis(h: Hypothesis, *, full: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "category": h.category,
        "culprit_ranks": list(h.culprit_ranks),
        "culprit_hosts": list(h.culprit_hosts),
        "confidence": h.confidence,
        "summary": h.summary,
        "collective": {"pg": c.pg, "seq": c.seq, "op": c.op} if (c := h.collective) else None,
    }
    if full:
        out["score"] = round(h.score, 4)
        out["evidence"] = [_evidence(e) for e in h.evidence]
        out["rules_in"] = list(h.rules_in)
        out["rules_out"] = list(h.rules_out)
        out["remediation"] = list(h.remediation)
        out["collect_next_time"] = list(h.collect_next_time)
    return out


def _finding(f: Finding) -> dict[str, Any]:
    return {
        "pattern": f.pattern,
        "source": f.source,
        "line": f.line,
        "rank": f.rank,
        "host": f.host,
        "time": f.time,
        "fields": dict(sorted(f.fields.items())),
        "severity": f.severity,
        "signal": f.signal,
        "text": f.text,
    }


def _rank(r: RankInfo) -> dict[str, Any]:
    return {
        "rank": r.rank,
        "host": r.host,
        "local_rank": r.local_rank,
        "pids": list(r.pids),
        "sources": list(r.sources),
        "status": r.status,
        "state": r.state,
        "culprit": r.culprit,
        "outlier": r.outlier,
        "stuck_since": r.stuck_since,
        "lines": r.lines,
        "last_time": r.last_time,
        "last_enqueued": r.last_enqueued,
        "last_completed": r.last_completed,
        "last_step": r.last_step,
        "timed_out_seq": r.timed_out_seq,
        "first_error": _finding(r.first_error) if r.first_error is not None else None,
    }


def _collective(c: CollectiveRow) -> dict[str, Any]:
    return {
        "pg": c.pg,
        "seq": c.seq,
        "op": c.op,
        "expected": list(c.expected),
        "reporters": list(c.reporters),
        "silent": list(c.silent),
        "ops": {str(k): v for k, v in sorted(c.ops.items())},
        "numel": {str(k): list(v) for k, v in sorted(c.numel.items())},
        "timeout_ms": c.timeout_ms,
        "elapsed_ms": {str(k): v for k, v in sorted(c.elapsed_ms.items())},
        "note": c.note,
    }


def _timeline(e: TimelineEntry) -> dict[str, Any]:
    return {
        "time": e.time,
        "rank": e.rank,
        "host": e.host,
        "pattern": e.pattern,
        "severity": e.severity,
        "source": e.source,
        "line": e.line,
        "text": e.text,
    }


def _setting(s: SettingFinding) -> dict[str, Any]:
    return {
        "name": s.name,
        "value": s.value,
        "status": s.status,
        "message": s.message,
        "replacement": s.replacement,
        "sources": list(s.sources),
    }


def _advice(a: Advice) -> dict[str, Any]:
    return {"title": a.title, "why": a.why, "steps": list(a.steps), "applies_to": a.applies_to}


def _verdict(incident: Incident) -> dict[str, Any]:
    """The verdict, with the evidence that proves it as the reports show it (culprits' lines
    first, alike lines folded with a count) and the culprits' differing fields side by side."""
    out = _hypothesis(incident.verdict, full=False)
    out["evidence"] = [
        {**_evidence(p.evidence), "count": p.count, "ranks": list(p.ranks), "culprit": p.culprit}
        for p in proof.proof(incident)
    ]
    out["contrast"] = proof.contrast(incident)
    return out


def to_dict(incident: Incident) -> dict[str, Any]:
    """The JSON document as plain Python data."""
    c = incident.coverage
    env = incident.environment
    return {
        "schema_version": SCHEMA_VERSION,
        "verdict": _verdict(incident),
        "mixed_input": incident.mixed_input,
        "hypotheses": [_hypothesis(h, full=True) for h in incident.hypotheses],
        "ranks": {
            "world_size": incident.world_size,
            "seen": list(incident.ranks_seen),
            "missing": list(incident.ranks_missing),
        },
        "findings": [_finding(f) for f in incident.findings],
        "coverage": {
            "files": c.files,
            "lines": c.lines,
            "matched": c.matched,
            "unattributed": c.unattributed,
            "skipped": [{"source": s.source, "reason": s.reason, "lines": s.lines} for s in c.skipped],
            "bytes_read": c.bytes_read,
            "decode_replacements": c.decode_replacements,
            "skipped_lines": c.skipped_lines,
            "truncated_lines": c.truncated_lines,
            "notes": list(c.notes),
            "unmatched": c.unmatched,
            "skipped_line_reasons": [{"reason": r, "lines": n} for r, n in c.skipped_line_reasons],
            "unaligned_hosts": list(c.unaligned_hosts),
        },
        "nccllog_version": __version__,
        "inputs": list(incident.inputs),
        "redacted": incident.redacted,
        "per_rank": [_rank(r) for r in sorted(incident.ranks, key=lambda r: r.rank)],
        "timeline": [_timeline(e) for e in incident.timeline],
        "collectives": [_collective(x) for x in incident.collectives],
        "host_offsets": _host_offsets(incident),
        "environment": {
            "frameworks": list(env.frameworks),
            "launcher": env.launcher,
            "versions": {k: list(v) for k, v in sorted(env.versions.items())},
            "settings": dict(sorted(env.settings.items())),
            "setting_findings": [_setting(s) for s in env.setting_findings],
        },
        "advice": [_advice(a) for a in incident.advice],
        "unmatched_templates": [
            {"template": t, "count": n, "example": ex} for t, n, ex in incident.unmatched_templates
        ],
    }


def _host_offsets(incident: Incident) -> dict[str, float | None]:
    """Seconds to add per host; null for a host whose clock could not be aligned."""
    out: dict[str, float | None] = {h: round(v, 6) for h, v in incident.host_offsets.items()}
    out.update(dict.fromkeys(incident.coverage.unaligned_hosts))
    return dict(sorted(out.items()))


def render_json(incident: Incident) -> str:
    """Serialise the incident deterministically (sorted where order is not meaning)."""
    text = dumps_indented(to_dict(incident)) + "\n"
    # json_safe escapes only characters from DEL up: ASCII text without DEL has none (and a
    # str knows it is ASCII without a scan), so the 80 MB report of 16,384 ranks is not searched.
    return text if text.isascii() and "\x7f" not in text else json_safe(text)


# The C string encoder of the json module (ensure_ascii=False); the pure-Python one where absent.
_encode_str: Callable[[str], str] = json.encoder.c_encode_basestring or json.encoder.py_encode_basestring  # type: ignore[attr-defined]
_LITERALS = {None: "null", True: "true", False: "false"}
# The json module's C encoder (None without its C accelerator). It writes no indentation, but a
# container of scalars alone is written with one separator between items: ``,`` and the line
# break and indent of its depth give exactly the indented text (json.dumps calls the same C string
# encoder, and writes int, float, bool and None the same way). One encoder per depth.
_c_make_encoder: Callable[..., Callable[[Any, int], list[str]]] | None = getattr(
    json.encoder, "c_make_encoder", None
)
_SCALARS = frozenset({str, int, float, bool, type(None)})
_STR = frozenset({str})
_FLAT: dict[str, Callable[[Any, int], list[str]]] = {}


def dumps_indented(obj: Any) -> str:
    """Exactly ``json.dumps(obj, indent=2, ensure_ascii=False, default=str)``, about twice as fast.

    With ``indent`` the json module falls back to its pure-Python generator encoder (seconds for
    the per-rank tables of 10,000+ ranks); this writes the same text into one list of parts, with
    the common value types (str, int, None) written inline and the C string encoder.
    """
    out: list[str] = []
    _write(obj, out, "\n")
    return "".join(out)


def _write(o: Any, out: list[str], nl: str) -> None:
    append = out.append
    t = type(o)
    if t is dict:
        if not o:
            append("{}")
            return
        inner = nl + "  "
        if _STR.issuperset(map(type, o)) and _SCALARS.issuperset(map(type, o.values())):
            flat = _flat(o, inner)
            if flat is not None:
                append("{" + inner + flat + nl + "}")
                return
        sep = "{" + inner
        for k, v in o.items():
            key = _encode_str(k if type(k) is str else _key(k))
            tv = type(v)
            if tv is str:
                append(sep + key + ": " + _encode_str(v))
            elif tv is int:
                append(sep + key + ": " + int.__repr__(v))
            elif v is None:
                append(sep + key + ": null")
            else:
                append(sep + key + ": ")
                _write(v, out, inner)
            sep = "," + inner
        append(nl + "}")
    elif t is list or t is tuple:
        if not o:
            append("[]")
            return
        inner = nl + "  "
        if _SCALARS.issuperset(map(type, o)):
            flat = _flat(o, inner)
            if flat is not None:
                append("[" + inner + flat + nl + "]")
                return
        sep = "[" + inner
        for v in o:
            tv = type(v)
            if tv is str:
                append(sep + _encode_str(v))
            elif tv is int:
                append(sep + int.__repr__(v))
            else:
                append(sep)
                _write(v, out, inner)
            sep = "," + inner
        append(nl + "]")
    elif t is str:
        append(_encode_str(o))
    else:
        append(_other(o, nl))


def _flat(o: Any, inner: str) -> str | None:
    """The items of a non-empty dict, list or tuple of scalars with their separators, between its
    brackets (``"a": 1,<inner>"b": null``); None without the C encoder."""
    enc = _FLAT.get(inner)
    if enc is None:
        if _c_make_encoder is None:
            return None
        enc = _c_make_encoder(None, str, _encode_str, None, ": ", "," + inner, False, False, True)
        _FLAT[inner] = enc
    return "".join(enc(o, 0))[1:-1]


def _other(o: Any, nl: str) -> str:
    """A scalar of another type, a subclass of a container, or an object written as its ``str``."""
    if o is None or o is True or o is False:
        return _LITERALS[o]
    if isinstance(o, str):
        return _encode_str(o)
    if isinstance(o, int):
        return int.__repr__(o)
    if isinstance(o, float):
        if o != o:
            return "NaN"
        if o in (float("inf"), float("-inf")):
            return "Infinity" if o > 0 else "-Infinity"
        return float.__repr__(o)
    if isinstance(o, list | tuple | dict):
        sub: list[str] = []
        _write(dict(o) if isinstance(o, dict) else list(o), sub, nl)
        return "".join(sub)
    return _encode_str(str(o))  # default=str


def _key(k: Any) -> str:
    if isinstance(k, str):
        return str(k)
    if k is None or isinstance(k, int | float):
        return _other(k, "")
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(k).__name__}")
