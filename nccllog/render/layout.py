"""Shared view data for the text and markdown layouts (added beside ``view``, which it reuses).

- ``messages``: the message body of chosen lines (the prefix layers the ingest stage parsed off),
  so that a row shows what was said, not ``[rank3]:[E1014 11:47:00.123 ProcessGroupNCCL.cpp:607]``.
- ``timeline_rows``: the timeline folded by pattern and collective across ranks, so 512 ranks
  timing out at one collective are one row (``×511 ranks``), wherever their lines fall.
- ``status_legend``: the rank states a report shows, each with its meaning.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import polars as pl

from nccllog.correlate.rank_status import MEANINGS
from nccllog.model import Finding, Incident, RankStatus, TimelineEntry
from nccllog.render.view import RankRow, TimelineRow, around_anchor, failure_index

# A rank marker the message starts with ("[Rank 3] ", "[PG 0 (default_pg) Rank 3] "): on a row
# that stands for many ranks it names only the first of them, so it is left out there.
_RANK_MARK = re.compile(r"^\s*\[(?:PG [^\]]*?)?\s*Rank \d+\]\s*")
_DIGITS = re.compile(r"\d+")


def messages(incident: Incident, spots: Iterable[tuple[str, int]]) -> dict[tuple[str, int], str]:
    """``(source, line) -> message`` for the given lines (one vectorised join over the events)."""
    wanted = sorted(set(spots))
    ev = incident.events
    if not wanted or ev.height == 0 or "message" not in ev.columns:
        return {}
    keys = pl.DataFrame(
        {"source": [s for s, _ in wanted], "line": [n for _, n in wanted]},
        schema={"source": pl.String, "line": pl.Int64},
    )
    found = (
        ev.select("source", "line", "message")
        .join(keys, on=["source", "line"], how="semi")
        .unique(subset=["source", "line"], keep="first", maintain_order=True)
    )
    return {(s, n): m for s, n, m in found.iter_rows() if m}


def _findings_at(incident: Incident) -> dict[tuple[str, int], Finding]:
    out: dict[tuple[str, int], Finding] = {}
    for f in incident.findings:
        out.setdefault((f.source, f.line), f)
    return out


def timeline_rows(incident: Incident, before: int, after: int) -> tuple[list[TimelineRow], int, int]:
    """Timeline rows around the failure, folded across ranks: entries of the same pattern and
    severity about the same collective (op and sequence number), or saying the same thing with
    only numbers changed, are one row at the place of the first; the culprits' lines are never
    folded with the others'. A line several patterns matched
    is kept once. Returns the rows and how many rows were left out before and after."""
    anchor = failure_index(incident)
    at = _findings_at(incident)
    culprits = set(incident.verdict.culprit_ranks)
    seen: set[tuple[str, int]] = set()
    rows: dict[tuple[object, ...], list[TimelineEntry]] = {}
    anchor_key: tuple[object, ...] | None = None
    for i, e in enumerate(incident.timeline):
        if (e.source, e.line) in seen:
            continue
        seen.add((e.source, e.line))
        found = at.get((e.source, e.line))
        fields = found.fields if found is not None else {}
        if "seq" in fields or "op" in fields:
            what: object = (fields.get("pg"), fields.get("op"), fields.get("seq"))
        else:
            what = _DIGITS.sub("#", _RANK_MARK.sub("", e.text))
        key = (e.rank in culprits, e.pattern, e.severity, what)  # a culprit's line stays its own row
        rows.setdefault(key, []).append(e)
        if i == anchor:
            anchor_key = key
    folded = [TimelineRow(tuple(v), anchor=(k == anchor_key)) for k, v in rows.items()]
    return around_anchor(folded, before, after)


def row_message(row: TimelineRow, bodies: dict[tuple[str, int], str]) -> str:
    """What a timeline row says: the first entry's message body (its raw text when the message
    is unknown); the rank marker is dropped when the row stands for several ranks."""
    e = row.first
    text = bodies.get((e.source, e.line)) or e.text or e.pattern
    return _RANK_MARK.sub("", text) if len(row.ranks) > 1 else text


def first_error_text(f: Finding | None, bodies: dict[tuple[str, int], str]) -> str:
    """A rank's first error as its message (not the pattern id), without the rank marker."""
    if f is None:
        return "-"
    return _RANK_MARK.sub("", bodies.get((f.source, f.line)) or f.text or f.pattern)


def status_legend(incident: Incident) -> list[tuple[str, str]]:
    """``(words, meaning)`` for each rank state the report shows, in the vocabulary's order."""
    present = {r.state for r in incident.ranks}
    return [(_WORDS[s], MEANINGS[s]) for s in RankStatus if s.value in present]


def rank_legend(incident: Incident, rows: Iterable[RankRow]) -> list[str]:
    """The legend under a ranks table: the marks and words it shows, each with its meaning."""
    rows = list(rows)
    out = ["◀ culprit"] if any(r.culprit for r in rows) else []
    out += [f"{words}: {meaning}" for words, meaning in status_legend(incident)]
    if any(r.info.last_enqueued is not None or r.info.last_completed is not None for r in rows):
        out.append("progress: enq = last collective enqueued, done = last completed")
    return out


_WORDS: dict[RankStatus, str] = {
    RankStatus.TIMED_OUT: "timed out at X",
    RankStatus.NOT_IN_COLLECTIVE: "not in the collective",
    RankStatus.CRASHED: "crashed",
    RankStatus.EXITED: "exited N",
    RankStatus.HUNG_IN_INIT: "hung in init",
    RankStatus.NO_ERROR_LOGGED: "no error logged",
    RankStatus.FINISHED: "finished",
    RankStatus.NO_LOG: "no log",
}
