"""Picking the ranks that stand out, kept apart from measuring them (ranks_state) and from
explaining them (hypotheses). Every function takes plain per-rank values and returns ranks."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Split(Generic[K]):
    """Ranks grouped by a value: the majority's value and ranks, everyone else, and whether the
    largest group is not a clear majority (a tie, or no bigger than the rest)."""

    key: K
    majority: tuple[int, ...]
    odd: tuple[int, ...]
    groups: tuple[tuple[K, tuple[int, ...]], ...]
    tie: bool


def odd_one_out(by_key: Mapping[K, Sequence[int]], order: Sequence[K] | None = None) -> Split[K] | None:
    """Group ranks by a value (op and sizes, sequence number, version …); None if they all agree."""
    if len(by_key) < 2:
        return None
    rank = {k: i for i, k in enumerate(order)} if order is not None else {}
    groups = sorted(
        ((k, tuple(sorted(rs))) for k, rs in by_key.items()),
        key=lambda kv: (-len(kv[1]), rank.get(kv[0], 0), kv[1]),
    )
    key, majority = groups[0]
    odd = tuple(sorted(r for _, rs in groups[1:] for r in rs))
    tie = len(majority) <= len(odd) or len(groups[1][1]) == len(majority)
    return Split(key=key, majority=majority, odd=odd, groups=tuple(groups), tie=tie)


def behind(values: Mapping[int, int], *, mark: int | None = None, max_share: float = 0.5) -> tuple[int, ...]:
    """Ranks whose counter is below ``mark`` (the point the others reached), or else clearly below the
    median, provided they are a minority (at most ``max_share`` of the ranks with a value)."""
    if len(values) < 2:
        return ()
    if mark is not None:
        low = sorted(r for r, v in values.items() if v < mark)
        if low and len(low) < len(values) * max_share:
            return tuple(low)
    ordered = sorted(values.values())
    median = ordered[len(ordered) // 2]
    low = sorted(r for r, v in values.items() if v < median - 1)
    if low and len(low) * 3 <= len(values):
        return tuple(low)
    return ()


def last_behind(values: Mapping[int, int]) -> tuple[int, ...]:
    """Ranks whose last counter is below the highest, when they are fewer than the rest (or one of two)."""
    if len(values) < 2 or len(set(values.values())) < 2:
        return ()
    top = max(values.values())
    low = tuple(sorted(r for r, v in values.items() if v < top))
    if len(low) >= len(values) - len(low) and len(values) > 2:
        return ()
    return low


def minority(subset: Sequence[int], total: int) -> bool:
    """Whether ``subset`` is fewer than half of ``total`` ranks."""
    return 0 < len(subset) * 2 <= total
