"""taxonomy.toml: every class places its examples and not its near-misses, through the real pipeline."""

from __future__ import annotations

import polars as pl
import pytest

from nccllog.correlate.ranks_state import classify_failures
from nccllog.correlate.taxonomy import Placement, placements


def _signal(p: Placement) -> str:
    return "error_line" if "error_line" in p.signals else p.signals[0]


# each line is read as a line of the class's own signals: error_line where the class takes it
CASES = [(p.category, line, True, _signal(p)) for p in placements() for line in p.examples] + [
    (p.category, line, False, _signal(p)) for p in placements() for line in p.near_misses
]


def _placed(line: str, signal: str) -> str:
    ev = pl.DataFrame(
        {
            "signal": [signal],
            "severity": ["error"],
            "text": [line],
            "message": [line],
            "error_name": [None],
            "signal_name": [None],
            "exitcode": [None],
            "xid": [None],
            "ib_status": [None],
            "category": [None],
        },
        schema_overrides={
            "exitcode": pl.Int64,
            "xid": pl.Int64,
            "ib_status": pl.Int64,
            "category": pl.String,
        },
    )
    return str(classify_failures(ev)["_fcat"][0])


@pytest.mark.parametrize(("category", "line", "fits", "signal"), CASES)
def test_class_places_its_examples(category: str, line: str, fits: bool, signal: str) -> None:
    got = _placed(line, signal)
    assert (got == category) == fits, f"{line!r} placed as {got}"


def test_boilerplate_lists_of_causes_do_not_place() -> None:
    line = (
        "ray.exceptions.ActorDiedError: The actor died. There are some potential root causes. (1) The process "
        "is killed by SIGKILL by OOM killer due to high memory usage. (3) SIGSEGV or other errors."
    )
    assert _placed(line, "actor_died") == "other"
