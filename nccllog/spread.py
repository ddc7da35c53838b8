"""The per-file stages on several cores: reading and matching, spread over worker processes.

Reading and matching are functions of each file alone (the reader keeps a file's candidate
lines by its own content; the matcher's repeat bound counts per file, its memos only save
work), so a large job's files, cut into runs, read and matched apart and joined in order, give
the tables one process gives, row for row. The runs wait in one queue; the main process and
each worker take the next run as they finish one, so a worker that starts late or a slow run
delays no one.

A worker runs ``nccllog.spread_worker`` in a process of its own, with the caller's module path:
no fork of a process that runs polars' threads, and no re-import of the caller's script. Lines
and events travel as Arrow IPC over its pipes, a run's file statistics and dumps as a part
(parts.py, validated as any part is), the rest as JSON; nothing is unpickled. It loads the library from the folders the
caller's came from and checks that it is the same one (a fingerprint of its patterns).

Nothing here changes a result: a run a worker does not give back (it could not start, failed,
or found another library) is done in the main process, and input whose reading is not per file
(standard input, Parquet files among the files, decompression that reaches the limit over all
inputs) is read in one pass, as without workers.
"""

from __future__ import annotations

import dataclasses
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import polars as pl

from nccllog import parts
from nccllog.ingest.reader import CANDIDATE_SCHEMA, ReadResult, in_file_order
from nccllog.ingest.sources import Source
from nccllog.match.library import Library
from nccllog.match.matcher import MatchResult, concat_columns, events_schema, match_lines
from nccllog.model import Skipped

# Candidate lines each process must have to be worth a worker: one starts in about a second
# and matches some 40,000 lines a second (2 cores); below this, one process matches alone.
MIN_LINES_PER_PROCESS = 50_000
# Files each process must have to be worth a worker that reads. The cost spread is per file
# (opening, the checks of its first bytes, decoding); polars already reads a large file on every
# core. Measured on 2 cores: 16,384 files of 64 KiB read and matched in 8.6 s instead of 10.3 s,
# 1,024 of 1 MiB in 3.7 s instead of 3.4 s.
MIN_FILES_PER_PROCESS = 2048
MAX_PROCESSES = 8  # what one analysis uses at most, on machines with more cores
# A run: small enough that the processes finish together (a run takes about half a second),
# large enough that each run's own memos of messages pay.
RUN_LINES = 16_384
RUN_BYTES = 32 * 2**20
_FRAME = struct.Struct("<Q")  # every message on the pipes: its length, then its bytes


def default_processes() -> int:
    """The cores this process may use, at most ``MAX_PROCESSES``."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_PROCESSES))


def _count(processes: int | None, size: int, least: int) -> int:
    """Processes for ``size`` units of work, at least ``least`` each; 1 where no worker would pay."""
    wanted = default_processes() if processes is None else max(1, processes)
    return max(1, min(wanted, size // max(1, least)))


# ----------------------------------------------------------------------------- matching


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
    least = MIN_LINES_PER_PROCESS if min_lines_per_process is None else min_lines_per_process
    count = _count(processes, lines.height, least)
    runs = _line_runs(lines, max(2 * count, lines.height // RUN_LINES)) if count > 1 else []
    if len(runs) < 2 or not _can_spread(library):
        return match_lines(lines, library, keep_unmatched=keep_unmatched)
    slices = [lines.slice(start, length) for start, length in runs]
    schema = events_schema(library)

    def here(i: int) -> MatchResult:
        return match_lines(slices[i], library, keep_unmatched=keep_unmatched)

    def message(i: int) -> tuple[dict[str, Any], bytes]:
        run = slices[i]
        return {"kind": "lines"}, _ipc(run.select([c for c in ("source", "line", "text", "kw") if c in run]))

    def answer(i: int, got: list[bytes]) -> MatchResult:
        return read_result(got[0], got[1], schema)

    results = _Pool(library, count, {"keep_unmatched": keep_unmatched}).run(len(runs), here, message, answer)
    return merge_results(results, schema)


def _line_runs(lines: pl.DataFrame, count: int) -> list[tuple[int, int]]:
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


def merge_results(results: Sequence[MatchResult], schema: dict[str, Any]) -> MatchResult:
    """The MatchResults of runs of whole files as one: what one run over all their lines gives.
    Runs in file order join as they are; others (an archive's members sort apart from the
    archive) are put in (source, line) order, as the reader orders one pass's lines."""
    counts: Counter[str] = Counter()
    examples: dict[str, tuple[str, int]] = {}
    for r in results:
        for tpl, n, example in r.templates:
            counts[tpl] += n
            source, _, line = example.rpartition(":")
            at = (source, int(line))
            examples[tpl] = min(examples.get(tpl, at), at)  # one pass keeps the first in file order
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    events = concat_columns([r.events for r in results], schema)
    if not in_file_order(events.select("source", "line")):
        events = events.sort("source", "line", maintain_order=True)
    return MatchResult(
        events=events,
        templates=tuple((t, n, f"{examples[t][0]}:{examples[t][1]}") for t, n in ordered),
        overflow_fields=sum(r.overflow_fields for r in results),
        timed_out=tuple(sorted((s for r in results for s in r.timed_out), key=lambda s: s.source)),
        thinned_lines=sum(r.thinned_lines for r in results),
    )


# ----------------------------------------------------------------------------- reading and matching


@dataclass(frozen=True)
class ReadAndMatched:
    """What reading and matching files found: parts.collect's Extraction without its candidate
    lines (they are matched already), and the MatchResult of those lines."""

    extraction: parts.Extraction
    matched: MatchResult


def read_and_match(
    sources: Sequence[Source],
    skipped: Sequence[Skipped],
    library: Library,
    *,
    max_decompressed: int,
    max_total_decompressed: int,
    processes: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ReadAndMatched | None:
    """Read and match the files of ``sources`` on several processes; None where one process
    should (small input, standard input, parts among the files, or too much to decompress)."""
    if any(s.path is None for s in sources) or not _can_spread(library):
        return None
    sizes = [_size(s.path) for s in sources]
    count = _count(processes, len(sizes), MIN_FILES_PER_PROCESS)
    runs = _file_runs(sizes, max(2 * count, sum(sizes) // RUN_BYTES)) if count > 1 else []
    if len(runs) < 2:
        return None
    total, done = sum(sizes), [0]
    lock = threading.Lock()
    digest, schema = parts.keyword_digest(library), events_schema(library)
    limits = {"max_decompressed": max_decompressed, "max_total_decompressed": max_total_decompressed}

    def finished(i: int) -> None:
        if progress is not None:
            with lock:
                done[0] += sum(sizes[runs[i][0] : runs[i][0] + runs[i][1]])
                progress(done[0], total)

    def here(i: int) -> _FileRun:
        start, length = runs[i]
        got = read_files(list(sources[start : start + length]), library, **limits)
        finished(i)
        return got

    def message(i: int) -> tuple[dict[str, Any], bytes]:
        start, length = runs[i]
        files = [[s.name, str(s.path)] for s in sources[start : start + length]]
        return {"kind": "files", "files": files, **limits}, b""

    def answer(i: int, got: list[bytes]) -> _FileRun:
        meta = json.loads(got[0])
        part = parts.read_part(Source(name="<worker>", data=got[1]), digest)
        if not isinstance(part, parts.Extraction):
            raise ValueError(part.reason)
        finished(i)
        matched = read_result(got[2], got[3], schema)
        return _FileRun(part, matched, bool(meta["one_pass"]), int(meta["decompressed"]))

    if progress is not None:
        progress(0, total)
    results = _Pool(library, count, {"keep_unmatched": False}).run(len(runs), here, message, answer)
    if any(r.one_pass for r in results) or sum(r.decompressed for r in results) >= max_total_decompressed:
        return None  # parts among the files, or at the limit over all inputs: one pass decides
    ex = parts.Extraction(
        dataclasses.replace(_no_lines(), stats=tuple(st for r in results for st in r.extraction.read.stats)),
        tuple(d for r in results for d in r.extraction.dumps),
        (*skipped, *(s for r in results for s in r.extraction.skipped)),
        digest,
    )
    return ReadAndMatched(ex, merge_results([r.matched for r in results], schema))


@dataclass(frozen=True)
class _FileRun:
    extraction: parts.Extraction  # its lines are not kept: the matched result holds what they gave
    matched: MatchResult
    one_pass: bool  # the run held Parquet files: the whole input is read in one pass instead
    decompressed: int


def read_files(
    sources: list[Source], library: Library, *, max_decompressed: int, max_total_decompressed: int
) -> _FileRun:
    """Read and match one run of files, as ``parts.collect`` then ``match_lines`` would."""
    own, found = parts.read_apart(
        sources, (), library, max_decompressed=max_decompressed, max_total_decompressed=max_total_decompressed
    )
    if found or any(s.reason.startswith(parts.REJECTED) for s in own.skipped):
        # parts merge across files, and a Parquet file that is not one is a skip one pass reports
        return _FileRun(parts.Extraction(_no_lines(), ()), _no_match(library), True, 0)
    matched = match_lines(own.read.lines, library)
    ex = dataclasses.replace(own, read=dataclasses.replace(own.read, lines=own.read.lines.clear()))
    return _FileRun(ex, matched, False, own.read.decompressed)


def _no_lines() -> ReadResult:
    return ReadResult(lines=pl.DataFrame(schema=CANDIDATE_SCHEMA), stats=())


def _no_match(library: Library) -> MatchResult:
    return MatchResult(pl.DataFrame(schema=events_schema(library)), (), 0)


def _size(path: Path | None) -> int:
    try:
        return path.stat().st_size if path is not None else 0
    except OSError:
        return 0  # the reader says why


def _file_runs(sizes: list[int], count: int) -> list[tuple[int, int]]:
    """(offset, length) of up to ``count`` runs of consecutive files, of about equal bytes."""
    total = sum(sizes)
    bounds, acc = [0], 0
    for i, size in enumerate(sizes[:-1]):
        acc += size
        if acc * count >= total * len(bounds) and i + 1 > bounds[-1]:
            bounds.append(i + 1)
    bounds.append(len(sizes))
    return [(a, b - a) for a, b in itertools.pairwise(bounds)]


# ----------------------------------------------------------------------------- the workers


def _can_spread(library: Library) -> bool:
    # a worker runs this interpreter (empty where Python cannot tell it) on the library's folders
    return bool(library.dirs) and bool(sys.executable)


def fingerprint(library: Library) -> str:
    """A digest of the library's patterns: a worker's library must have the same one."""
    h = hashlib.sha256()
    for p in library.patterns:
        h.update(f"{p.id}\0{p.path}\0{p.regex.pattern}\0{sorted(p.keywords)}\n".encode())
    return h.hexdigest()


class _Pool:
    """The main process and ``count - 1`` workers, taking runs from one queue in order."""

    def __init__(self, library: Library, count: int, options: dict[str, Any]) -> None:
        self.request = {"dirs": list(library.dirs), "fingerprint": fingerprint(library), **options}
        self.count = count

    def run(
        self,
        n: int,
        here: Callable[[int], Any],
        message: Callable[[int], tuple[dict[str, Any], bytes]],
        answer: Callable[[int, list[bytes]], Any],
    ) -> list[Any]:
        """Each run's result, in order: ``here(i)`` in this process, else ``message(i)`` sent to
        a worker and its reply read by ``answer(i, reply)``."""
        results: list[Any] = [None] * n
        taken = itertools.count()
        lock = threading.Lock()

        def take() -> int | None:
            with lock:
                i = next(taken)
            return i if i < n else None

        threads = [
            threading.Thread(target=self._worker, args=(take, results, message, answer), daemon=True)
            for _ in range(self.count - 1)
        ]
        for t in threads:
            t.start()
        while (i := take()) is not None:
            results[i] = here(i)
        for t in threads:
            t.join()
        # a run no worker gave back is done here: slower, never different
        return [here(i) if r is None else r for i, r in enumerate(results)]

    def _worker(
        self,
        take: Callable[[], int | None],
        results: list[Any],
        message: Callable[[int], tuple[dict[str, Any], bytes]],
        answer: Callable[[int, list[bytes]], Any],
    ) -> None:
        try:
            # The worker imports what this process imports: its module path is this one's.
            proc = subprocess.Popen(
                [sys.executable, "-c", _BOOT, json.dumps(sys.path)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        except OSError:
            return  # its runs are done by the others
        assert proc.stdin is not None and proc.stdout is not None
        try:
            send(proc.stdin, json.dumps(self.request).encode())
            while (i := take()) is not None:
                head, body = message(i)
                send(proc.stdin, json.dumps(head).encode())
                send(proc.stdin, body)
                reply = [receive(proc.stdout) for _ in range(REPLY_PARTS[head["kind"]])]
                if any(r is None for r in reply):
                    return  # it stopped (another library, a crash): the run is done in the main process
                results[i] = answer(i, [r for r in reply if r is not None])
            send(proc.stdin, b"")  # no more runs
        except (OSError, ValueError, KeyError, pl.exceptions.PolarsError):
            return
        finally:
            proc.stdin.close()
            proc.kill()
            proc.wait()


_BOOT = "import json, sys; sys.path[:] = json.loads(sys.argv[1]); from nccllog.spread_worker import main; sys.exit(main())"
REPLY_PARTS = {"lines": 2, "files": 4}  # messages a worker sends back for a run of each kind


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


def _ipc(frame: pl.DataFrame) -> bytes:
    buf = io.BytesIO()
    frame.write_ipc_stream(buf)
    return buf.getvalue()


def write_result(result: MatchResult) -> tuple[bytes, bytes]:
    """A MatchResult as (JSON of its counts, IPC of its events' columns that hold a value)."""
    meta = {
        "templates": [list(t) for t in result.templates],
        "overflow_fields": result.overflow_fields,
        "timed_out": [[s.source, s.reason, s.lines] for s in result.timed_out],
        "thinned_lines": result.thinned_lines,
    }
    ev = result.events
    return json.dumps(meta).encode(), _ipc(
        ev.select([c for c in ev.columns if ev[c].null_count() < ev.height])
    )


def read_result(meta_bytes: bytes, events_bytes: bytes, schema: dict[str, Any]) -> MatchResult:
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
