"""torchelastic error files (``<log-dir>/<run>/attempt_N/<local_rank>/error.json``, or wherever
``TORCHELASTIC_ERROR_FILE`` points), turned into the text lines they hold.

``@record`` (``torch/distributed/elastic/multiprocessing/errors/error_handler.py``) writes
``{"message": {"message": "<ExcType>: <text>", "extraInfo": {"py_callstack": "<traceback>",
"timestamp": "<epoch seconds>"}}}``; an ``errorCode`` may sit beside ``extraInfo``. The JSON keeps
the exception text and the traceback on one line with escaped newlines, where no pattern sees
them; here they become the lines they were, headed by one line with the time (UTC, from the epoch
timestamp) and the error code, so the pattern library reads them like any log. The file's path
still gives the local rank and the attempt (``attribution/paths.py``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import regex

from nccllog.ingest.sources import Source

MAX_ERROR_FILE_BYTES = 16 * 1024 * 1024
_ATTEMPT = regex.compile(r"(?:^|[/\\])attempt_(\d{1,9})[/\\][^/\\]+[/\\][^/\\]+$")


def looks_like(head: bytes) -> bool:
    """Whether the first bytes look like a torchelastic error file."""
    return (
        head.lstrip()[:1] == b"{"
        and b'"message"' in head
        and (b'"extraInfo"' in head or b'"py_callstack"' in head)
    )


def to_text(src: Source, data: bytes) -> Source | None:
    """The error file as text lines under the same name, or None when it is not one."""
    if len(data) > MAX_ERROR_FILE_BYTES:
        return None
    try:
        obj = json.loads(data.decode("utf-8", "replace"), parse_constant=_refuse)
    except (ValueError, RecursionError):
        return None
    lines = _lines(obj, _attempt(src.name))
    if lines is None:
        return None
    return Source(name=src.name, path=None, data=("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"))


def _attempt(name: str) -> int | None:
    """The restart count from the torchrun log-dir layout (``attempt_N/<local_rank>/error.json``)."""
    m = _ATTEMPT.search(name)
    return int(m.group(1)) if m else None


def _lines(obj: Any, attempt: int | None) -> list[str] | None:
    if not isinstance(obj, dict) or "message" not in obj:
        return None
    msg = obj["message"]
    holder = msg if isinstance(msg, dict) else obj
    extra = holder.get("extraInfo")
    text = msg.get("message") if isinstance(msg, dict) else msg
    if not isinstance(text, str) or not isinstance(extra, dict):
        return None  # JSON, but not what @record writes
    code = holder.get("errorCode")
    head = ["torchelastic error file"]
    when = _time(extra.get("timestamp"))
    if when:
        head.insert(0, when)
    notes = [f"attempt {attempt}"] if attempt is not None else []
    if isinstance(code, int | str) and str(code):
        notes.append(f"error code {code}")
    if notes:
        head.append(f"({', '.join(notes)})")
    body = text.splitlines() or [""]
    out = [" ".join(head) + ": " + body[0], *body[1:]]
    stack = extra.get("py_callstack")
    if isinstance(stack, str) and stack.strip():
        out.extend(stack.rstrip("\n").splitlines())
    return out


def _time(value: Any) -> str | None:
    """The epoch timestamp as an ISO time in UTC (the file's clock anchor), or None."""
    try:
        secs = int(str(value).strip())
        return datetime.fromtimestamp(secs, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (ValueError, OverflowError, OSError):
        return None


def _refuse(text: str) -> Any:
    raise ValueError(f"JSON constant {text}")
