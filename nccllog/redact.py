"""Redaction of an Incident before it is rendered or shared.

Host names, IPv4/IPv6 addresses, user names (in home-directory paths and ``user=`` settings),
e-mail addresses and secret-looking tokens are replaced by stable aliases (``host-1``, ``ip-1``,
``user-1``, ``email-1``, ``secret-1``) everywhere in the model: verdict and hypotheses, evidence
text, findings and their fields, timeline, collectives, per-rank rows, environment, inputs, source
paths, and every string column of the events table. The same original always gets the same alias,
so the story still reads.

It works in two passes over the whole model: first every sensitive value is collected (host names
from the attribution and from the places logs print them, plus everything the detectors find in
any text), then every string is rewritten with one regular expression built from all of them.
Values that already look like aliases are left alone, so redacting twice changes nothing.

Not redacted on purpose: loopback and unspecified addresses (``127.0.0.1``, ``::1``, ``0.0.0.0``)
and ``localhost``, which identify nobody, and pattern ids, categories, severities.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from nccllog.model import Finding, Incident

KINDS = ("host", "ip", "user", "email", "secret")
ALIAS_RE = re.compile(r"(?:host|ip|user|email|secret)-\d+")
_ALIAS_FULL = re.compile(rf"^{ALIAS_RE.pattern}$")

# Fields and event columns that hold vocabulary (ids, enums), never log-derived text.
_SKIP_FIELDS = frozenset({"pattern", "category", "severity", "confidence", "signal", "schema_version"})

# Public sites that logs link to (documentation, issue trackers); they identify nobody.
_PUBLIC_DOMAINS = (
    "pytorch.org",
    "github.com",
    "githubusercontent.com",
    "nvidia.com",
    "python.org",
    "pypi.org",
    "huggingface.co",
    "readthedocs.io",
    "readthedocs.org",
    "stackoverflow.com",
    "ray.io",
    "deepspeed.ai",
    "anaconda.org",
    "conda.io",
    "kernel.org",
    "ubuntu.com",
    "debian.org",
    "no-color.org",
)
_NOT_HOSTS = frozenset(
    {"localhost", "none", "null", "unknown", "n/a", "na", "nil", "true", "false", "undefined"}
)

# --- detectors: each returns the values of one kind found in a text --------------------------

_EMAIL = re.compile(
    r"(?<![\w.+-])[A-Za-z0-9][A-Za-z0-9._%+-]*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?![\w-])"
)
_IPV4 = re.compile(
    r"(?<![\w.])(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?![\w]|\.\d)"
)
_IPV6 = re.compile(
    # The IPv4-mapped form (::ffff:10.1.0.17, as NCCL prints RoCE GIDs) is tried first, and a match
    # may not stop before a dot and a digit, so that no tail of an embedded IPv4 address is left behind.
    r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:(?:\d{1,3}\.){3}\d{1,3}|[0-9A-Fa-f]{1,4})?(?:%[\w.]+)?(?![\w:]|\.\d)"
)
_HOME = re.compile(
    r"(?:/home|/Users|/users|/u|/scratch|/nfs/home|/data/home|\\Users)[/\\]([A-Za-z_][\w.-]{0,63})(?=[/\\\s'\":]|$)"
)
_USER_KV = re.compile(
    r"\b(?:USER|LOGNAME|USERNAME|user|username|owner)\s*[=:]\s*['\"]?([A-Za-z_][\w.-]{1,63})"
)
_HOST_CONTEXTS = (
    # NCCL's line header "host:pid:tid [dev]" (possibly after launcher prefixes)
    re.compile(r"(?:^|[\s\]>:])([A-Za-z][\w.-]{0,252}):\d+:\d+ \[\d+\]"),
    # key = value forms: MASTER_ADDR=, hostname:, host=, NodeName=, ...
    re.compile(
        r"\b(?:MASTER_ADDR|master_addr|HOSTNAME|hostname|host_name|hostName|host|Host|HOST|node|nodename|NodeName|"
        r"node_name|SLURMD_NODENAME|SLURM_TOPOLOGY_ADDR)\s*[=:]\s*['\"]?([A-Za-z][\w.-]{0,252})"
    ),
    # srun: error: node-3: task 3: Exited with exit code 1
    re.compile(
        r"\bsrun: (?:error|Job step aborted|got SIGCONT|forcing job termination)[^:]*: ([A-Za-z][\w.-]*): task"
    ),
    # NCCL socket peers: "remote peer node-3.cluster.local<54321>", "to node-3<...>"
    re.compile(r"\b(?:peer|to|from|with|on) ([A-Za-z][\w-]*(?:\.[\w-]+)*)<\d+>"),
    # ssh / scp style user@host
    re.compile(r"(?<![\w.@-])[a-z_][a-z0-9_.-]*@([A-Za-z][\w-]*(?:\.[\w-]+)*)(?![\w@-])"),
    # Slurm "on host X", "Failed on node X"
    re.compile(r"\b(?:on|at) (?:host|node) ([A-Za-z][\w-]*(?:\.[\w-]+)*)"),
)
# Fully qualified names whose last label says "host" (a file name like torch.distributed.py does not).
_TLDS = (
    "local", "internal", "lan", "intranet", "corp", "cluster", "cloud", "compute", "ec2",
    "com", "net", "org", "edu", "gov", "io", "ai", "dev", "cn", "de", "uk", "fr", "jp", "us", "ca",
)  # fmt: skip
_FQDN = re.compile(
    r"(?<![\w.-])([A-Za-z0-9][\w-]*(?:\.[A-Za-z0-9][\w-]*)*\.(?:"
    + "|".join(_TLDS)
    + r"))(?![\w-]|\.[A-Za-z])"
)
_SECRET_PREFIXED = re.compile(
    r"(?<![\w-])(?:hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}|sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}|"
    r"xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|ASIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35}|glpat-[A-Za-z0-9_-]{20,}|"
    r"eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})(?![\w-])"
)
_SECRET_KV = re.compile(
    r"(?i)(?<![\w-])[\w-]*?(?:api[_-]?key|secret(?:[_-]?access)?(?:[_-]?key)?|token|passwd|password|pwd|"
    r"credentials?|access[_-]?key|auth[_-]?key)['\"]?\s*[=:]\s*['\"]?(?:Bearer\s+|Basic\s+)?([^\s'\",;&)}\]]{6,})"
)
_SECRET_BEARER = re.compile(r"\b(?:Bearer|Basic)\s+([A-Za-z0-9._~+/=-]{12,})")
# Long mixed-case-and-digit runs that look random (API keys of unknown vendors).
_SECRET_GENERIC = re.compile(r"(?<![\w/+=-])([A-Za-z0-9+/]{32,}={0,2})(?![\w/+=-])")


def _valid_ip(text: str) -> bool:
    try:
        ip = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return False
    return not (ip.is_loopback or ip.is_unspecified)


def _ipv6_candidate(text: str) -> bool:
    core = text.split("%", 1)[0]
    return ("::" in core or core.count(":") == 7) and _valid_ip(core) and any(c.isdigit() for c in core)


def _random_looking(token: str) -> bool:
    return (
        any(c.islower() for c in token)
        and any(c.isupper() for c in token)
        and sum(c.isdigit() for c in token) >= 3
        and not token.startswith("_Z")
    )


_SECRET_PREFIXES = ("hf_", "gh", "github_pat_", "sk-", "xox", "AKIA", "ASIA", "AIza", "glpat-", "eyJ")
_SECRET_WORDS = ("key", "secret", "token", "passw", "pwd", "credential")
_HOME_HINTS = ("/home", "/Users", "/users", "/u/", "/scratch", "\\Users")
_FQDN_HINTS = tuple("." + tld for tld in _TLDS)
_HOST_WORDS = ("host", "node", "master_addr", "slurm")


def detect(text: str) -> list[tuple[str, str]]:
    """Every sensitive value in ``text`` as ``(kind, value)``, in order of appearance per kind.

    Each detector runs only when a cheap substring test says it can match (most log lines hold
    nothing sensitive, and there can be millions of them)."""
    found: list[tuple[str, str]] = []
    low = text.lower()
    if "@" in text:
        found.extend(("email", m.group(0)) for m in _EMAIL.finditer(text))
    if any(p in text for p in _SECRET_PREFIXES):
        found.extend(("secret", m.group(0)) for m in _SECRET_PREFIXED.finditer(text))
    kv = any(w in low for w in _SECRET_WORDS)
    bearer = "bearer" in low or "basic" in low
    for rx in (_SECRET_KV,) * kv + (_SECRET_BEARER,) * bearer:
        for m in rx.finditer(text):
            value = m.group(1)
            if not _ALIAS_FULL.match(value) and not value.isdigit() and value.lower() not in _NOT_HOSTS:
                found.append(("secret", value))
    if len(text) >= 32:
        for m in _SECRET_GENERIC.finditer(text):
            if _random_looking(m.group(1)):
                found.append(("secret", m.group(1)))
    if "." in text:
        found.extend(("ip", m.group(0)) for m in _IPV4.finditer(text) if _valid_ip(m.group(0)))
    if "::" in text or text.count(":") >= 7:
        found.extend(("ip", m.group(0)) for m in _IPV6.finditer(text) if _ipv6_candidate(m.group(0)))
    if any(h in text for h in _HOME_HINTS):
        found.extend(("user", m.group(1)) for m in _HOME.finditer(text))
    if "user" in low or "logname" in low or "owner" in low:
        found.extend(("user", m.group(1)) for m in _USER_KV.finditer(text))
    if any(h in low for h in _FQDN_HINTS):
        found.extend(("host", m.group(1)) for m in _FQDN.finditer(text))
    hints = (
        " [" in text,  # NCCL header
        any(w in low for w in _HOST_WORDS),  # key = value
        "srun:" in text,
        "<" in text,  # peer name<port>
        "@" in text,  # user@host
        " host " in low or " node " in low,
    )
    for rx, hint in zip(_HOST_CONTEXTS, hints, strict=True):
        if hint:
            found.extend(("host", m.group(1).rstrip(".")) for m in rx.finditer(text))
    return found


@dataclass
class Redactor:
    """Collects sensitive values, gives each a stable alias, and rewrites text with them."""

    originals: dict[str, dict[str, str]] = field(default_factory=lambda: {k: {} for k in KINDS})
    _reserved: set[str] = field(default_factory=set)
    _rx: re.Pattern[str] | None = None
    _lookup: dict[str, str] = field(default_factory=dict)
    _memo: dict[str, str] = field(default_factory=dict)
    _seen: set[tuple[str, str]] = field(default_factory=set)

    # -- pass 1 ---------------------------------------------------------------------------------
    def add(self, kind: str, value: str | None) -> None:
        if not value or (kind, value) in self._seen:
            return
        self._seen.add((kind, value))
        value = value.strip()
        if not value or len(value) > 255:
            return
        if _ALIAS_FULL.match(value):
            self._reserved.add(value)
            return
        if kind == "host":
            low = value.lower()
            if (
                low in _NOT_HOSTS
                or value.isdigit()
                or any(low == d or low.endswith("." + d) for d in _PUBLIC_DOMAINS)
            ):
                return
            if _IPV4.fullmatch(value) or (":" in value and _ipv6_candidate(value)):
                kind = "ip"
                if not _valid_ip(value):
                    return
            elif any(_ALIAS_FULL.match(part) for part in value.split(".")):
                return  # e.g. host-1.cluster.local is already redacted
        if kind == "user" and (value.lower() in _NOT_HOSTS or len(value) < 2):
            return
        self._rx = None
        for k in KINDS:
            if value in self.originals[k]:
                return
        self.originals[kind][value] = ""

    def scan(self, text: str | None) -> None:
        if text:
            for kind, value in detect(text):
                self.add(kind, value)

    # -- aliases ---------------------------------------------------------------------------------
    def _finish(self) -> None:
        if self._rx is not None:
            return
        self._lookup = {}
        self._memo = {}
        for kind in KINDS:
            n = 0
            for value in self.originals[kind]:
                alias = self.originals[kind][value]
                if not alias:
                    n += 1
                    while f"{kind}-{n}" in self._reserved:
                        n += 1
                    alias = f"{kind}-{n}"
                    self.originals[kind][value] = alias
                else:
                    n = max(n, int(alias.rsplit("-", 1)[1]))
                self._lookup[value] = alias
        self._rx = _alternation(self._lookup)

    @property
    def aliases(self) -> dict[str, str]:
        """alias -> original, by kind then number."""
        self._finish()
        out: dict[str, str] = {}
        for kind in KINDS:
            pairs = sorted(self.originals[kind].items(), key=lambda kv: int(kv[1].rsplit("-", 1)[1]))
            out.update({alias: value for value, alias in pairs})
        return out

    # -- pass 2 ---------------------------------------------------------------------------------
    def apply(self, text: str) -> str:
        self._finish()
        if not text or self._rx is None:
            return text
        done = self._memo.get(text)
        if done is None:
            lookup = self._lookup
            done = self._rx.sub(lambda m: lookup[m.group(0)], text)
            if len(self._memo) < 1_000_000:
                self._memo[text] = done
        return done


def _alternation(values: dict[str, str]) -> re.Pattern[str] | None:
    """One regex matching any of ``values`` (longest first) where it is not part of a longer word."""
    if not values:
        return None
    trie: dict[str, Any] = {}
    for v in values:
        node = trie
        for ch in v:
            node = node.setdefault(ch, {})
        node[""] = {}
    body = _trie_regex(trie)
    return re.compile(rf"(?<![A-Za-z0-9]){body}(?![A-Za-z0-9])")


def _trie_regex(node: dict[str, Any]) -> str:
    ends = "" in node
    branches = [re.escape(ch) + _trie_regex(child) for ch, child in sorted(node.items()) if ch]
    if not branches:
        return ""
    # Longest alternatives first so that a longer original wins over its prefix.
    inner = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    if ends:
        return f"(?:{inner})?"
    return inner


# --- walking the model ----------------------------------------------------------------------


def _walk(obj: Any, fn: Callable[[str], str], name: str = "") -> Any:
    """A copy of ``obj`` with every string passed through ``fn`` (dataclasses, tuples, lists, dicts)."""
    if isinstance(obj, str):
        return obj if name in _SKIP_FIELDS else fn(obj)
    if obj is None or isinstance(obj, int | float):
        return obj
    if isinstance(obj, tuple):
        return tuple(_walk(x, fn, name) for x in obj)
    if hasattr(obj, "__dataclass_fields__") and not isinstance(obj, type):
        changes = {f: _walk(getattr(obj, f), fn, f) for f in obj.__dataclass_fields__}
        return dataclasses.replace(obj, **changes)
    if isinstance(obj, pl.DataFrame):
        return _walk_frame(obj, fn)
    if isinstance(obj, list):
        return [_walk(x, fn, name) for x in obj]
    if isinstance(obj, dict):
        return {(_walk(k, fn, name) if isinstance(k, str) else k): _walk(v, fn, name) for k, v in obj.items()}
    return obj


def _string_columns(df: pl.DataFrame) -> list[str]:
    return [c for c, t in df.schema.items() if t == pl.String and c not in _SKIP_FIELDS]


def _walk_frame(df: pl.DataFrame, fn: Callable[[str], str]) -> pl.DataFrame:
    exprs = []
    for col in _string_columns(df):
        uniques = df.get_column(col).drop_nulls().unique().sort().to_list()
        old, new = [], []
        for u in uniques:
            r = fn(u)
            if r != u:
                old.append(u)
                new.append(r)
        if old:
            exprs.append(pl.col(col).replace(old, new))
    return df.with_columns(exprs) if exprs else df


def _collect_hosts(incident: Incident, r: Redactor) -> None:
    """Host names the analysis itself established, ranks in order first (host-1 is rank 0's host)."""
    for info in sorted(incident.ranks, key=lambda i: i.rank):
        r.add("host", info.host)
    ev = incident.events
    if ev.height and "host" in ev.columns:
        for h in ev.get_column("host").drop_nulls().unique().sort().to_list():
            r.add("host", h)

    def add_finding(f: Finding | None) -> None:
        if f is not None:
            r.add("host", f.host)
            for key, value in sorted(f.fields.items()):
                if key.endswith("host") and isinstance(value, str):
                    r.add("host", value)

    for h in (incident.verdict, *incident.hypotheses):
        for x in h.culprit_hosts:
            r.add("host", x)
        for e in h.evidence:
            r.add("host", e.host)
    for info in incident.ranks:
        add_finding(info.first_error)
    for f in incident.findings:
        add_finding(f)
    for t in incident.timeline:
        r.add("host", t.host)
    for x in incident.host_offsets:
        r.add("host", x)
    for col in ev.columns if ev.height else ():
        if col.endswith("host") and col != "host" and ev.schema[col] == pl.String:
            for h in ev.get_column(col).drop_nulls().unique().sort().to_list():
                r.add("host", str(h))


def _scan_all(incident: Incident, r: Redactor) -> None:
    seen: set[str] = set()

    def scan(s: str) -> str:
        if s not in seen:
            seen.add(s)
            r.scan(s)
        return s

    _walk(dataclasses.replace(incident, events=pl.DataFrame()), scan)
    ev = incident.events
    for col in _string_columns(ev):
        if col == "message" and "text" in ev.columns:
            continue  # the message is the tail of the line's text: scanning the text finds it all
        for u in ev.get_column(col).drop_nulls().unique().sort().to_list():
            scan(u)


def redactor_for(incident: Incident, extra: Iterable[tuple[str, str]] = ()) -> Redactor:
    """A Redactor that knows every sensitive value of ``incident`` (plus ``extra`` (kind, value))."""
    r = Redactor()
    _collect_hosts(incident, r)
    _scan_all(incident, r)
    for kind, value in extra:
        r.add(kind, value)
    return r


def redact(incident: Incident, redactor: Redactor | None = None) -> Incident:
    """The incident with every host, address, user, e-mail and secret replaced by its alias."""
    r = redactor or redactor_for(incident)
    out: Incident = _walk(incident, r.apply)
    return dataclasses.replace(out, redacted=True)


def redact_with_map(incident: Incident) -> tuple[Incident, dict[str, str]]:
    """``redact`` plus the alias table (alias -> original) for the owner of the logs."""
    r = redactor_for(incident)
    return redact(incident, r), r.aliases


def alias_table_json(aliases: dict[str, str]) -> str:
    """The alias table as written by ``--redact-map``: ``{"host-1": "node-a07", ...}``."""
    return json.dumps(aliases, indent=2, ensure_ascii=False) + "\n"


def redact_text(text: str) -> str:
    """Redact one free text on its own (what the detectors find in it)."""
    r = Redactor()
    r.scan(text)
    return r.apply(text)
