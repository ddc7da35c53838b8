"""What a file's path says about the process that wrote it (rank_3.log, attempt_0/3/stderr.log, …).

Recognised (case-insensitive; the file name first, then its folders from the innermost out):

- **global rank**: a ``rank`` word followed by its number, ``rank_3.log``, ``rank3.txt``,
  ``rank-3.out``, ``log_rank_3``, ``train_rank03.log``, folder ``rank_3/`` or ``node0_rank3/``
  (a folder only when its name ends with the rank after at most two words: ``eval-rank0-hang/``
  and ``ddp-crash-after-resume-rank0/`` are incidents' names, not ranks' folders); ``worker_3.log`` /
  ``worker-3.log`` (whole name ``worker<sep>N``). ``node_rank_1``, ``group_rank``,
  ``local_rank`` and ranges (``rank_0-7``) are not global ranks.
- **local rank**: ``local_rank_3`` / ``localrank3``; torchrun ``--log-dir``
  ``…/attempt_0/3/stdout.log`` / ``stderr.log`` / ``error.json`` (local rank 3, attempt 0);
  ``…/attempt_0/filtered_stdout.log`` / ``filtered_stderr.log`` give the attempt only.
- **host and pid** of one NCCL process (``NCCL_DEBUG_FILE`` with ``%h`` and ``%p``): a name
  containing ``nccl`` ending in ``<sep><host><sep><pid>[.ext]``: ``nccl_logs_<host>_<pid>.txt``
  (GF-Bench), ``nccl_<host>.<pid>.log``, ``nccl.<host>.<pid>``, ``nccl-debug-<host>-<pid>.log``;
  and a bare ``<host>.<pid>[.log|.txt]`` directly inside a folder whose name contains ``nccl``
  (only the file's own folder: a folder further up, such as a checkout named ``nccllog``, says
  nothing of how the file was named).
  NCCL's ``%h`` is the host name cut at the first dot, so the host part has no dots.
- **host** from a kernel-log file name: ``dmesg_<host>.log``, ``<host>.dmesg``,
  ``kern-<host>.log``, ``syslog_<host>``, ``journal_<host>.txt`` (and ``<host>_dmesg.log``);
  from a folder only when it says so: ``host=<h>``, ``host_<h>``, ``hostname-<h>``.
  Other folder names are never taken for host names (``logs/``, ``run1/`` … are ambiguous).
- **year** (for year-less timestamps): a date in any path component, ``2026-03-23``,
  ``20260323``, ``2026_03_23`` (years 1990-2099, valid month and day).

``FileAttrs.evidence`` says in words what was read, e.g. ``file name rank_3.log``.
"""

from __future__ import annotations

from dataclasses import dataclass

import regex

from nccllog.ingest.numbers import int64


@dataclass(frozen=True)
class FileAttrs:
    """Attribution evidence from a path; None where the path says nothing."""

    rank: int | None = None
    local_rank: int | None = None
    host: str | None = None
    pid: int | None = None
    attempt: int | None = None
    evidence: str = ""  # e.g. "file name rank_3.log"
    year: int | None = None  # from a date in the path (for year-less timestamps)
    single_process: bool = False  # the path says the file holds one process's output


_A = regex.ASCII | regex.IGNORECASE
_RANK = regex.compile(
    r"(?<![a-z0-9])(?<!(?:node|group|local|cross|world)[_-]?)rank[_-]?(?P<n>[0-9]{1,9})(?![0-9])(?![-~][0-9])",
    _A,
)
_LOCAL = regex.compile(r"(?<![a-z0-9])local[_-]?rank[_-]?(?P<n>[0-9]{1,9})(?![0-9])(?![-~][0-9])", _A)
# A folder is per-rank only when its name is the rank, with at most two words before it
# (`rank_3/`, `node0_rank3/`, `job7_node0_rank3/`); a folder named after an incident
# (`eval-rank0-hang-repro/`, `ddp-crash-after-resume-rank0/`) says nothing about its files.
_FOLDER_END = regex.compile(r"(?:[a-z0-9]+[_-]){0,2}(?:local[_-]?)?rank[_-]?[0-9]{1,9}", _A)
_WORKER = regex.compile(r"worker[_-](?P<n>[0-9]{1,9})(?:\.[a-z0-9]{1,5})?", _A)
_ATTEMPT_FILE = regex.compile(r"(?:stdout|stderr)\.log|error\.json", _A)
_ATTEMPT_DIR = regex.compile(r"attempt_(?P<n>[0-9]{1,9})", _A)
_FILTERED = regex.compile(r"filtered_(?:stdout|stderr)\.log", _A)
_EXT = r"(?:\.(?:log|txt|out|err))?"
_NCCL_FILE = regex.compile(
    r"(?:[a-z0-9_.-]*?[._-])?nccl(?:[._-]?(?:logs?|debug|trace|out|output|info|file))?"
    r"[._-](?P<host>[a-z0-9][a-z0-9_-]*?)[._-](?P<pid>[0-9]{1,7})" + _EXT,
    _A,
)
_HOST_PID = regex.compile(
    r"(?P<host>[a-z0-9][a-z0-9_-]*?[a-z_-][a-z0-9_-]*?)\.(?P<pid>[0-9]{1,7})" + _EXT, _A
)
_KERNEL_FILE = regex.compile(
    r"(?:dmesg|kern|kernel|syslog|journal|journalctl)[._-](?P<host>[a-z0-9][a-z0-9.-]*?)"
    + _EXT
    + r"|(?P<host2>[a-z0-9][a-z0-9.-]*?)[._-](?:dmesg|kern|kernel|syslog|journal|journalctl)"
    + _EXT,
    _A,
)
_HOST_DIR = regex.compile(r"host(?:name)?[=_-](?P<host>[a-z0-9][a-z0-9.-]*)", _A)
_DATE = regex.compile(
    r"(?<![0-9])(?P<y>(?:19|20)[0-9]{2})(?P<sep>[-_]?)(?P<m>0[1-9]|1[0-2])(?P=sep)(?P<d>0[1-9]|[12][0-9]|3[01])(?![0-9])",
    _A,
)


_SEPARATORS = regex.compile(r"[/\\]+")


def _parts(path: str) -> list[str]:
    return [p for p in _SEPARATORS.split(path) if p and p != "."]


def _host_ok(h: str) -> bool:
    return any(c.isalpha() for c in h) and h.lower() not in {"log", "logs", "txt", "out", "err", "debug"}


def attrs_from_path(path: str) -> FileAttrs:
    """Read rank/local rank/host/pid/attempt/year from a path's file and folder names."""
    parts = _parts(path)
    if not parts:
        return FileAttrs()
    name = parts[-1]
    rank = local = pid = attempt = year = None
    host: str | None = None
    ev: list[str] = []
    single = False

    # torchrun --log-dir: <run>/attempt_N/<local_rank>/{stdout,stderr}.log|error.json
    if len(parts) >= 3 and _ATTEMPT_FILE.fullmatch(name) and parts[-2].isdigit():
        m = _ATTEMPT_DIR.fullmatch(parts[-3])
        if m and len(parts[-2]) <= 9:
            local, attempt = int64(parts[-2]), int64(m.group("n"))
            single = True
            ev.append(f"torchrun log dir {'/'.join(parts[-3:])} (local rank {local}, attempt {attempt})")
    if attempt is None and len(parts) >= 2 and _FILTERED.fullmatch(name):
        m = _ATTEMPT_DIR.fullmatch(parts[-2])
        if m:
            attempt = int64(m.group("n"))
            ev.append(f"torchrun log dir {'/'.join(parts[-2:])} (attempt {attempt})")

    # rank / local rank words, file name first, then folders from the innermost out
    for i, part in enumerate(reversed(parts)):
        where = "file name" if i == 0 else "folder"
        if i and not _FOLDER_END.fullmatch(part):
            continue
        if local is None:
            m = _LOCAL.search(part)
            if m:
                local = int64(m.group("n"))
                single = True
                ev.append(f"{where} {part} (local rank {local})")
        if rank is None:
            m = _RANK.search(part) or (_WORKER.fullmatch(part) if i == 0 else None)
            if m:
                rank = int64(m.group("n"))
                single = True
                ev.append(f"{where} {part}")

    # NCCL_DEBUG_FILE with %h and %p
    if rank is None:
        m = _NCCL_FILE.fullmatch(name)
        if m and _host_ok(m.group("host")) and "rank" not in m.group("host").lower():
            host, pid = m.group("host"), int64(m.group("pid"))
        elif len(parts) > 1 and "nccl" in parts[-2].lower():  # NCCL_DEBUG_FILE's own folder
            m = _HOST_PID.fullmatch(name)
            if m and _host_ok(m.group("host")):
                host, pid = m.group("host"), int64(m.group("pid"))
        if pid is not None:
            single = True
            ev.append(f"NCCL debug file {name} (host {host}, pid {pid})")

    if host is None:
        m = _KERNEL_FILE.fullmatch(name)
        if m:
            h = m.group("host") or m.group("host2")
            if h and _host_ok(h) and not _DATE.fullmatch(h):
                host = h
                ev.append(f"kernel log file {name} (host {h})")
    if host is None:
        for part in reversed(parts[:-1]):
            m = _HOST_DIR.fullmatch(part)
            if m and _host_ok(m.group("host")):
                host = m.group("host")
                ev.append(f"folder {part} (host {host})")
                break

    for part in reversed(parts):
        m = _DATE.search(part)
        if m:
            year = int64(m.group("y"))
            break

    return FileAttrs(
        rank=rank,
        local_rank=local,
        host=host,
        pid=pid,
        attempt=attempt,
        evidence="; ".join(ev),
        year=year,
        single_process=single,
    )
