"""The Redactor: one alias per machine, person or secret, and one expression that rewrites text.

A value is known by a canonical key (per kind): a host by its short name in lower case (so
``Node-A07``, ``node-a07`` and ``node-a07.cluster.local`` are one machine), an address by its
canonical form (``::ffff:10.0.0.1`` is ``10.0.0.1``). Every spelling seen is matched, whatever
its case, and all spellings of one key print as the same alias.

Aliases cannot collide with names in the logs: a token that already has the shape of an alias
(``host-3``, ``IP-0``) is left as it is, its number is never handed out, and no original may be
a prefix of such a token (the bare kind words are never originals). That is also what makes
redaction idempotent: the output holds aliases and text no detector takes for a value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import regex

from nccllog.redact import detectors
from nccllog.redact.detectors import ALIAS, aliases_in, detect, detect_template, ip_value

KINDS = ("host", "ip", "user", "email", "secret", "nodes")
# What a text becomes when the detectors or the rewrite run past their time limit: withheld
# whole rather than shown unchecked.
WITHHELD = "[withheld: redaction timed out]"

# Public sites that logs link to (documentation, issue trackers); they identify nobody.
_PUBLIC_DOMAINS = (
    "pytorch.org", "github.com", "githubusercontent.com", "nvidia.com", "python.org", "pypi.org",
    "huggingface.co", "readthedocs.io", "readthedocs.org", "stackoverflow.com", "ray.io",
    "deepspeed.ai", "anaconda.org", "conda.io", "kernel.org", "ubuntu.com", "debian.org",
    "no-color.org",
)  # fmt: skip
# Words that follow "host:" or "node=" in logs without naming a machine, and the kind words
# themselves (an original "host" would eat the front of the alias "host-3").
_GENERIC = frozenset(
    {
        "localhost", "none", "null", "unknown", "n/a", "na", "nil", "true", "false", "undefined",
        "port", "host", "hostname", "node", "nodes", "addr", "address", "name", "value", "default",
        "auto", "any", "all", "self", "env", "tcp", "udp", "ip", "ipv4", "ipv6", "user", "email",
        "secret", "redacted", "withheld", "local", "master", "server", "client", "str", "int",
    }
)  # fmt: skip
# Accounts every machine of an image has (Ubuntu clouds, EC2, Ray's containers): they identify nobody.
SHARED_ACCOUNTS = frozenset(
    {"root", "admin", "git", "ubuntu", "nobody", "ec2-user", "centos", "ray", "shared", "public"}
)
# Words that are host names of nobody in particular (a node called `master`, `localhost`).
GENERIC_NAMES = _GENERIC
_NOT_USERS = _GENERIC | SHARED_ACCOUNTS
_ENV_VAR = regex.compile(r"\$?\{?[A-Z][A-Z0-9]*_[A-Z0-9_]*\}?|\$\{?\w+\}?", regex.ASCII)
_HEX = regex.compile(r"0x[0-9a-fA-F]+", regex.ASCII)
# How the matcher masks numbers in the templates of unmatched lines (nccllog.match.matcher).
_TEMPLATE_MASK = regex.compile(r"0x[0-9a-fA-F]+|\b[0-9a-f]{8,}\b|\d+(?:\.\d+)*")


def _host_key(value: str) -> tuple[str, str, tuple[str, ...]] | None:
    """(kind, key, spellings) for a host or address value, or None when it names no machine."""
    v = value.strip().strip("'\"").rstrip(".:,;")
    if v.startswith("[") and v.endswith("]"):
        v = v[1:-1]
    if not v or len(v) > 253:
        return None
    ip = ip_value(v)
    if ip is not None:
        return "ip", ip, tuple({v.split("%", 1)[0].lower(), ip})
    low = v.lower()
    if (
        low in _GENERIC
        or len(v) < 2
        or v.replace(".", "").replace(":", "").isdigit()
        or ":" in v
        or _ENV_VAR.fullmatch(v)
        or _HEX.fullmatch(v)
        or any(low == d or low.endswith("." + d) for d in _PUBLIC_DOMAINS)
        or ALIAS.fullmatch(low)
    ):
        return None
    short = low.split(".", 1)[0]
    if (
        "." in low
        and len(short) >= 3
        and short not in _GENERIC
        and not ALIAS.fullmatch(short)
        and any(c.isdigit() or c in "-_" for c in short)
    ):
        return "host", short, (low, short)
    return "host", low, (low,)


def _key(kind: str, value: str) -> tuple[str, str, tuple[str, ...]] | None:
    if kind in ("host", "ip"):
        return _host_key(value)
    v = value.strip()
    if kind == "user":
        v = v.rstrip(".")
        if len(v) < 2 or v.lower() in _NOT_USERS or _ENV_VAR.fullmatch(v):
            return None
    elif kind == "secret" and (v.isdigit() or v.lower() in _GENERIC):
        return None
    if not v or len(v) > 255:
        return None
    return kind, v.lower(), (v.lower(),)


@dataclass
class Redactor:
    """Collects sensitive values, gives each machine, person or secret an alias, rewrites text."""

    _spelling: dict[str, tuple[str, str]] = field(default_factory=dict)  # lower-case spelling -> key
    _display: dict[tuple[str, str], str] = field(default_factory=dict)  # key -> first spelling seen
    _alias: dict[tuple[str, str], str] = field(default_factory=dict)
    _reserved: dict[str, set[int]] = field(default_factory=lambda: {k: set() for k in KINDS})
    _withheld: set[str] = field(default_factory=set)
    _rx: regex.Pattern[str] | None = None
    _lookup: dict[str, str] = field(default_factory=dict)
    _memo: dict[str, str] = field(default_factory=dict)
    _tpl_rx: regex.Pattern[str] | None = None
    _tpl_ready: bool = False
    _tpl_lookup: dict[str, str] = field(default_factory=dict)
    _dirty: bool = True

    # -- pass 1 ---------------------------------------------------------------------------------
    def add(self, kind: str, value: str | None) -> None:
        """Record ``value`` as a ``kind`` to hide (a host that is an address becomes an ``ip``)."""
        if not value or len(value) > 4096:
            return
        if ALIAS.fullmatch(value.strip()):
            self._reserve(value.strip())
            return
        known = _key(kind, value)
        if known is None:
            return
        kind, key, spellings = known
        if (kind, key) not in self._display:
            self._display[(kind, key)] = value.strip().strip("[]'\"").split("%", 1)[0].rstrip(".")
        for s in spellings:
            if s not in self._spelling:
                self._spelling[s] = (kind, key)
                self._dirty = True

    def _reserve(self, alias: str) -> None:
        kind, _, n = alias.lower().rpartition("-")
        self._reserved[kind].add(int(n))

    def scan(self, text: str | None, template: bool = False) -> None:
        """Record what the detectors find in a log-derived ``text`` (an unmatched line's
        ``template`` with its numbers masked); withhold the text if they time out."""
        if not text:
            return
        try:
            for token in aliases_in(text):
                self._reserve(token)
            for kind, value in (detect_template if template else detect)(text):
                self.add(kind, value)
        except TimeoutError:
            self._withheld.add(text)

    # -- aliases ---------------------------------------------------------------------------------
    def _finish(self) -> None:
        if not self._dirty:
            return
        counters = dict.fromkeys(KINDS, 0)
        for key in self._alias:
            counters[key[0]] = max(counters[key[0]], int(self._alias[key].rsplit("-", 1)[1]))
        for key in self._display:
            if key not in self._alias:
                kind = key[0]
                n = counters[kind] + 1
                while n in self._reserved[kind]:
                    n += 1
                counters[kind] = n
                self._alias[key] = f"{kind}-{n}"
        self._lookup = {s: self._alias[key] for s, key in self._spelling.items()}
        self._rx = _alternation(self._lookup)
        self._memo = {}
        self._tpl_ready = False
        self._dirty = False

    @property
    def aliases(self) -> dict[str, str]:
        """alias -> original (its first spelling), by kind then number."""
        self._finish()
        pairs = sorted(
            ((KINDS.index(k[0]), int(a.rsplit("-", 1)[1])), a, self._display[k])
            for k, a in self._alias.items()
        )
        return {alias: original for _, alias, original in pairs}

    # -- pass 2 ---------------------------------------------------------------------------------
    def apply(self, text: str, template: bool = False) -> str:
        """``text`` with every known original replaced by its alias. A ``template`` (an unmatched
        line with its numbers masked as ``N``) is also searched for the masked spellings."""
        if not text:
            return text
        if text in self._withheld:
            return WITHHELD
        self._finish()
        done = self._memo.get(text) if not template else None
        if done is None:
            done = self._sub(self._rx, self._lookup, text)
            if template:
                if not self._tpl_ready:
                    masked = {_TEMPLATE_MASK.sub("N", s).lower(): a for s, a in self._lookup.items()}
                    self._tpl_lookup = {
                        m: a for m, a in masked.items() if m not in self._lookup and len(m.strip("n.:-")) >= 2
                    }
                    self._tpl_rx = _alternation(self._tpl_lookup)
                    self._tpl_ready = True
                done = self._sub(self._tpl_rx, self._tpl_lookup, done)
            elif len(self._memo) < 1_000_000:
                self._memo[text] = done
        return done

    @staticmethod
    def _sub(rx: regex.Pattern[str] | None, lookup: dict[str, str], text: str) -> str:
        if rx is None or text == WITHHELD:
            return text
        try:
            return rx.sub(lambda m: lookup.get(m.group(0).lower(), WITHHELD), text, timeout=detectors.TIMEOUT)
        except TimeoutError:
            return WITHHELD


def _alternation(values: dict[str, str]) -> regex.Pattern[str] | None:
    """One expression matching any of ``values`` (any case, longest first) where it is not part of
    a longer word, nor glued to an upper-case ``_WORD`` (``MASTER_ADDR`` keeps its ``MASTER``)."""
    if not values:
        return None
    trie: dict[str, Any] = {}
    for v in values:
        node = trie
        for ch in v:
            node = node.setdefault(ch, {})
        node[""] = {}
    body = _trie_regex(trie)
    return regex.compile(
        rf"(?<![A-Za-z0-9])(?<!(?-i:[A-Z])_){body}(?![A-Za-z0-9])(?!_(?-i:[A-Z]))",
        regex.IGNORECASE | regex.V0,
    )


def _trie_regex(node: dict[str, Any]) -> str:
    ends = "" in node
    branches = [regex.escape(ch) + _trie_regex(child) for ch, child in sorted(node.items()) if ch]
    if not branches:
        return ""
    # A greedy optional tail: a longer original wins over its prefix.
    inner = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    if ends:
        return f"(?:{inner})?"
    return inner
