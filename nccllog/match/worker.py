"""A matching worker (``python -m nccllog.match.worker``), started by match/parallel.py.

On stdin: a request (the library's folders and fingerprint), then runs of candidate lines as
Arrow IPC, then an empty message. On stdout, for each run: its MatchResult (JSON counts, then
IPC events). It exits with 3 when the library it loads is not the caller's.
"""

from __future__ import annotations

import gc
import io
import json
import sys

import polars as pl

from nccllog.match.library import load_library
from nccllog.match.matcher import match_lines
from nccllog.match.parallel import fingerprint, receive, send, write_result


def main() -> int:
    """Serve runs until the caller sends an empty one or closes the pipe."""
    gc.disable()  # as in analyze(): each pass of the collector would walk every row kept so far
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    head = receive(stdin)
    if head is None:
        return 1
    request = json.loads(head)
    library = load_library(request["dirs"], builtin=False)
    if fingerprint(library) != request["fingerprint"]:
        return 3  # the folders changed since the caller loaded them: it matches its lines itself
    while (data := receive(stdin)) is not None and data:
        got = match_lines(
            pl.read_ipc_stream(io.BytesIO(data)), library, keep_unmatched=request["keep_unmatched"]
        )
        meta, events = write_result(got)
        send(stdout, meta)
        send(stdout, events)
        del got, meta, events
    return 0


if __name__ == "__main__":
    sys.exit(main())
