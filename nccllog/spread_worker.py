"""A worker process of spread.py, which starts it with its own interpreter and module path
(``python -m nccllog.spread_worker`` runs it too).

On stdin: a request (the library's folders and fingerprint), then runs, each a JSON head and a
body (``lines``: candidate lines as Arrow IPC; ``files``: none, the head names the files), then
an empty message. On stdout, for each run: ``lines``: its MatchResult (JSON counts, IPC events);
``files``: a JSON head, the files' part (statistics, dumps, skips), then the MatchResult. It
exits with 3 when the library it loads is not the caller's.
"""

from __future__ import annotations

import gc
import io
import json
import sys
from pathlib import Path

import polars as pl

from nccllog import parts
from nccllog.ingest.sources import Source
from nccllog.match.library import load_library
from nccllog.match.matcher import match_lines
from nccllog.spread import fingerprint, read_files, receive, send, write_result


def main() -> int:
    """Serve runs until the caller sends an empty message or closes the pipe."""
    gc.disable()  # as in analyze(): each pass of the collector would walk every row kept so far
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    head = receive(stdin)
    if head is None:
        return 1
    request = json.loads(head)
    library = load_library(request["dirs"], builtin=False)
    if fingerprint(library) != request["fingerprint"]:
        return 3  # the folders changed since the caller loaded them: it does these runs itself
    while (data := receive(stdin)) is not None and data:
        run = json.loads(data)
        body = receive(stdin)
        if body is None:
            return 1
        if run["kind"] == "lines":
            lines = pl.read_ipc_stream(io.BytesIO(body))
            reply: tuple[bytes, ...] = write_result(
                match_lines(lines, library, keep_unmatched=request["keep_unmatched"])
            )
        else:
            sources = [Source(name=name, path=Path(path)) for name, path in run["files"]]
            got = read_files(
                sources,
                library,
                max_decompressed=int(run["max_decompressed"]),
                max_total_decompressed=int(run["max_total_decompressed"]),
            )
            head = json.dumps({"one_pass": got.one_pass, "decompressed": got.decompressed}).encode()
            reply = (head, parts.to_bytes(got.extraction), *write_result(got.matched))
        for message in reply:
            send(stdout, message)
        del reply
    return 0


if __name__ == "__main__":
    sys.exit(main())
