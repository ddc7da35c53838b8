"""The diagnosis vocabulary (``vocabulary.toml``): phase words, stop words, uncaught-error markers, virtual interfaces,
restrictive settings and the Xid table, loaded once."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources

import regex


@dataclass(frozen=True)
class Vocabulary:
    """What the rules look for, by name."""

    phase_words: tuple[str, ...]  # lower case; match case-insensitively
    stop_words: tuple[str, ...]  # case-sensitive
    reaction_stop_patterns: tuple[str, ...]  # pattern ids
    one_sided_ops: frozenset[str]  # OpType names
    gather_ops: frozenset[str]
    scatter_ops: frozenset[str]
    uncaught_markers: tuple[str, ...]  # case-sensitive
    unexplained_warn_patterns: tuple[str, ...]  # pattern ids
    cut_traceback_blockers: tuple[str, ...]  # signals
    rendezvous_done_patterns: tuple[str, ...]  # pattern ids
    virtual_iface: regex.Pattern[str]
    restrictive_settings: dict[str, tuple[str, ...]]
    xid_names: dict[int, str]
    xid_class: dict[int, str]  # "app", "secondary", "info"

    def xids(self, kind: str) -> tuple[int, ...]:
        """The Xid numbers of one class, in order."""
        return tuple(sorted(x for x, c in self.xid_class.items() if c == kind))


@cache
def vocabulary() -> Vocabulary:
    """The vocabulary file, parsed and checked once."""
    text = resources.files("nccllog").joinpath("correlate", "rules", "vocabulary.toml").read_text("utf-8")
    raw = tomllib.loads(text)
    names = "|".join(raw["virtual_interfaces"])
    xid = {int(k): v for k, v in raw["xid"].items()}
    return Vocabulary(
        phase_words=tuple(w.lower() for w in raw["phase_words"]),
        stop_words=tuple(raw["stop_words"]),
        reaction_stop_patterns=tuple(raw["reaction_stop_patterns"]),
        one_sided_ops=frozenset(raw["one_sided_ops"]),
        gather_ops=frozenset(raw["gather_ops"]),
        scatter_ops=frozenset(raw["scatter_ops"]),
        uncaught_markers=tuple(raw["uncaught_markers"]),
        unexplained_warn_patterns=tuple(raw["unexplained_warn_patterns"]),
        cut_traceback_blockers=tuple(raw["cut_traceback_blockers"]),
        rendezvous_done_patterns=tuple(raw["rendezvous_done_patterns"]),
        virtual_iface=regex.compile(rf"(?:^|[\s\]])({names}):|{raw['link_local']}"),
        restrictive_settings={k: tuple(v) for k, v in raw["restrictive_settings"].items()},
        xid_names={k: v["name"] for k, v in xid.items()},
        xid_class={k: v["class"] for k, v in xid.items() if "class" in v},
    )
