"""Load and check the pattern library (TOML files, one pattern each; see docs/patterns.md)."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import regex

from nccllog.attribution.columns import INTERNAL_SCHEMA
from nccllog.errors import PatternLibraryError
from nccllog.model import CATEGORIES, EVENT_BASE_COLUMNS, SEVERITIES
from nccllog.vocab import FieldType, Signal

SIGNALS: tuple[str, ...] = tuple(s.value for s in Signal)
# clock: a duration printed as [H:]MM:SS (tqdm elapsed), stored as float seconds.
FIELD_TYPES: tuple[str, ...] = tuple(t.value for t in FieldType)
_REQUIRED = ("id", "title", "producer", "family", "versions", "severity", "signal", "keywords", "regex")
_OPTIONAL = (
    "category",
    "meaning",
    "causes",
    "remediation",
    "fields",
    "examples",
    "near_misses",
    "fallback",
    "volume",
    "keep_last",
    "keep_first",
    "unmatched",
    "weight",
    "witness",
    "banner",
    "framework",
)
# Internal columns the matcher adds for rank resolution; pattern fields may not use these names either.
INTERNAL_COLUMNS = tuple(INTERNAL_SCHEMA)


@dataclass(frozen=True)
class Example:
    """An example line of a pattern and what matching it must yield."""

    line: str
    fields: dict[str, Any]
    rank: int | None = None
    version: str | None = None


@dataclass(frozen=True)
class Pattern:
    """One compiled pattern of the library."""

    id: str
    title: str
    producer: str
    family: str
    versions: str
    severity: str
    signal: str
    keywords: tuple[str, ...]
    regex: regex.Pattern[str]
    fields: dict[str, str]
    category: str | None = None
    meaning: str = ""
    causes: tuple[str, ...] = ()
    remediation: tuple[str, ...] = ()
    examples: tuple[Example, ...] = ()
    near_misses: tuple[str, ...] = ()
    fallback: bool = False  # only used when no other pattern matched the line
    high_volume: bool = False  # a line per collective/step: only the last lines of each file matter
    keep_last: int | None = None  # high volume: how many last lines of each writer the reader keeps
    keep_first: bool = False  # high volume: the reader also keeps the first lines of each writer
    # "drop": a line that has this pattern's keyword but does not match is no event. For keywords
    # that also occur in ordinary log prefixes (`.py:` in c10's `run.py:793]`).
    drop_unmatched: bool = False
    weight: float | None = None  # its lines' weight as a cause, where the producer states the cause
    # the printing rank saw the fault happen, it is not shown to have caused it (NCCL's device-side
    # mismatch check fires on whichever rank noticed): the rules name no culprit from it alone
    witness: bool = False
    banner: bool = False  # printed once by each process as it starts: two of one rank are two processes
    framework: str | None = None  # the framework whose own code prints the line (advice/detect.py)
    path: str = ""


@dataclass(frozen=True)
class Library:
    """All patterns, with the keyword index the prefilter uses."""

    patterns: tuple[Pattern, ...]
    keywords: tuple[str, ...]  # distinct keywords, sorted
    keyword_patterns: dict[str, tuple[int, ...]] = field(default_factory=dict)
    field_types: dict[str, str] = field(default_factory=dict)
    quiet_keywords: frozenset[str] = frozenset()  # keywords only of patterns that drop unmatched lines
    # The folders it was loaded from, built-in first: a worker process loads the same library
    # from them (spread.py); empty for a library built another way.
    dirs: tuple[str, ...] = ()

    @property
    def failure_weights(self) -> dict[str, float]:
        """Pattern id -> its ``weight`` key, for the patterns that have one."""
        return {p.id: p.weight for p in self.patterns if p.weight is not None}

    @property
    def witness_patterns(self) -> frozenset[str]:
        """Ids of the patterns whose printing rank only witnessed the fault (``witness = true``)."""
        return frozenset(p.id for p in self.patterns if p.witness)

    @property
    def banner_patterns(self) -> frozenset[str]:
        """Ids of the patterns each process prints once as it starts (``banner = true``)."""
        return frozenset(p.id for p in self.patterns if p.banner)

    def get(self, pattern_id: str) -> Pattern | None:
        """Return the pattern with this id, or None."""
        for p in self.patterns:
            if p.id == pattern_id:
                return p
        return None


LibraryError = PatternLibraryError  # the name this module used before nccllog.errors


def builtin_pattern_dir() -> Path:
    """The shipped pattern folder: nccllog/patterns when installed, else the repository's patterns/."""
    here = Path(__file__).resolve().parent.parent
    installed = here / "patterns"
    if installed.is_dir():
        return installed
    return here.parent / "patterns"


def load_library(extra_dirs: Iterable[str | Path] = (), *, builtin: bool = True) -> Library:
    """Load the built-in patterns plus those in ``extra_dirs``; raise PatternLibraryError listing all problems."""
    dirs: list[Path] = [builtin_pattern_dir()] if builtin else []
    problems: list[str] = []
    for d in extra_dirs:
        p = Path(d)
        if not p.is_dir():
            problems.append(f"{p}: not a directory")
        else:
            dirs.append(p)
    files = sorted({f for d in dirs for f in d.rglob("*.toml")}, key=lambda f: (str(f.parent), f.name))
    patterns: list[Pattern] = []
    for f in files:
        pat = _load_file(f, problems)
        if pat is not None:
            patterns.append(pat)
    field_types: dict[str, str] = {}
    field_owner: dict[str, str] = {}
    seen: dict[str, str] = {}
    for pat in patterns:
        if pat.id in seen:
            problems.append(f"{pat.path}: duplicate id {pat.id!r} (also in {seen[pat.id]})")
        seen[pat.id] = pat.path
        for name, typ in pat.fields.items():
            if name in field_types and field_types[name] != typ:
                problems.append(
                    f"{pat.path}: field {name!r} is {typ} here but {field_types[name]} in {field_owner[name]}"
                )
            field_types.setdefault(name, typ)
            field_owner.setdefault(name, pat.path)
    if problems:
        raise PatternLibraryError(problems)
    # The library's order is its ids' order, never its files' paths (candidates are tried, and a
    # line's events written, in this order), so moving or renaming a file changes no output.
    patterns.sort(key=lambda pat: pat.id)
    index: dict[str, list[int]] = {}
    for i, pat in enumerate(patterns):
        for k in pat.keywords:
            index.setdefault(k, []).append(i)
    return Library(
        patterns=tuple(patterns),
        keywords=tuple(sorted(index)),
        keyword_patterns={k: tuple(v) for k, v in sorted(index.items())},
        field_types=dict(sorted(field_types.items())),
        quiet_keywords=frozenset(k for k, v in index.items() if all(patterns[i].drop_unmatched for i in v)),
        dirs=tuple(str(d.resolve()) for d in dirs),
    )


def _load_file(path: Path, problems: list[str]) -> Pattern | None:
    where = str(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        problems.append(f"{where}: cannot read: {exc}")
        return None
    before = len(problems)
    for key in _REQUIRED:
        if key not in data:
            problems.append(f"{where}: missing key {key!r}")
    for key in data:
        if key not in _REQUIRED and key not in _OPTIONAL:
            problems.append(f"{where}: unknown key {key!r}")
    if len(problems) > before:
        return None
    pid = str(data["id"])
    where = f"{path} [{pid}]"
    if data["severity"] not in SEVERITIES:
        problems.append(f"{where}: severity {data['severity']!r} not in {SEVERITIES}")
    if data.get("volume", "normal") not in ("normal", "high"):
        problems.append(f"{where}: volume {data['volume']!r} is not 'normal' or 'high'")
    w = data.get("weight")
    if w is not None and (type(w) not in (int, float) or not 0 <= w <= 1 or "category" not in data):
        problems.append(f"{where}: weight {w!r} must be a number 0-1, with a category")
    for key in ("witness", "banner", "keep_first"):
        if type(data.get(key, False)) is not bool:
            problems.append(f"{where}: {key} {data[key]!r} is not true or false")
    if data.get("unmatched", "keep") not in ("keep", "drop"):
        problems.append(f"{where}: unmatched {data['unmatched']!r} is not 'keep' or 'drop'")
    keep_last = data.get("keep_last")
    if keep_last is not None and (
        type(keep_last) is not int or not 1 <= keep_last <= 1000 or data.get("volume") != "high"
    ):
        problems.append(f"{where}: keep_last {keep_last!r} must be an integer 1-1000, with volume = 'high'")
    if data.get("keep_first") is True and data.get("volume") != "high":
        problems.append(f"{where}: keep_first needs volume = 'high'")
    if data["signal"] not in SIGNALS:
        problems.append(f"{where}: signal {data['signal']!r} is not a known signal")
    category = data.get("category")
    if category is not None and category not in CATEGORIES:
        problems.append(f"{where}: category {category!r} is not a verdict category")
    keywords = data["keywords"]
    if not isinstance(keywords, list) or not keywords or not all(isinstance(k, str) and k for k in keywords):
        problems.append(f"{where}: keywords must be a non-empty list of non-empty strings")
        keywords = []
    fields = data.get("fields", {})
    if not isinstance(fields, dict):
        problems.append(f"{where}: [fields] must be a table")
        fields = {}
    for name, typ in fields.items():
        if typ not in FIELD_TYPES:
            problems.append(f"{where}: field {name!r} has type {typ!r}, not one of {FIELD_TYPES}")
        if name in EVENT_BASE_COLUMNS or name in INTERNAL_COLUMNS:
            problems.append(f"{where}: field name {name!r} collides with an event table column")
    try:
        rx = regex.compile(data["regex"])
    except (regex.error, TypeError) as exc:
        problems.append(f"{where}: regex does not compile: {exc}")
        return None
    groups = set(rx.groupindex)
    if groups != set(fields):
        problems.append(f"{where}: regex groups {sorted(groups)} differ from [fields] {sorted(fields)}")
    examples = []
    for ex in data.get("examples", []):
        if not isinstance(ex, dict) or not isinstance(ex.get("line"), str):
            problems.append(f"{where}: every [[examples]] needs a string 'line'")
            continue
        if keywords and not any(k in ex["line"] for k in keywords):
            problems.append(f"{where}: no keyword occurs in example {ex['line'][:80]!r}")
        for k in ex.get("fields", {}):
            if k not in fields:
                problems.append(f"{where}: example names unknown field {k!r}")
        examples.append(
            Example(
                line=ex["line"],
                fields=dict(ex.get("fields", {})),
                rank=ex.get("rank"),
                version=ex.get("version"),
            )
        )
    near = []
    for nm in data.get("near_misses", []):
        if not isinstance(nm, dict) or not isinstance(nm.get("line"), str):
            problems.append(f"{where}: every [[near_misses]] needs a string 'line'")
            continue
        near.append(nm["line"])
    if not examples:
        problems.append(f"{where}: needs at least one [[examples]]")
    if not near:
        problems.append(f"{where}: needs at least one [[near_misses]]")
    framework = data.get("framework")
    if framework is not None and not (
        isinstance(framework, str) and regex.fullmatch(r"[a-z][a-z0-9_-]*", framework)
    ):
        problems.append(f"{where}: framework must be a lower-case name like 'deepspeed', not {framework!r}")
    if len(problems) > before:
        return None
    return Pattern(
        id=pid,
        title=str(data["title"]),
        producer=str(data["producer"]),
        family=str(data["family"]),
        versions=str(data["versions"]),
        severity=str(data["severity"]),
        signal=str(data["signal"]),
        keywords=tuple(keywords),
        regex=rx,
        fields={str(k): str(v) for k, v in fields.items()},
        category=category,
        meaning=str(data.get("meaning", "")).strip(),
        causes=tuple(str(c) for c in data.get("causes", [])),
        remediation=tuple(str(r) for r in data.get("remediation", [])),
        examples=tuple(examples),
        near_misses=tuple(near),
        fallback=bool(data.get("fallback", False)),
        high_volume=data.get("volume") == "high",
        keep_last=keep_last,
        keep_first=data.get("keep_first") is True,
        drop_unmatched=data.get("unmatched") == "drop",
        weight=float(data["weight"]) if type(data.get("weight")) in (int, float) else None,
        witness=data.get("witness") is True,
        banner=data.get("banner") is True,
        framework=framework,
        path=str(path),
    )
