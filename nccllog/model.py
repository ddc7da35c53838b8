"""The typed result of an analysis: one frozen ``Incident`` that every renderer reads.

Nothing here parses or decides anything; these are plain frozen records. The events table
(``Incident.events``) is a polars DataFrame with the columns listed in ``EVENT_BASE_COLUMNS``
plus one column per field declared by the pattern library.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
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


class RankStatus(StrEnum):
    """Where one rank stood when the job ended: ``RankInfo.state`` (and ``per_rank[].state`` in
    the JSON) holds the value. A job that did not finish never gives ``finished``."""

    TIMED_OUT = "timed_out"  # its watchdog timed out in a collective (status says which)
    NOT_IN_COLLECTIVE = "not_in_collective"  # never reached the collective the others waited in
    CRASHED = "crashed"  # it logged a failure of its own (OOM, CUDA error, signal, Xid, ...)
    EXITED = "exited"  # its exit code is known, nothing else
    HUNG_IN_INIT = "hung_in_init"  # the job never got past setup; this rank logged no error
    NO_ERROR_LOGGED = "no_error_logged"  # the job failed; this rank's lines show no error
    FINISHED = "finished"  # the job finished (a no_failure verdict, medium or high) and so did this rank
    NO_LOG = "no_log"  # named by other ranks, no line of its own


@dataclass(frozen=True)
class RankInfo:
    """What the logs say about one global rank.

    ``status`` is the words a report shows ("timed out at ALLREDUCE #5224", "not in the
    collective", "no error logged", ...); ``state`` is the same as a ``RankStatus`` value;
    ``stuck_since`` is when a timed-out rank entered that collective (the timeout line's time
    minus the "ran for N ms" it reports); ``culprit`` is set for the verdict's culprit ranks, ``outlier`` for a rank whose state or
    progress differs from most ranks'.
    """

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
    status: str = ""  # short words: "timed out at ALLREDUCE #5224", "crashed (OOM)", "exited -6", ...
    state: str = ""  # a RankStatus value
    stuck_since: str | None = None  # ISO time it entered the collective it timed out in
    culprit: bool = False
    outlier: bool = False


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
    mixed_input: str = ""  # when the input held several jobs: which one was analysed (else "")

    def event_records(self) -> list[dict[str, Any]]:
        """The events table as plain records: one dict per row, keyed by column (``time`` a
        ``datetime`` or None), for code that does not use polars."""
        return self.events.to_dicts()

    def events_arrow(self) -> Any:
        """The events table as a ``pyarrow.Table`` (needs pyarrow, which nccllog does not
        install). Without pyarrow, any Arrow consumer reads ``incident.events`` directly through
        the Arrow C stream interface (``__arrow_c_stream__``)."""
        try:
            import pyarrow
        except ImportError as exc:  # an optional dependency: Python's own error type for it
            raise ImportError("events_arrow() needs pyarrow: pip install pyarrow") from exc
        return pyarrow.table(self.events)
