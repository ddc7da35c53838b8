"""The library's views of the events besides polars, and the documented event columns."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

import nccllog
from nccllog.model import EVENT_BASE_COLUMNS
from tests.report_lines import mismatch_job

README = Path(__file__).resolve().parent.parent / "README.md"


@pytest.fixture(scope="module")
def incident() -> nccllog.Incident:
    return nccllog.analyze_text(mismatch_job())


def test_records_are_the_rows_as_dicts(incident: nccllog.Incident) -> None:
    records = incident.event_records()
    assert len(records) == incident.events.height
    assert set(records[0]) == set(incident.events.columns)
    assert any(r["op"] == "BROADCAST" and r["rank"] == 7 for r in records)


@pytest.mark.skipif(importlib.util.find_spec("pyarrow") is not None, reason="pyarrow is installed")
def test_arrow_without_pyarrow_is_a_clear_error(incident: nccllog.Incident) -> None:
    with pytest.raises(ImportError, match="pip install pyarrow"):
        incident.events_arrow()


def test_arrow_stream_interface(incident: nccllog.Incident) -> None:
    assert hasattr(incident.events, "__arrow_c_stream__")


def test_every_base_column_is_documented() -> None:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("`incident.events` is a polars DataFrame") :]
    section = section[: section.index("\n\n")]
    named = set(re.findall(r"`([a-z_]+)`", section))
    assert set(EVENT_BASE_COLUMNS) <= named, set(EVENT_BASE_COLUMNS) - named
