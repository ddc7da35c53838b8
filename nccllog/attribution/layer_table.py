"""The declared line prefix layers (``layers.toml``): launcher and collector prefixes as data.

Each layer is a regex matched at a position of the line, the ``LineAttrs`` fields its groups
set, and where in the stack of layers it may appear. ``layers.py`` tries them at each position
(``EARLY`` before the producers' own prefixes, ``LATE`` after the bracketed ones).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

import regex

from nccllog.ingest.numbers import int64

# Where a layer may appear, outermost first (`within` / `depth` in layers.toml).
DEPTHS: dict[str, int] = {"start": 0, "time": 1, "task": 3, "ray": 4, "tee": 5, "rank": 6}
# LineAttrs fields a declared layer may set: name -> whether it holds an integer.
SETTABLE: dict[str, bool] = {
    "rank": True,
    "local_rank": True,
    "srun_task": True,
    "host": False,
    "pid": True,
    "tid": True,
    "ip": False,
    "ray_actor": False,
    "tee_role": False,
    "job": True,
}
_KEYS = {"name", "regex", "first", "sets", "rank_kind", "within", "depth", "once", "launcher", "late"}


@dataclass(frozen=True)
class Layer:
    """One declared prefix layer."""

    name: str
    rx: regex.Pattern[str]
    first: str  # characters the layer can start with
    sets: tuple[tuple[str, tuple[str, ...]], ...]  # (LineAttrs field, groups, first matched wins)
    rank_kind: str | None
    within: int  # may appear while the depth is at most this
    depth: int  # the depth after it
    once: str | None
    launcher: bool
    late: bool


def _layer(entry: Mapping[str, Any], where: str) -> Layer:
    unknown = set(entry) - _KEYS
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
    name = entry["name"]
    rx = regex.compile(entry["regex"], regex.ASCII)
    sets: list[tuple[str, tuple[str, ...]]] = []
    for fld, groups in entry.get("sets", {}).items():
        gs = (groups,) if isinstance(groups, str) else tuple(groups)
        if fld not in SETTABLE:
            raise ValueError(f"{where} ({name}): {fld!r} is not a field a layer may set")
        missing = [g for g in gs if g not in rx.groupindex]
        if missing:
            raise ValueError(f"{where} ({name}): no group {missing} in its regex")
        sets.append((fld, gs))
    within, depth = entry.get("within", "start"), entry.get("depth", "start")
    if within not in DEPTHS or depth not in DEPTHS:
        raise ValueError(f"{where} ({name}): within/depth must be one of {list(DEPTHS)}")
    if not entry.get("first"):
        raise ValueError(f"{where} ({name}): `first` (the characters it can start with) is required")
    return Layer(
        name=name,
        rx=rx,
        first=entry["first"],
        sets=tuple(sets),
        rank_kind=entry.get("rank_kind"),
        within=DEPTHS[within],
        depth=DEPTHS[depth],
        once=entry.get("once"),
        launcher=bool(entry.get("launcher", False)),
        late=bool(entry.get("late", False)),
    )


def load(text: str, where: str = "layers.toml") -> tuple[Layer, ...]:
    """The layers of a layers.toml text, in order; ValueError names the first bad entry."""
    doc = tomllib.loads(text)
    return tuple(_layer(e, f"{where} layer {i + 1}") for i, e in enumerate(doc.get("layer", [])))


def by_first(layers: tuple[Layer, ...]) -> dict[str, tuple[Layer, ...]]:
    """First character -> the layers that can start with it, in table order."""
    out: dict[str, list[Layer]] = {}
    for layer in layers:
        for c in dict.fromkeys(layer.first):
            out.setdefault(c, []).append(layer)
    return {c: tuple(v) for c, v in out.items()}


DECLARED = load(resources.files("nccllog.attribution").joinpath("layers.toml").read_text("utf-8"))
EARLY = by_first(tuple(x for x in DECLARED if not x.late))
LATE = by_first(tuple(x for x in DECLARED if x.late))


def apply(
    table: Mapping[str, tuple[Layer, ...]],
    s: str,
    pos: int,
    depth: int,
    done: set[str],
    st: dict[str, Any],
    names: list[str],
) -> tuple[int, int] | None:
    """Strip the first declared layer that matches at ``pos``: (end, new depth), or None."""
    cands = table.get(s[pos])
    if not cands:
        return None
    for layer in cands:
        if depth > layer.within or (layer.once is not None and layer.once in done):
            continue
        m = layer.rx.match(s, pos)
        if m is None:
            continue
        for fld, groups in layer.sets:
            raw = next((v for v in map(m.group, groups) if v is not None), None)
            if raw is None:
                continue
            value: Any = int64(raw) if SETTABLE[fld] else raw
            if fld == "rank":
                # a line-level global rank, unless a stronger one is already there
                if st.get("rank") is None and value is not None:
                    st["rank"], st["rank_kind"] = value, layer.rank_kind
            else:
                st[fld] = value
        names.append(layer.name)
        if layer.once is not None:
            done.add(layer.once)
        return m.end(), layer.depth
    return None
