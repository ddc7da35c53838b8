"""The typed result of an analysis: one frozen ``Incident`` that every renderer reads.

Nothing here parses or decides anything; these are plain frozen records. The events table
(``Incident.events``) is a polars DataFrame with the columns listed in ``EVENT_BASE_COLUMNS``
plus one column per field declared by the pattern library.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from nccllog import vocab
from nccllog.schema import EVENTS

SCHEMA_VERSION = 1

Confidence = vocab.Confidence
Severity = vocab.Severity

SEVERITIES: tuple[str, ...] = tuple(s.value for s in vocab.Severity)
CONFIDENCES: tuple[str, ...] = tuple(c.value for c in vocab.Confidence)

# The verdict vocabulary of the JSON contract (schema_version 1). Never rename.
CATEGORIES: tuple[str, ...] = tuple(c.value for c in vocab.Category)

# Columns every events table has, in this order; pattern fields follow, sorted by name.
EVENT_BASE_COLUMNS: dict[str, Any] = EVENTS


@dataclass(frozen=True)
class Evidence:
    """One log line that supports or refutes a hypothesis."""

    source: str
    line: int
    rank: int | None
    text: str
    host: str | None = None
    time: str | None = None
    note: str = ""


@dataclass(frozen=True)
class CollectiveRef:
    """The collective a hypothesis is about: its process group, sequence number and operation."""

    pg: str
    seq: int | None = None
    op: str | None = None


@dataclass(frozen=True)
class Hypothesis:
    """A candidate explanation: a category, the culprits, the evidence, and how sure we are."""

    category: str
    culprit_ranks: tuple[int, ...]
    culprit_hosts: tuple[str, ...]
    confidence: Confidence
    summary: str
    score: float
    evidence: tuple[Evidence, ...] = ()
    rules_in: tuple[str, ...] = ()  # why this hypothesis is supported
    rules_out: tuple[str, ...] = ()  # why the alternatives are less likely
    remediation: tuple[str, ...] = ()
    collect_next_time: tuple[str, ...] = ()
    collective: CollectiveRef | None = None  # the collective the ranks hung in, where known


@dataclass(frozen=True)
class Finding:
    """One matched line, as the JSON contract lists it."""

    pattern: str
    source: str
    line: int
    rank: int | None
    host: str | None
    time: str | None
    fields: dict[str, Any]
    severity: str = "info"
    text: str = ""
    signal: str = ""


@dataclass(frozen=True)
class Skipped:
    """A file or line range that was not analysed, and why."""

    source: str
    reason: str
    lines: str | None = None  # e.g. "120-131", or None for the whole file


@dataclass(frozen=True)
class Coverage:
    """What was read, what matched, and what was skipped.

    ``lines`` (physical lines read) = ``matched`` + ``unmatched`` + ``skipped_lines``; the skipped
    lines are read and counted but not matched one by one, and ``skipped_line_reasons`` says why
    (reason, count). ``skipped`` lists the files or line ranges not read at all, with reasons.
    """

    files: int
    lines: int
    matched: int
    unattributed: int
    skipped: tuple[Skipped, ...] = ()
    bytes_read: int = 0
    decode_replacements: int = 0
    skipped_lines: int = 0
    truncated_lines: int = 0
    notes: tuple[str, ...] = ()
    unmatched: int = 0
    skipped_line_reasons: tuple[tuple[str, int], ...] = ()
    unaligned_hosts: tuple[str, ...] = ()  # hosts whose clocks no sync point ties to the others


@dataclass(frozen=True)
class RankInfo:
    """What the logs say about one global rank."""

    rank: int
    host: str | None = None
    local_rank: int | None = None
    pids: tuple[int, ...] = ()
    sources: tuple[str, ...] = ()
    first_error: Finding | None = None
    last_time: str | None = None
    last_enqueued: int | None = None
    last_completed: int | None = None
    last_step: int | None = None
    timed_out_seq: int | None = None
    lines: int = 0
    status: str = ""  # short words: "timed out", "silent", "OOM", "exited -6", ...


@dataclass(frozen=True)
class CollectiveRow:
    """Per process group and sequence number: who reported what, who stayed silent."""

    pg: str
    seq: int
    op: str | None
    reporters: tuple[int, ...]
    expected: tuple[int, ...]
    silent: tuple[int, ...]
    numel: dict[int, tuple[int | None, int | None]] = field(default_factory=dict)
    ops: dict[int, str] = field(default_factory=dict)
    timeout_ms: int | None = None
    elapsed_ms: dict[int, int] = field(default_factory=dict)
    note: str = ""


@dataclass(frozen=True)
class TimelineEntry:
    """One moment of the merged timeline (times corrected by the host offsets)."""

    time: str | None  # ISO-8601, corrected, None for untimestamped lines placed by file order
    rank: int | None
    host: str | None
    pattern: str
    text: str
    source: str
    line: int
    severity: str = "info"


@dataclass(frozen=True)
class Advice:
    """One piece of remediation, with why it applies."""

    title: str
    why: str
    steps: tuple[str, ...] = ()
    applies_to: str = ""  # framework/version it is written for


@dataclass(frozen=True)
class SettingFinding:
    """A lint result for an environment setting seen in the logs."""

    name: str
    value: str
    status: str  # unknown | deprecated | misplaced | performance | ok
    message: str
    replacement: str | None = None
    sources: tuple[str, ...] = ()


@dataclass(frozen=True)
class Environment:
    """Versions, frameworks and settings seen in the logs."""

    frameworks: tuple[str, ...] = ()
    launcher: str | None = None
    versions: dict[str, tuple[str, ...]] = field(default_factory=dict)  # "nccl" -> ("2.20.5",)
    settings: dict[str, str] = field(default_factory=dict)  # NCCL_X -> value
    setting_findings: tuple[SettingFinding, ...] = ()


@dataclass(frozen=True)
class Incident:
    """The whole analysis. Frozen; renderers only read it."""

    verdict: Hypothesis
    hypotheses: tuple[Hypothesis, ...]
    world_size: int | None
    ranks_seen: tuple[int, ...]
    ranks_missing: tuple[int, ...]
    ranks: tuple[RankInfo, ...]
    findings: tuple[Finding, ...]
    coverage: Coverage
    events: pl.DataFrame
    collectives: tuple[CollectiveRow, ...] = ()
    timeline: tuple[TimelineEntry, ...] = ()
    host_offsets: dict[str, float] = field(default_factory=dict)  # host -> seconds to add
    unmatched_templates: tuple[tuple[str, int, str], ...] = ()  # (template, count, example source:line)
    environment: Environment = field(default_factory=Environment)
    advice: tuple[Advice, ...] = ()
    inputs: tuple[str, ...] = ()
    redacted: bool = False
