"""nccllog: name the culprit rank and cause of a crashed NCCL / torch.distributed job from its logs.

The library API::

    import nccllog

    incident = nccllog.analyze("logs/")              # files, directories, globs, .gz, or pasted text
    print(incident.verdict.category, incident.verdict.culprit_ranks, incident.verdict.confidence)
    incident.events                                  # polars DataFrame: one row per matched line
    html = nccllog.render(incident, "html")          # "text" | "markdown" | "html" | "json"
    safe = nccllog.redact(incident)                  # hosts, IPs, users, e-mails, secrets -> aliases

Every error nccllog raises on purpose is an ``nccllog.Error`` (``InputError``,
``PatternLibraryError``, ``UsageError``; nccllog.errors).

``Incident`` and everything in it are frozen dataclasses (nccllog.model).
"""

from __future__ import annotations

__version__ = "0.1.0"

from nccllog.errors import Error, InputError, PatternLibraryError, UsageError
from nccllog.model import (
    CATEGORIES,
    SCHEMA_VERSION,
    SEVERITIES,
    Advice,
    CollectiveRow,
    Coverage,
    Environment,
    Evidence,
    Finding,
    Hypothesis,
    Incident,
    RankInfo,
    RankStatus,
    SettingFinding,
    Skipped,
    TimelineEntry,
)
from nccllog.pipeline import analyze, analyze_text, attribute
from nccllog.redact import redact, redact_with_map
from nccllog.render import FORMATS, render

__all__ = [
    "CATEGORIES",
    "FORMATS",
    "SCHEMA_VERSION",
    "SEVERITIES",
    "Advice",
    "CollectiveRow",
    "Coverage",
    "Environment",
    "Error",
    "Evidence",
    "Finding",
    "Hypothesis",
    "Incident",
    "InputError",
    "PatternLibraryError",
    "RankInfo",
    "RankStatus",
    "SettingFinding",
    "Skipped",
    "TimelineEntry",
    "UsageError",
    "__version__",
    "analyze",
    "analyze_text",
    "attribute",
    "redact",
    "redact_with_map",
    "render",
]
