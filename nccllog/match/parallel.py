"""Matching on several cores: the candidate lines split by file among worker processes.

Matching is a function of each file's lines alone (the repeat bound counts per file, the memos
only save work), so the lines of a large job, cut into runs of whole files, matched apart and
joined in order, give the table one process gives, row for row. The runs wait in one queue;
the main process and each worker (``python -m nccllog.match.worker``: a process of its own, so no
fork of a process that runs polars' threads and no re-import of the caller's script) take the
next run as they finish one, so a worker that starts late or a slow run delays no one. Lines
and events travel as Arrow IPC over the worker's pipes, the rest as JSON; nothing is unpickled.

A worker loads the library from the folders the caller's was loaded from and checks that it is
the same one (a fingerprint of its patterns). A run a worker did not give back (it could not
start, failed, or found another library) is matched in the main process: slower, never
different.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import os
import struct
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import IO

import polars as pl

from nccllog.match.library import Library
from nccllog.match.matcher import MatchResult, concat_columns, events_schema, match_lines
from nccllog.model import Skipped

# Candidate lines each process must have to be worth a worker: one starts in about a second
# and matches some 40,000 lines a second (2 cores); below this, one process matches alone.
MIN_LINES_PER_PROCESS = 50_000
MAX_PROCESSES = 8  # what one analysis uses at most, on machines with more cores
# Lines of a run (whole files, so about): small enough that the processes finish together (a
# run takes about half a second), large enough that each run's own memos of messages pay.
RUN_LINES = 16_384
_FRAME = struct.Struct("<Q")  # every message on the pipes: its length, then its bytes


def default_processes() -> int:
    """The cores this process may use, at most ``MAX_PROCESSES``."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_PROCESSES))


def match_lines_parallel(
    lines: pl.DataFrame,
    library: Library,
    *,
    processes: int | None = None,
    keep_unmatched: bool = False,
    min_lines_per_process: int | None = None,
) -> MatchResult:
    """``match_lines`` on up to ``processes`` processes (None: ``default_processes()``), each with
    at least ``min_lines_per_process`` lines (None: ``MIN_LINES_PER_PROCESS``); the same result."""
    wanted = default_processes() if processes is None else max(1, processes)
    least = MIN_LINES_PER_PROCESS if min_lines_per_process is None else max(1, min_lines_per_process)
    count = min(wanted, lines.height // least)
    # a worker runs this interpreter (empty where Python cannot tell it) on the library's folders
    able = count >= 2 and bool(library.dirs) and bool(sys.executable)
    runs = _runs(lines, max(2 * count, lines.height // RUN_LINES)) if able else []
    if len(runs) < 2:
        return match_lines(lines, library, keep_unmatched=keep_unmatched)
    queue = _Queue([lines.slice(start, length) for start, length in runs])
    request = {
        "dirs": list(library.dirs),
        "fingerprint": fingerprint(library),
        "keep_unmatched": keep_unmatched,
    }
    workers = [_Worker(request, queue, events_schema(library)) for _ in range(count - 1)]
    while (job := queue.take()) is not None:
        queue.done(job, match_lines(queue.runs[job], library, keep_unmatched=keep_unmatched))
    for w in workers:
        w.join()
    results = [
        got or match_lines(queue.runs[i], library, keep_unmatched=keep_unmatched)
        for i, got in enumerate(queue.results)
    ]
    return merge_results(results, events_schema(library))


def _runs(lines: pl.DataFrame, count: int) -> list[tuple[int, int]]:
    """(offset, length) of up to ``count`` runs of about equal size, each of whole files; one run
    where the files' lines are not each together (then the repeat bound's counts span the input)."""
    src = lines.get_column("source")
    starts = src.ne_missing(src.shift(1)).arg_true()  # the first row of each file (row 0 included)
    if count < 2 or starts.len() != src.n_unique():
        return [(0, lines.height)]
    bounds = [0]
    for k in range(1, count):
        cut = int(starts.search_sorted(lines.height * k // count, side="left"))
        at = int(starts[cut]) if cut < starts.len() else lines.height  # the next file's first row
        if bounds[-1] < at < lines.height:
            bounds.append(at)
    bounds.append(lines.height)
    return [(a, b - a) for a, b in itertools.pairwise(bounds)]


def fingerprint(library: Library) -> str:
    """A digest of the library's patterns: a worker's library must have the same one."""
    h = hashlib.sha256()
    for p in library.patterns:
        h.update(f"{p.id}\0{p.path}\0{p.regex.pattern}\0{sorted(p.keywords)}\n".encode())
    return h.hexdigest()


def merge_results(results: list[MatchResult], schema: dict[str, pl.DataType]) -> MatchResult:
    """The MatchResults of runs of whole files, in order, as one: what one run over all gives."""
    counts: Counter[str] = Counter()
    examples: dict[str, str] = {}
    for r in results:
        for tpl, n, example in r.templates:
            counts[tpl] += n
            examples.setdefault(tpl, example)  # the first run's: the first line in input order
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return MatchResult(
        events=concat_columns([r.events for r in results], schema),
        templates=tuple((t, n, examples[t]) for t, n in ordered),
        overflow_fields=sum(r.overflow_fields for r in results),
        timed_out=tuple(sorted((s for r in results for s in r.timed_out), key=lambda s: s.source)),
        thinned_lines=sum(r.thinned_lines for r in results),
    )


class _Queue:
    """The runs, handed out in order, and the result of each."""

    def __init__(self, runs: list[pl.DataFrame]) -> None:
        self.runs = runs
        self.results: list[MatchResult | None] = [None] * len(runs)
        self._next = 0
        self._lock = threading.Lock()

    def take(self) -> int | None:
        with self._lock:
            if self._next >= len(self.runs):
                return None
            self._next += 1
            return self._next - 1

    def done(self, job: int, result: MatchResult) -> None:
        self.results[job] = result


class _Worker:
    """One worker process and the thread that feeds it runs from the queue and reads its results."""

    def __init__(self, request: dict[str, object], queue: _Queue, schema: dict[str, pl.DataType]) -> None:
        self.queue = queue
        self.schema = schema
        self.thread = threading.Thread(target=self._serve, args=(request,), daemon=True)
        self.thread.start()

    def join(self) -> None:
        self.thread.join()

    def _serve(self, request: dict[str, object]) -> None:
        package_root = str(Path(__file__).resolve().parent.parent.parent)
        path = os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "nccllog.match.worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env={**os.environ, "PYTHONPATH": path},
            )
        except OSError:
            return  # its runs are matched by the others
        assert proc.stdin is not None and proc.stdout is not None
        try:
            send(proc.stdin, json.dumps(request).encode())
            while (job := self.queue.take()) is not None:
                buf = io.BytesIO()
                run = self.queue.runs[job]
                run.select(
                    [c for c in ("source", "line", "text", "kw") if c in run.columns]
                ).write_ipc_stream(buf)
                send(proc.stdin, buf.getvalue())
                meta, events = receive(proc.stdout), receive(proc.stdout)
                if meta is None or events is None:
                    return  # it stopped (another library, a crash): the run is matched in the main process
                self.queue.done(job, read_result(meta, events, self.schema))
            send(proc.stdin, b"")  # no more runs
        except (OSError, ValueError, pl.exceptions.PolarsError):
            return
        finally:
            proc.stdin.close()
            proc.kill()
            proc.wait()


def send(pipe: IO[bytes], data: bytes) -> None:
    """One message: its length, then its bytes."""
    pipe.write(_FRAME.pack(len(data)))
    pipe.write(data)
    pipe.flush()


def receive(pipe: IO[bytes]) -> bytes | None:
    """One message sent by ``send``; None at the end of the stream."""
    head = pipe.read(_FRAME.size)
    if len(head) < _FRAME.size:
        return None
    (size,) = _FRAME.unpack(head)
    data = pipe.read(size)
    return data if len(data) == size else None


def write_result(result: MatchResult) -> tuple[bytes, bytes]:
    """A MatchResult as (JSON of its counts, IPC of its events' columns that hold a value)."""
    meta = {
        "templates": [list(t) for t in result.templates],
        "overflow_fields": result.overflow_fields,
        "timed_out": [[s.source, s.reason, s.lines] for s in result.timed_out],
        "thinned_lines": result.thinned_lines,
    }
    ev = result.events
    buf = io.BytesIO()
    ev.select([c for c in ev.columns if ev[c].null_count() < ev.height]).write_ipc_stream(buf)
    return json.dumps(meta).encode(), buf.getvalue()


def read_result(meta_bytes: bytes, events_bytes: bytes, schema: dict[str, pl.DataType]) -> MatchResult:
    """What ``write_result`` wrote; the columns left out come back null (scalar columns)."""
    meta = json.loads(meta_bytes)
    events = pl.read_ipc_stream(io.BytesIO(events_bytes))
    missing = [
        pl.lit(None, dtype).alias(name) for name, dtype in schema.items() if name not in events.columns
    ]
    return MatchResult(
        events=events.with_columns(missing).select(list(schema)),
        templates=tuple((t, n, ex) for t, n, ex in meta["templates"]),
        overflow_fields=int(meta["overflow_fields"]),
        timed_out=tuple(Skipped(source=s, reason=r, lines=ln) for s, r, ln in meta["timed_out"]),
        thinned_lines=int(meta["thinned_lines"]),
    )
