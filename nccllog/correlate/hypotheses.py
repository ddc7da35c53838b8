"""The names ``correlate/setup.py`` still reads from the rules' former single module.

The rules live in ``nccllog.correlate.rules`` (one module per rule family); new code imports from
there.
"""

from __future__ import annotations

from nccllog.correlate.rules.base import (
    Context,
    Draft,
    _first,
    _reporters_text,
    _timeout_rows,
    evidence,
)
from nccllog.correlate.rules.startup import STOP_WORDS, _store_address, startup_hang
from nccllog.correlate.rules.wording import _bare

__all__ = [
    "STOP_WORDS",
    "Context",
    "Draft",
    "_bare",
    "_first",
    "_reporters_text",
    "_store_address",
    "_timeout_rows",
    "evidence",
    "startup_hang",
]
