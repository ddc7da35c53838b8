"""How the verdict talks: rank lists, group names, durations, collectives. Plain words only."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from nccllog.correlate.frame import DEFAULT_PG


def rank_runs(ranks: Iterable[int]) -> list[tuple[int, int]]:
    """(0, 2, 3, 4, 7) -> ``[(0, 0), (2, 4), (7, 7)]``: the runs of consecutive ranks."""
    runs: list[tuple[int, int]] = []
    for r in sorted(set(ranks)):
        if runs and r == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], r)
        else:
            runs.append((r, r))
    return runs


def rank_list(ranks: Iterable[int], *, sep: str = ",", pairs: bool = True, limit: int | None = None) -> str:
    """The one rank-list format, runs of consecutive ranks as ``a-b``, joined by ``sep``.

    (0, 2, 3, 4, 7) -> ``"0,2-4,7"``; a run of two is written out (``"3,4"``) with ``pairs``, else
    as a range (``"3-4"``); at most ``limit`` runs, then ``"…"``. The verdict's sentences use the
    defaults; the reports use ``sep=", ", pairs=False`` with a limit (``"0-2, 5, 7-8, …"``).
    """
    runs = [
        str(a) if a == b else f"{a}{sep}{b}" if pairs and b == a + 1 else f"{a}-{b}"
        for a, b in rank_runs(ranks)
    ]
    if limit is not None and len(runs) > limit:
        return sep.join([*runs[:limit], "…"])
    return sep.join(runs)


def ranks_phrase(ranks: Iterable[int], *, capital: bool = False) -> str:
    """``"rank 3"`` / ``"ranks 0,2-7"`` (``"Rank 3"`` with ``capital``)."""
    rs = sorted(set(ranks))
    word = "rank" if len(rs) == 1 else "ranks"
    if capital:
        word = word.capitalize()
    return f"{word} {rank_list(rs)}"


def others_phrase(ranks: Iterable[int], world: int | None) -> str:
    """``"ranks 0,2-7"``, or ``"all other ranks"``-style wording when the list is long."""
    rs = sorted(set(ranks))
    if len(rs) > 12 and world is not None:
        return f"{len(rs)} of the {world} ranks"
    return ranks_phrase(rs)


def host_list(hosts: Iterable[str]) -> str:
    """Hosts joined with commas (at most five named)."""
    hs = sorted(set(hosts))
    if len(hs) > 5:
        return ", ".join(hs[:5]) + f" and {len(hs) - 5} more"
    return ", ".join(hs)


def pg_name(pg: str | None) -> str:
    """``"the default group"`` or ``"process group 3"``."""
    if pg is None or pg == DEFAULT_PG:
        return "the default group"
    return f"process group {pg}"


def seconds(ms: float | int | None) -> str:
    """Milliseconds as a human duration: ``"600 s"``, ``"30 min"``, ``"2 h"``."""
    if ms is None:
        return "an unknown time"
    s = ms / 1000
    if s >= 3600 and s % 3600 < 60:
        return f"{s / 3600:.0f} h"
    if s >= 1200 and s % 60 < 1:
        return f"{s / 60:.0f} min"
    if s >= 100:
        return f"{s:.0f} s"
    if s >= 10:
        return f"{s:.0f} s"
    return f"{s:.1f} s".replace(".0 s", " s")


def collective(op: str | None, seq: int | None) -> str:
    """``"ALLREDUCE #1580"``, ``"collective #1580"``, ``"ALLREDUCE"``."""
    name = op or "collective"
    return f"{name} #{seq}" if seq is not None else name


def numel(n_in: int | None, n_out: int | None) -> str:
    """Element counts as a short phrase."""
    if n_in is None and n_out is None:
        return "unknown size"
    if n_in == n_out or n_out is None:
        return f"{n_in} elements"
    return f"{n_in} -> {n_out} elements"


def clock(t: datetime | None) -> str:
    """A time of day (with the date when it is not today-like noise)."""
    if t is None:
        return "an unknown time"
    return t.strftime("%H:%M:%S")


def plural(n: int, word: str, many: str | None = None) -> str:
    """``"1 rank"`` / ``"3 ranks"`` (``many`` for an irregular plural)."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def excerpt(message: str | None, width: int = 60) -> str:
    """A log message quoted inside a sentence: stripped, cut at ``width`` characters."""
    text = " ".join((message or "").split())
    return f'"{text}"' if len(text) <= width else f'"{text[: width - 1].rstrip()}…"'
