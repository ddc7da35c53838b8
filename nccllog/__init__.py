"""nccllog: name the culprit rank and cause of a crashed NCCL / torch.distributed job from its logs.

The library API::

    import nccllog

    incident = nccllog.analyze("logs/")              # files, directories, globs, .gz, or pasted text
    print(incident.verdict.category, incident.verdict.culprit_ranks, incident.verdict.confidence)
    incident.events                                  # polars DataFrame: one row per matched line
    html = nccllog.render(incident, "html")          # "text" | "markdown" | "html" | "json"
    safe = nccllog.redact(incident)                  # hosts, IPs, users, e-mails, secrets -> aliases
    nccllog.write_part(nccllog.extract(["logs/"], shard=(0, 8)), "part-0.parquet")  # two phases

Every error nccllog raises on purpose is an ``nccllog.Error`` (``InputError``,
``PatternLibraryError``, ``UsageError``; nccllog.errors).

``Incident`` and everything in it are frozen dataclasses (nccllog.model).
"""

from __future__ import annotations

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
from nccllog.parts import extract, write_part
from nccllog.pipeline import analyze, analyze_text, attribute
from nccllog.ray_extract import ray_extract as extract_on_ray
from nccllog.redact import redact, redact_with_map
from nccllog.render import FORMATS, render
from nccllog.version import __version__

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
    "extract",
    "extract_on_ray",
    "redact",
    "redact_with_map",
    "render",
    "write_part",
]
