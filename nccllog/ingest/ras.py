"""Saved ``ncclras`` output: the JSON report (NCCL 2.28.7+) and monitor events (2.29+) turned into
the lines the text form prints, and the text report's section-bound lines made self-contained.

The JSON form (``rasDumpCommsToJSON`` in NCCL's ``src/ras/client_support.cc``) lists, per
communicator, every rank that answered (``rank``, ``host``, ``pid``, ``cuda_dev``, ``nvml_dev``,
``status`` with ``init_state``/``async_error``, and ``collective_counts`` per collective) and the
``missing_ranks`` (with ``considered_dead``). The text form's verdict lines are derived from it the
way the client derives them: per communicator and collective whose counts differ, the most common
count (``N ranks have launched up to operation M``) and each rank that differs from it
(``Rank r has launched up to operation m -- GPU g managed by process p on node h``); a rank with an
error (``Rank r reported <error> -- GPU …``); a missing rank not (yet) dead (``INCOMPLETE: Rank r
-- GPU …``); the dead processes (``N job processes are considered dead``, then ``DEAD: Process
<pid> on node <host> managing GPU <g>`` each). The pattern library (``patterns/nccl/ras_client_*``) then reads them like the text form.

The text report (``rasClientRunComms``) prints some lines whose meaning is their section's: under
``DEAD`` / ``INCOMPLETE`` the processes (``Process <pid> on node <host> managing GPU <g>``), under
a communicator's ``MISMATCH`` / ``ERROR`` the members of a group of ranks (``Rank r -- GPU …``
after ``N ranks have launched up to operation M``). Each such line is rewritten in place (same
line number) to stand alone: the processes get their section as a prefix (``DEAD: Process …``, the
form monitor mode prints as ``PEER_DEAD: Process …``), a group member the form NCCL prints for a
rank that stands alone (``Rank r has launched up to operation M -- GPU …``). Monitor mode
(``ncclras -m``, ``rasClientsNotifyEvent``) prints ``[<time>] <EVENT>: <peer> <details>``; with
``-f json`` one object per event, turned into that text line.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import regex

from nccllog.ingest.sources import Source

MAX_RAS_BYTES = 64 * 1024 * 1024
# ncclResult_t -> the client's ncclErrorToString (1..7; other values print "Unexpected error").
ERRORS = {
    1: "Unhandled CUDA error",
    2: "System error",
    3: "Internal error",
    4: "Invalid argument",
    5: "Invalid usage",
    6: "Remote process error",
}


# What only a saved text report has near its top: its section headers.
_TEXT_REPORT = regex.compile(
    rb"^(?:Job summary\r?\n=====|Errors\r?\n======|Warnings\r?\n========|(?:DEAD|INCOMPLETE)\r?\n  \S"
    rb"|#\d+-\d+ \([0-9a-f]{16}\) (?:MISMATCH|INCOMPLETE|ERROR)\r?$)",
    regex.MULTILINE,
)
_TEXT_REPORT_WORDS = (b"Job summary", b"Errors", b"Warnings", b"DEAD", b"INCOMPLETE", b"MISMATCH", b"ERROR")
_COMM_HEADER = regex.compile(r"^#\d+-\d+ \([0-9a-f]{16}\) (MISMATCH|INCOMPLETE|ERROR)\s*$")
_GROUP = regex.compile(
    r"^\s+\d+ ranks (have launched up to operation \d+|have not launched any operations|have status \w+"
    r"|reported [A-Za-z ]+?)\s*$"
)
_MEMBER = regex.compile(r"^(\s+)Rank (\d+) -- (GPU .*)$")
_PROCESS = regex.compile(r"^(\s+)(Process \d+ on node \S+ managing GPUs? .*)$")


def looks_like(head: bytes) -> bool:
    """Whether the first bytes look like ``ncclras -f json`` output (a report or monitor events)."""
    if head.lstrip()[:1] != b"{":
        return False
    report = b'"communicators' in head and b'"nccl_version"' in head
    return report or (b'"event"' in head and b'"group"' in head and b'"timestamp"' in head)


def looks_like_text(head: bytes) -> bool:
    """Whether the first bytes look like a saved ``ncclras`` text report."""
    # every form of the report holds one of these words: most logs are told apart without the regex
    if not any(word in head for word in _TEXT_REPORT_WORDS):
        return False
    return _TEXT_REPORT.search(head) is not None


def text_to_text(src: Source, data: bytes) -> Source:
    """The text report with each section-bound line made to stand alone (same line numbers)."""
    if len(data) > MAX_RAS_BYTES:
        return src
    lines = data.decode("utf-8", "surrogateescape").split("\n")
    section, group = "", ""
    for i, line in enumerate(lines):
        if line[:1] not in ("", " ", "\t", "\r"):
            m = _COMM_HEADER.match(line)
            section, group = (m.group(1) if m else line.strip()), ""
            continue
        if not line.strip() or "Communicator ranks have different" in line:
            group = ""
            continue
        if g := _GROUP.match(line):
            group = g.group(1).replace("have", "has", 1)
        elif (m := _PROCESS.match(line)) and section in ("DEAD", "INCOMPLETE"):
            lines[i] = f"{m.group(1)}{section}: {m.group(2)}"
        elif m := _MEMBER.match(line):
            if group and section in ("MISMATCH", "ERROR"):
                lines[i] = f"{m.group(1)}Rank {m.group(2)} {group} -- {m.group(3)}"
            elif section == "INCOMPLETE":
                lines[i] = f"{m.group(1)}INCOMPLETE: Rank {m.group(2)} -- {m.group(3)}"
    return Source(name=src.name, data="\n".join(lines).encode("utf-8", "surrogateescape"))


def to_text(src: Source, data: bytes) -> Source | None:
    """The JSON report or monitor events as the text form's lines under the same name, or None
    when it is neither."""
    if len(data) > MAX_RAS_BYTES:
        return None
    if b'"communicators' not in data[:4096]:
        return _monitor_to_text(src, data)
    try:
        obj = json.loads(data.decode("utf-8", "replace"), parse_constant=_refuse)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("communicators"), list):
        return None
    lines = [f"NCCL version {obj.get('nccl_version', '?')} (ncclras JSON report, {obj.get('timestamp', '')})"]
    dead: dict[tuple[str, int], str] = {}  # (host, pid) -> the process's line under DEAD
    for n, comm in enumerate(c for c in obj["communicators"] if isinstance(c, dict)):
        ranks = [r for r in comm.get("ranks") or () if isinstance(r, dict)]
        lines.extend(_mismatch(n, comm, ranks))
        lines.extend(_errors(n, comm, ranks))
        missing = [m for m in comm.get("missing_ranks") or () if isinstance(m, dict)]
        silent = []
        for m in sorted(missing, key=lambda m: _int(m.get("rank"))):
            status = m.get("status")
            if isinstance(status, dict) and status.get("considered_dead") is True:
                host, pid = "".join(str(m.get("host")).split()) or "unknown", _int(m.get("pid"))
                dead.setdefault((host, pid), f"Process {pid} on node {host} managing {_gpu(m)}")
            else:
                silent.append(f"  INCOMPLETE: Rank {_int(m.get('rank'))}" + _where(m))
        if silent:
            lines += [f"#{n} ({comm.get('hash', '?')}) INCOMPLETE", *silent]
    if dead:
        n_dead = len(dead)
        lines.append(
            f"  {n_dead} job process{'es are' if n_dead > 1 else ' is'} considered dead (unreachable via the RAS network)"
        )
        lines += [f"  DEAD: {line}" for _key, line in sorted(dead.items())]
    return Source(name=src.name, data=("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"))


def _mismatch(n: int, comm: dict[str, Any], ranks: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    names = sorted(
        {k for r in ranks if isinstance(r.get("collective_counts"), dict) for k in r["collective_counts"]}
    )
    for name in names:
        counts = {_int(r.get("rank")): _int(r["collective_counts"].get(name)) for r in ranks}
        if len(set(counts.values())) < 2:
            continue
        if not out:
            out.append(f"#{n} ({comm.get('hash', '?')}) MISMATCH")
        out.append(f"  Communicator ranks have different {name} operation counts")
        freq = Counter(counts.values()).most_common()
        top, k = freq[0]
        out.append(f"  {k} ranks have " + _launched(top))
        for r in sorted(ranks, key=lambda r: _int(r.get("rank"))):
            mine = counts[_int(r.get("rank"))]
            if mine != top:
                out.append(f"  Rank {_int(r.get('rank'))} has " + _launched(mine) + _where(r))
    return out


def _errors(n: int, comm: dict[str, Any], ranks: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for r in sorted(ranks, key=lambda r: _int(r.get("rank"))):
        status = r.get("status")
        if not isinstance(status, dict):
            continue
        for key in ("init_state", "async_error"):
            code = _int(status.get(key))
            if code not in (0, 7):  # success, in progress
                if not out:
                    out.append(f"#{n} ({comm.get('hash', '?')}) ERROR")
                error = ERRORS.get(code, "Unexpected error")
                out.append(f"  Rank {_int(r.get('rank'))} reported {error}" + _where(r))
    return out


def _monitor_to_text(src: Source, data: bytes) -> Source | None:
    """Monitor-mode JSON (one pretty-printed object per event, back to back) as the text lines
    ``[<time>] <EVENT>: Process <pid> on node <host> managing GPU <g> <details>``."""
    text, dec, pos, out = data.decode("utf-8", "replace"), json.JSONDecoder(parse_constant=_refuse), 0, []
    while pos < len(text):
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            break
        try:
            obj, pos = dec.raw_decode(text, pos)
        except (ValueError, RecursionError):
            return None
        if not isinstance(obj, dict) or not isinstance(obj.get("event"), str):
            return None
        peer, who = obj.get("peer"), ""
        if isinstance(peer, dict) and "pid" in peer:
            cuda, nvml = _devs(peer.get("cuda_devs")), _devs(peer.get("nvml_devs"))
            gpus = ",".join(map(str, cuda)) + (f" (NVML {','.join(map(str, nvml))})" if nvml != cuda else "")
            who = (
                f"Process {_int(peer.get('pid'))} on node {''.join(str(peer.get('host')).split()) or 'unknown'} "
                f"managing GPU{'s' if len(cuda) > 1 else ''} {gpus}"
            )
        elif isinstance(peer, dict) and "addr" in peer:
            who = "".join(str(peer["addr"]).split())
        details = " ".join(str(obj.get("details") or "").split())
        out.append(" ".join(p for p in (f"[{obj.get('timestamp', '')}] {obj['event']}:", who, details) if p))
    if not out:
        return None
    return Source(name=src.name, data=("\n".join(out) + "\n").encode("utf-8", "surrogatepass"))


def _devs(value: Any) -> list[int]:
    return (
        [d for d in value if isinstance(d, int) and not isinstance(d, bool)]
        if isinstance(value, list)
        else []
    )


def _launched(count: int) -> str:
    return f"launched up to operation {count}" if count > 0 else "not launched any operations"


def _gpu(r: dict[str, Any]) -> str:
    dev, nvml = _int(r.get("cuda_dev")), _int(r.get("nvml_dev"))
    return f"GPU {dev}" + (f" (NVML {nvml})" if nvml != dev else "")


def _where(r: dict[str, Any]) -> str:
    return f" -- {_gpu(r)} managed by process {_int(r.get('pid'))} on node {''.join(str(r.get('host')).split()) or 'unknown'}"


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def _refuse(text: str) -> Any:
    raise ValueError(f"JSON constant {text}")
