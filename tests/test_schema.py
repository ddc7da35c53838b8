"""Each stage's output has the columns nccllog/schema.py declares for it, with their types."""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest

from nccllog import schema
from nccllog.attribution import resolve
from nccllog.correlate.frame import FIELDS, prepare
from nccllog.ingest.reader import read_sources
from nccllog.ingest.sources import Source
from nccllog.match.keywords import prefilter_keywords
from nccllog.match.library import Library, load_library
from nccllog.match.matcher import match_lines
from nccllog.pipeline import analyze_text

LOG = "\n".join(
    [
        "gpu-a01:4101:4190 [0] NCCL INFO comm 0x5a1c2e0 rank 0 nranks 2 cudaDev 0 busId 1b000 - Init COMPLETE",
        "gpu-a02:4102:4191 [0] NCCL INFO comm 0x6b2d3f0 rank 1 nranks 2 cudaDev 0 busId 1b000 - Init COMPLETE",
        "[rank1]:[E1124 09:12:44.102938271 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) "
        "ran for 600012 milliseconds before timing out.",
        "an unrelated line",
    ]
).encode()


@pytest.fixture(scope="module")
def library() -> Library:
    return load_library()


def _schema_of(df: pl.DataFrame, names: dict[str, Any]) -> dict[str, Any]:
    return {n: df.schema[n] for n in names}


def _lines(library: Library) -> pl.DataFrame:
    read = read_sources([Source(name="job.log", data=LOG)], prefilter_keywords(library))
    return read.lines


def test_lines(library: Library) -> None:
    lines = _lines(library)
    assert dict(lines.schema) == schema.LINES
    assert lines.height >= 3


def test_events_and_handoff(library: Library) -> None:
    events = match_lines(_lines(library), library).events
    assert list(events.columns[: len(schema.EVENTS)]) == list(schema.EVENTS)
    assert _schema_of(events, schema.EVENTS) == schema.EVENTS
    assert _schema_of(events, schema.HANDOFF) == schema.HANDOFF
    assert events.height >= 3


def test_attribution(library: Library) -> None:
    events, _topology = resolve(match_lines(_lines(library), library).events)
    assert _schema_of(events, schema.ATTRIBUTION) == schema.ATTRIBUTION
    assert not [c for c in events.columns if c.startswith("_")]  # the hand-off is consumed
    assert set(events["rank"].drop_nulls().to_list()) == {0, 1}


def test_diagnosis_frame(library: Library) -> None:
    events, _topology = resolve(match_lines(_lines(library), library).events)
    ev = prepare(events)
    assert _schema_of(ev, schema.DIAGNOSIS) == schema.DIAGNOSIS
    assert _schema_of(ev, FIELDS) == FIELDS


def test_incident_events() -> None:
    incident = analyze_text(LOG)
    assert list(incident.events.columns[: len(schema.EVENTS)]) == list(schema.EVENTS)
    assert _schema_of(incident.events, schema.EVENTS) == schema.EVENTS


def test_render_does_not_import_the_package_root() -> None:
    """The version comes from package metadata (nccllog.version), not from nccllog/__init__."""
    import ast
    from pathlib import Path

    import nccllog
    from nccllog.version import __version__

    assert nccllog.__version__ == __version__
    root = Path(nccllog.__file__).parent / "render"
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                assert node.module != "nccllog", f"{path.name} imports the package root"
            if isinstance(node, ast.Import):
                assert all(a.name != "nccllog" for a in node.names), f"{path.name} imports the package root"
