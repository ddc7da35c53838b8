"""Time strings are read in one module, nccllog/ingest/timestamps.py: log text with
``parse_timestamp``, the model's ISO times with ``parse_iso`` (docs/architecture.md, design rules)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

import nccllog
from nccllog.ingest.timestamps import parse_iso

ROOT = Path(nccllog.__file__).parent
OWNER = ROOT / "ingest" / "timestamps.py"
# The standard library's and polars' string-to-time readers; any use belongs in the owner.
_READERS = re.compile(r"\b(?:fromisoformat|strptime|to_datetime|to_date|to_time)\(")


@pytest.mark.parametrize(
    "t",
    [
        datetime(2025, 10, 23, 14, 2, 17),
        datetime(2025, 10, 23, 14, 2, 17, 412903),
        datetime(2000, 2, 29, 0, 0, 1, 7),
    ],
)
def test_parse_iso_reads_back_what_the_model_writes(t: datetime) -> None:
    assert parse_iso(t.isoformat()) == t


def test_parse_iso_keeps_the_wall_clock_of_an_offset() -> None:
    aware = datetime(2025, 10, 23, 14, 2, 17, tzinfo=timezone(timedelta(hours=2)))
    assert parse_iso(aware.isoformat()) == datetime(2025, 10, 23, 14, 2, 17)


@pytest.mark.parametrize("text", [None, "", "-", "not a time", "2025-13-01T00:00:00", "1023 14:02:17.412903"])
def test_parse_iso_refuses_what_is_not_iso(text: str | None) -> None:
    assert parse_iso(text) is None


def test_no_other_module_parses_a_time_string() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in sorted(ROOT.rglob("*.py"))
        if path != OWNER
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if _READERS.search(line) and not line.lstrip().startswith("#")
    ]
    assert not found, "read time strings through nccllog/ingest/timestamps.py:\n" + "\n".join(found)
