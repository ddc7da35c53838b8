"""The columns of each stage's table, declared once; a test per stage checks its output.

- ``LINES``: the reader's candidate lines (``ingest.reader.read_sources``);
- ``EVENTS``: every events table (the matcher's output; ``Incident.events``), in this order;
  pattern fields follow, sorted by name;
- ``HANDOFF``: the internal ``_`` columns the matcher hands to attribution (what a line's
  prefix layers and its file's path say); attribution reads and drops them;
- ``ATTRIBUTION``: the columns attribution fills (``attribution.resolve``);
- ``DIAGNOSIS``: the columns the diagnosis stage adds to the events it reads
  (``correlate.frame.prepare``; the pattern fields it reads are ``correlate.frame.FIELDS``).
"""

from __future__ import annotations

from typing import Any

import polars as pl

LINES: dict[str, Any] = {
    "source": pl.String,  # display path of the file
    "line": pl.Int64,  # 1-based physical line number
    "text": pl.String,  # the raw line
    "kw": pl.List(pl.String),  # the pattern keywords found in the line
}

EVENTS: dict[str, Any] = {
    "source": pl.String,  # display path of the file ("<stdin>" for standard input)
    "line": pl.Int64,  # 1-based physical line number in that source
    "text": pl.String,  # the raw line (ANSI stripped, capped in length)
    "message": pl.String,  # the innermost message after every recognised prefix layer
    "pattern": pl.String,  # pattern id
    "signal": pl.String,  # the pattern's role for diagnosis (see docs/patterns.md)
    "category": pl.String,  # cause category the pattern points to, or null
    "severity": pl.String,
    "rank": pl.Int64,  # global rank, null when unknown
    "local_rank": pl.Int64,
    "pg": pl.String,  # process-group id/name the message names, if any
    "pg_rank": pl.Int64,  # rank inside that process group (not global)
    "host": pl.String,
    "pid": pl.Int64,
    "time": pl.Datetime("us"),  # as logged (host-local wall clock), null when the line has none
    "repeat": pl.Int64,  # how many processes this one line stands for (Ray dedup), >= 1
    "attribution": pl.String,  # how rank was determined, or why it could not be
}

HANDOFF: dict[str, Any] = {
    "_srun_task": pl.Int64,
    "_ip": pl.String,
    "_ray_actor": pl.String,
    "_nccl_dev": pl.Int64,
    "_year_known": pl.Boolean,
    "_file_rank": pl.Int64,
    "_file_local_rank": pl.Int64,
    "_file_host": pl.String,
    "_file_pid": pl.Int64,
    "_file_evidence": pl.String,
    # beyond the matcher's first set; derived from `text` / `source` when absent
    "_rank_kind": pl.String,  # LineAttrs.rank_kind
    "_layers": pl.String,  # LineAttrs.layers joined by ","
    "_pg_desc": pl.String,
    "_src": pl.String,  # LineAttrs.src (producer file:line)
    "_logger": pl.String,
    "_file_year": pl.Int64,
    "_file_attempt": pl.Int64,
    "_file_single": pl.Boolean,
}

ATTRIBUTION: dict[str, Any] = {
    "rank": pl.Int64,  # the writer's global rank
    "local_rank": pl.Int64,
    "host": pl.String,  # as the data set spells it (NCCL's header first)
    "pid": pl.Int64,
    "time": pl.Datetime("us"),  # with the year filled where the data set gives it
    "attribution": pl.String,
    "target_rank": pl.Int64,  # the rank a launcher line is about (when the library has the field)
}

DIAGNOSIS: dict[str, Any] = {
    "_i": pl.Int64,  # the row's position in (source, line) order
    "pgk": pl.String,  # the process-group key ("0" for the default group)
    "ctime": pl.Datetime("us"),  # time corrected by the host's clock offset
}
