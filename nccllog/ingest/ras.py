"""Saved ``ncclras -f json`` output (NCCL 2.28.7+), turned into the lines the text form prints.

The JSON form (``rasDumpCommsToJSON`` in NCCL's ``src/ras/client_support.cc``) lists, per
communicator, every rank that answered (``rank``, ``host``, ``pid``, ``cuda_dev``, ``nvml_dev``,
``status`` with ``init_state``/``async_error``, and ``collective_counts`` per collective) and the
``missing_ranks`` (with ``considered_dead``). The text form's verdict lines are derived from it the
way the client derives them: per communicator and collective whose counts differ, the most common
count (``N ranks have launched up to operation M``) and each rank that differs from it
(``Rank r has launched up to operation m -- GPU g managed by process p on node h``); a rank with an
error (``Rank r reported <error> -- GPU …``); the dead processes (``N job processes are considered
dead``). The pattern library (``patterns/nccl/ras_client_*``) then reads them like the text form.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

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


def looks_like(head: bytes) -> bool:
    """Whether the first bytes look like ``ncclras -f json`` output."""
    return head.lstrip()[:1] == b"{" and b'"communicators' in head and b'"nccl_version"' in head


def to_text(src: Source, data: bytes) -> Source | None:
    """The report as the text form's lines under the same name, or None when it is not one."""
    if len(data) > MAX_RAS_BYTES:
        return None
    try:
        obj = json.loads(data.decode("utf-8", "replace"), parse_constant=_refuse)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("communicators"), list):
        return None
    lines = [f"NCCL version {obj.get('nccl_version', '?')} (ncclras JSON report, {obj.get('timestamp', '')})"]
    dead = 0
    for n, comm in enumerate(c for c in obj["communicators"] if isinstance(c, dict)):
        ranks = [r for r in comm.get("ranks") or () if isinstance(r, dict)]
        lines.extend(_mismatch(n, comm, ranks))
        lines.extend(_errors(n, comm, ranks))
        dead += sum(
            1
            for m in comm.get("missing_ranks") or ()
            if isinstance(m, dict)
            and isinstance(m.get("status"), dict)
            and m["status"].get("considered_dead") is True
        )
    if dead:
        lines.append(
            f"  {dead} job process{'es are' if dead > 1 else ' is'} considered dead (unreachable via the RAS network)"
        )
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


def _launched(count: int) -> str:
    return f"launched up to operation {count}" if count > 0 else "not launched any operations"


def _where(r: dict[str, Any]) -> str:
    dev, nvml = _int(r.get("cuda_dev")), _int(r.get("nvml_dev"))
    gpu = f"{dev}" + (f" (NVML {nvml})" if nvml != dev else "")
    return f" -- GPU {gpu} managed by process {_int(r.get('pid'))} on node {''.join(str(r.get('host')).split()) or 'unknown'}"


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def _refuse(text: str) -> Any:
    raise ValueError(f"JSON constant {text}")
