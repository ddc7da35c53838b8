"""Strip the prefix layers of one physical log line and keep what they say about its origin.

Layers, outermost first, each optional, stacked in launcher order (the order
of ``layer_table.DEPTHS``):

1. terminal escape sequences (ANSI colour ``\\x1b[..m`` and every other CSI/OSC/ESC sequence)
   are removed from the whole line first; trailing CR/LF are dropped;
   the Ray dedup suffix `` [repeated 7x across cluster]`` (and the first-time notice after it)
   is removed from the end -> ``repeat = 8``;
2. a time/host layer: journald/syslog ``Oct 23 14:02:17 host kernel: `` (also
   ``ident[pid]: ``), ISO ``2025-10-23T14:02:17.123Z `` (kubectl/CI; followed optionally by a
   syslog ``host ident: ``), dmesg ``[  123.456789] `` (uptime, kept in ``uptime``, not a wall
   time) and ``dmesg -T`` ``[Thu Oct 23 14:02:17 2025] ``;
3. the launcher and collector layers declared in ``layers.toml`` (one entry each; see
   docs/architecture.md): ``kubectl logs --prefix`` ``[pod/<pod>/<container>] `` -> ``host``;
   Slurm ``srun --label`` ``3: `` -> ``srun_task``; Open MPI / UCX ``[host:pid] `` -> ``host``,
   ``pid``; Ray driver re-prints ``(Actor pid=N, ip=IP) `` (nested) -> innermost ``pid``, last
   ``ip``; torchrun tee ``[default3]:`` -> ``local_rank``; ``[rank3]:`` and Open MPI
   ``--tag-output`` ``[1,3]<stderr>:`` -> global ``rank`` (and ``job``);
4. pdsh (DeepSpeed multi-node) ``host: `` -> ``host``. Conservative: the token must be an IPv4
   address, or a lower-case hostname with a digit or hyphen (``gpu-node-07``, ``trn12``) that
   is not a tool name (``python3``); a plain lower-case word (``worker``) only when a rank,
   tee or date prefix follows. ``Traceback``, ``ERROR``, ``RuntimeError``, ``torch.X``,
   ``File "x", line 3`` never qualify;
8. one terminal producer prefix:

   - c10 C++ logger ``[E1023 14:02:17.412903117 ProcessGroupNCCL.cpp:632] ``, ≤2.1
     ``[E ProcessGroupNCCL.cpp:474] `` (optional numeric token, 6 or 9 fraction digits);
   - glog ``E1023 14:02:17.412903 12345 file.cpp:12] `` (number = thread id) and torch Python
     2.3+ ``E1023 14:02:17.123000 48211 torch/x.py:12] `` (number = pid when it is a
     possible pid, <= 4194304; 2.3-2.4 print a Python thread ident there, far larger);
   - torch Python 2.1-2.2 ``[2025-10-23 14:02:17,123] torch.distributed.x: [ERROR] ``;
   - plain Python logging (torch ≤2.0) ``ERROR:torch.distributed.elastic.x:``;
   - DeepSpeed ``[2025-10-23 14:02:20,715] [ERROR] [launch.py:325:sigkill_handler] ``;
   - NCCL ``host:pid:tid [dev] NCCL INFO ``, ``host:pid:tid [dev] file:line NCCL WARN ``,
     2.30.7 ``file:line (func) NCCL WARN ``, ``host:pid:tid NCCL CALL ``, TRACE
     ``host:pid:tid [dev] 12.345 func:line NCCL TRACE ``, each optionally preceded by a
     ``[2025-10-23 14:02:17] `` timestamp (2.26.2+; any bracketed date-time is accepted).

   A bracketed date-time that starts no known logger is stripped as a plain time layer.

The message is everything after the innermost layer; no character of it is dropped or
changed. Message-level prefixes are *read but kept* in the message:

- the PyTorch PG prefix ``[PG ID 0 PG GUID 0(default_pg) Rank 3]``, ``[PG 0 (default_pg) Rank 3]``,
  ``[PG 1 Rank 0]`` -> ``pg``, ``pg_desc``, ``pg_rank``; ``[Rank 5]`` (WorkNCCL prefix) ->
  ``pg_rank`` only (its group is not named). These are ranks inside a group, never global;
- DeepSpeed ``log_dist`` ``[Rank 3] `` after a DeepSpeed logger prefix -> global rank;
- NCCL 2.29.2+ ``[Rank 3] ncclCommInitRank comm …`` -> global rank;
- application ``Rank 3: `` and Lightning ``[rank: 3] `` -> global rank with ``rank_kind="app"``.
  Justified as a generic rule: torch itself logs ``Rank 0: Completed store-based barrier …``
  with the global rank, Lightning prefixes ``[rank: N]`` with its global rank, and
  ``print(f"Rank {rank}: …")`` is the usual script convention (GF-Bench stdout.log). It is
  the weakest line evidence: ``attribution.resolve`` prefers every other source.

``rank_kind`` says where ``rank`` came from: ``prefix`` (``[rankN]:``), ``nccl`` (2.29.2+
``[Rank G]`` init line), ``log_dist`` (DeepSpeed), ``app``. Every integer is a non-negative
int64 or None.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import regex

from nccllog.attribution.layer_regexes import (
    ANCHOR,
    ANCHOR_WINDOW,
    APP_RANK,
    BRACKET_DATE,
    C10,
    C10_CUT,
    DEEPSPEED,
    DMESG,
    DMESG_T,
    EXC_HEAD,
    EXC_RANK,
    GLOG,
    HOSTNAME,
    IPV4,
    ISO_ANYWHERE,
    ISO_TS,
    LOG_DIST,
    NCCL,
    NCCL_GRANK,
    NCCLTESTS,
    PDSH_NEXT,
    PG,
    PY21,
    PYPLAIN,
    SYSLOG,
    SYSLOG_TAIL,
    TERMINAL_LAYERS,
    TOOLS,
    TQDM,
)
from nccllog.attribution.layer_table import DECLARED, EARLY, LATE, apply
from nccllog.ingest import timestamps as ts
from nccllog.ingest.numbers import INT64_MAX, int64
from nccllog.ingest.timestamps import PartialTime

PID_MAX = 4194304  # PID_MAX_LIMIT on 64-bit Linux; a larger "pid" is a thread ident


@dataclass(frozen=True)
class LineAttrs:
    """What the prefixes of one line say. Every field is None where the line says nothing."""

    message: str  # the innermost text, used for pattern matching
    rank: int | None = None  # global rank (see rank_kind)
    local_rank: int | None = None  # from a torchrun tee prefix `[default3]:`
    srun_task: int | None = None  # Slurm task id from `srun --label`
    host: str | None = None  # NCCL header host, pdsh host, journald host
    pid: int | None = None  # NCCL header pid, Python logger pid (2.5+), Ray pid
    tid: int | None = None
    ip: str | None = None  # Ray `ip=` (the node of the worker)
    ray_actor: str | None = None
    pg: str | None = None  # process-group id/name from the PG prefix
    pg_rank: int | None = None  # rank inside that group (`[PG 1 Rank 0]`, `[Rank 0]`)
    nccl_dev: int | None = None  # the `[dev]` of an NCCL header (process-local CUDA ordinal)
    level: str | None = None  # E/W/I/F or WARN/INFO/TRACE
    time: PartialTime | None = None
    repeat: int = 1  # Ray `[repeated Nx across cluster]` -> N + 1
    layers: tuple[str, ...] = ()  # names of the layers stripped, outermost first
    rank_kind: str | None = None  # prefix | nccl | log_dist | app
    pg_desc: str | None = None  # `default_pg`, a user group_desc, ...
    src: str | None = None  # producer source location `ProcessGroupNCCL.cpp:632`, `misc/socket.cc:50`
    func: str | None = None  # NCCL 2.30.7 `(func)`, DeepSpeed `:func]`
    logger: str | None = None  # Python logger name `torch.distributed.elastic.multiprocessing.api`
    tee_role: str | None = None  # torchrun role name (`default`, `trainer`)
    job: int | None = None  # Open MPI job id of `--tag-output`'s `[job,rank]`
    uptime: float | None = None  # dmesg seconds since boot (not a wall time)


_int = int64  # a non-negative int64 from ASCII digits, else None (never int() on a long run)


_A = regex.ASCII
_ESC = regex.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]?|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[PX^_][^\x1b]*(?:\x1b\\)?|[ -/]*[0-~]?)|\x9b[0-?]*[ -/]*[@-~]?",
    _A,
)
_RAY_SUFFIX = regex.compile(
    r" ?\[repeated ([0-9]+)x across cluster\]"
    r"(?: \(Ray deduplicates logs by default\. Set RAY_DEDUP_LOGS=0 to disable log deduplication, or see \S+ for more options\.\))?"
    r" *$",
    _A,
)


# What is left of a colour code whose ESC was lost on the way to a paste: shown as `←` (a Windows
# console's glyph for it) or dropped (`[36m(RayWorker pid=…) [0m …`, with the space the terminal
# put in its place). Only where a reset `[0m` is on the line too, at a word's start, and not
# before a `]` (`[5m]` is a duration).
_SGR_REMNANT = regex.compile(r"(?:←|^ ?|(?<=\s))\[[0-9;]{0,12}m(?=[^\]]|$)", _A)


def clean_text(text: str) -> str:
    """The line with terminal escape sequences and trailing CR/LF removed (the message's base)."""
    if "\x1b" in text or "\x9b" in text:
        text = _ESC.sub("", text)
    if "[0m" in text:
        text = _SGR_REMNANT.sub("", text)
    return text.rstrip("\r\n")


def _pdsh_host(s: str, pos: int) -> tuple[str, int] | None:
    """The pdsh ``host: `` at ``pos`` (conservative), as (host, end), or None."""
    end = s.find(": ", pos, pos + 256)
    if end <= pos:
        return None
    tok = s[pos:end]
    if IPV4.fullmatch(tok):
        return tok, end + 2
    if not HOSTNAME.fullmatch(tok) or TOOLS.fullmatch(tok):
        return None
    if not any("a" <= c <= "z" for c in tok):
        return None
    if any(c.isdigit() or c == "-" for c in tok):
        return tok, end + 2
    # a plain word: only when a rank / tee / date prefix follows
    if PDSH_NEXT.match(s, end + 2):
        return tok, end + 2
    return None


def _new_attrs(values: dict[str, Any]) -> LineAttrs:
    """Build a LineAttrs without running the 23-argument frozen __init__ (this is the hot path).

    Fields not in ``values`` read their class-level defaults, exactly as if passed by keyword.
    """
    obj = object.__new__(LineAttrs)
    obj.__dict__.update(values)
    return obj


def parse_line(text: str) -> LineAttrs:
    """Strip every recognised prefix layer of ``text`` and return what they said."""
    return _parse(text)


# Layers a launcher adds to every physical line of a child's output (not the child's own logger).
LAUNCHER_LAYERS = frozenset({"pdsh", *(layer.name for layer in DECLARED if layer.launcher)})


def launcher_prefix(text: str) -> str:
    """The leading text of ``text`` that launcher layers make up (``worker1: ``, ``3: ``), or ''.

    A prefix that is the whole line (``[rank0]: `` before a CR) counts as well: nothing but an
    outside writer ends a line prefix with a carriage return.
    """
    s = strip_dedup(clean_text(text))[0]
    layers: list[str] = []
    pos = _strip_layers(s, {}, layers)
    bare = not s[pos:].strip()
    if not layers or not all(x in LAUNCHER_LAYERS or (bare and x == "rank") for x in layers):
        return ""
    return s[:pos]


def strip_dedup(text: str) -> tuple[str, int]:
    """Remove Ray's `` [repeated Nx across cluster]`` suffix: (rest, N + 1), or (text, 1) without one."""
    if "across cluster]" in text:
        m = _RAY_SUFFIX.search(text)
        if m:
            n = _int(m.group(1))
            return text[: m.start()], n + 1 if n is not None and n < INT64_MAX else 1
    return text, 1


def _parse(text: str) -> LineAttrs:
    s, repeat = strip_dedup(clean_text(text))
    d: dict[str, Any] = {}
    layers: list[str] = []
    pos = _known_nccl_header(s, d, layers)
    if pos < 0:
        pos = _strip_layers(s, d, layers)
        if not TERMINAL_LAYERS.intersection(layers):
            pos = _past_unknown_layer(s, pos, d, layers)
    message = s[pos:]
    d["message"] = message
    if repeat != 1:
        d["repeat"] = repeat
    if layers:
        d["layers"] = tuple(layers)
    c = message[:1]
    if c == "[" or c == "R":
        if message.startswith("[Rank "):
            if "deepspeed" in layers:
                m = LOG_DIST.match(message)
                if m:
                    _set_rank(d, _int(m.group("r")), "log_dist")
            elif "nccl" in layers:
                m = NCCL_GRANK.match(message)
                if m:
                    _set_rank(d, _int(m.group("r")), "nccl")
        if "deepspeed" not in layers and "nccl" not in layers:
            _read_pg(PG.match(message), d)
        m = APP_RANK.match(message)
        if m:
            _set_rank(d, _int(m.group("r") or m.group("l") or m.group("c")), "app")
    if "pg_rank" not in d and ("PG " in message or "[Rank " in message or "aborted on rank" in message):
        # the exception text of a watchdog abort starts with the PG prefix:
        # `  what():  [PG 0 (default_pg) Rank 9] …`, `DistBackendError: [Rank 2] …`
        m = EXC_HEAD.match(message)
        if m:
            _read_pg(PG.match(message, m.end()), d)
            if "pg_rank" not in d:  # `RuntimeError: NCCL communicator was aborted on rank 3. …`
                m = EXC_RANK.search(message, m.end())
                if m:
                    d["pg_rank"] = _int(m.group("r") or m.group("w"))
    return _new_attrs(d)


# NCCL headers already read (``host:pid:tid [dev] NCCL INFO ``): what they set, or None where
# the header is not read by the NCCL layer alone. Every line of one NCCL thread repeats its header.
_NCCL_HEADERS: dict[str, tuple[tuple[str, Any], ...] | None] = {}
NCCL_HEADERS_KEPT = 65536  # distinct headers remembered (the memo is cleared when full)
NCCL_HEADER_CHARS = 512  # a longer "header" is read as usual, not remembered (memory stays bounded)
_NCCL_LEVELS = ("INFO ", "WARN ", "TRACE ", "CALL ", "ABORT ", "VERSION ")


def forget_nccl_headers() -> None:
    """Empty the NCCL header memo: once an input's lines are matched, its memory is better used
    by the stages after (it is filled again by the next lines parsed)."""
    _NCCL_HEADERS.clear()


def _known_nccl_header(s: str, d: dict[str, Any], layers: list[str]) -> int:
    """Where the message starts after a line's NCCL header when that header is the line's only
    layer (``d`` and ``layers`` filled as ``_strip_layers`` fills them), or -1: strip as usual.

    ``_strip_layers`` reads such a line with ``NCCL`` at 0 alone when nothing before it can apply
    (the first character starts no declared layer, no date, no bracket, no progress bar) and no
    second header follows right after it. That match ends at the first `` NCCL <level> `` (each
    of the header's tokens before it is free of spaces and none can hold that word), so it is a
    function of the text up to there: it is computed once per distinct header text (NCCL prints
    one per thread).
    """
    i = s.find(" NCCL ", 0, NCCL_HEADER_CHARS)
    if i < 0:
        return -1
    c = s[:1]
    if not (c.isascii() and c.isalpha()) or c in EARLY or "%|" in s or "it [" in s:
        return -1
    for level in _NCCL_LEVELS:
        if s.startswith(level, i + 6):
            end = i + 6 + len(level)
            break
    else:
        return -1
    if end > NCCL_HEADER_CHARS:
        return -1
    # A second header right after the first (`NCCL.match` at ``end``) is what `_strip_layers`
    # reads past the first; `NCCL ` later in the message (`NCCL version 2.21.5`) changes nothing.
    if s.find("NCCL ", end) >= 0 and NCCL.match(s, end):
        return -1
    head = s[:end]
    known = _NCCL_HEADERS.get(head, ())
    if known is None:
        return -1
    if known:  # never empty once read: the NCCL layer sets host, pid, tid, dev, level, src, func
        d.update(known)
        layers.append("nccl")
        return end
    st: dict[str, Any] = {}
    read: list[str] = []
    pos = _strip_layers(s, st, read)
    ok = pos == end and read == ["nccl"]
    if len(_NCCL_HEADERS) >= NCCL_HEADERS_KEPT:
        _NCCL_HEADERS.clear()
    _NCCL_HEADERS[head] = tuple(st.items()) if ok else None
    if not ok:
        return -1
    d.update(st)
    layers.extend(read)
    return end


def _past_unknown_layer(s: str, pos: int, d: dict[str, Any], layers: list[str]) -> int:
    """Skip a leading layer nccllog does not know when a known layer starts after it.

    The skipped text still dates the line when it holds an ISO date-time (CI and container
    timestamps); the known layers after it are read as usual.
    """
    m = ANCHOR.search(s, pos + 1, min(len(s), pos + ANCHOR_WINDOW))
    if m is None:
        return pos
    start = m.start()
    if "time" not in d:
        t = ISO_ANYWHERE.search(s, pos, start)
        if t:
            d["time"] = ts.from_iso_match(t)
    layers.append("unknown")
    inner: list[str] = []
    end = _strip_layers(s, d, inner, start)
    layers.extend(inner)
    return end if inner else start


def _read_pg(m: regex.Match[str] | None, d: dict[str, Any]) -> None:
    if m is None:
        return
    if m.group("wr") is not None:
        d["pg_rank"] = _int(m.group("wr"))
    else:
        guid = m.group("guid")
        d["pg"] = guid or m.group("name")
        d["pg_desc"] = (m.group("d1") if guid else m.group("d2")) or None
        d["pg_rank"] = _int(m.group("r"))


def _set_rank(d: dict[str, Any], rank: int | None, kind: str) -> None:
    """Record a line-level global rank unless a stronger one is already there."""
    if d.get("rank") is None and rank is not None:
        d["rank"], d["rank_kind"] = rank, kind


def _strip_layers(s: str, st: dict[str, Any], layers: list[str], start: int = 0) -> int:
    pos, n, stage = start, len(s), 0
    done: set[str] = set()
    bar = "%|" in s or "it [" in s
    while pos < n:
        if bar and stage <= 5:
            # the tail of a tqdm bar redraw, then another writer's line: drop the bar
            m = TQDM.match(s, pos)
            if m and m.end() < n:
                layers.append("progress")
                pos = m.end()
                # find from pos, not `in s[pos:]`: a copy per redraw is quadratic on a long bar line
                bar = s.find("%|", pos) >= 0 or s.find("it [", pos) >= 0
                continue
        c = s[pos]
        hit = apply(EARLY, s, pos, stage, done, st, layers)
        if hit is not None:
            pos, stage = hit
            continue
        if c == "[":
            c1 = s[pos + 1 : pos + 2]
            if c1 in "FEWIV" and c1:
                m = C10.match(s, pos)
                if m:
                    st["level"], st["src"] = m.group("lvl"), m.group("src")
                    if m.group("md"):
                        st["time"] = ts.from_mmdd(
                            m.group("md"),
                            m.group("h"),
                            m.group("mi"),
                            m.group("s"),
                            m.group("f"),
                        )
                        if m.group("num"):
                            st["tid"] = _int(m.group("num"))
                    layers.append("c10")
                    return m.end()
                m = C10_CUT.match(s, pos)
                if m:  # a c10 prefix that a terminal or tracker wrapped: the level still holds
                    st["level"] = m.group("lvl")
                    layers.append("c10")
                    return m.end()
            hit = apply(LATE, s, pos, stage, done, st, layers)
            if hit is not None:
                pos, stage = hit
                continue
            if c1.isdigit() and c1:
                m = BRACKET_DATE.match(s, pos)
                if m and "date" not in done:
                    st["time"] = ts.from_iso_match(m)
                    end = m.end()
                    m2 = DEEPSPEED.match(s, end)
                    if m2:
                        st["level"], st["src"], st["func"] = (
                            m2.group("lvl"),
                            m2.group("src"),
                            m2.group("func"),
                        )
                        layers.append("deepspeed")
                        return m2.end()
                    m2 = PY21.match(s, end)
                    if m2:
                        st["level"], st["logger"] = m2.group("lvl"), m2.group("logger")
                        layers.append("pylog")
                        return m2.end()
                    layers.append("date")
                    done.add("date")
                    pos = end
                    continue
            if stage == 0 and (c1 == " " or c1.isdigit()) and c1:
                m = DMESG.match(s, pos)
                if m:
                    st["uptime"] = float(m.group("s"))
                    layers.append("dmesg")
                    pos, stage = m.end(), 1
                    continue
            if stage == 0 and c1 in "MTWFS" and c1:
                m = DMESG_T.match(s, pos)
                if m:
                    st["time"] = ts.from_syslog_match(m)
                    layers.append("dmesg")
                    pos, stage = m.end(), 1
                    continue
            break
        if c == "(":
            break
        if c == " " and s.startswith(" .. ", pos):
            m = NCCLTESTS.match(s, pos)
            if m:  # nccl-tests: ` .. host pid 4812: Test failure common.cu:364`
                st["host"], st["pid"] = m.group("host"), _int(m.group("pid"))
                layers.append("nccltests")
                return m.end()
        if c.isdigit() and stage == 0:
            m = ISO_TS.match(s, pos)
            if m:
                st["time"] = ts.from_iso_match(m)
                pos, stage = m.end(), 1
                m2 = SYSLOG_TAIL.match(s, pos)
                if m2:
                    st["host"], st["pid"] = m2.group("host"), _int(m2.group("pid"))
                    layers.append("syslog")
                    pos = m2.end()
                else:
                    layers.append("date")
                continue
        if c.isalnum() or c == ":":
            if "NCCL " in s:
                m = NCCL.match(s, pos)
                # A header right after a header: the first writer's record was cut by a second
                # writer's line (`a:1:2 [2] NCCL INFO b:3:3 [7] NCCL WARN …`); the text is the second's.
                while m and (inner := NCCL.match(s, m.end())):
                    m = inner
                if m:
                    st["host"], st["pid"], st["tid"] = (
                        m.group("host") or None,
                        _int(m.group("pid")),
                        _int(m.group("tid")),
                    )
                    st["nccl_dev"] = (
                        _int(m.group("dev")) if m.group("dev") and m.group("dev")[0] != "-" else None
                    )
                    st["level"], st["src"], st["func"] = (
                        m.group("lvl"),
                        m.group("src") or st.get("src"),
                        m.group("func"),
                    )
                    layers.append("nccl")
                    return m.end()
            if c in "FEWIVDC":
                m = GLOG.match(s, pos)
                if m:
                    st["level"], st["src"] = m.group("lvl"), m.group("src")
                    frac = m.group("f")
                    st["time"] = ts.from_mmdd(m.group("md"), m.group("h"), m.group("mi"), m.group("s"), frac)
                    num = _int(m.group("num"))
                    path = st["src"].rsplit(":", 1)[0]
                    if num is not None and path.endswith(".py") and num <= PID_MAX:
                        st["pid"] = num
                    elif num is not None:
                        st["tid"] = num
                    layers.append("pylog" if path.endswith(".py") else "glog")
                    return m.end()
                m = PYPLAIN.match(s, pos)
                if m:
                    st["level"], st["logger"] = m.group("lvl"), m.group("logger")
                    layers.append("pylog")
                    return m.end()
            if stage <= 1 and c in "JFMASOND":
                m = SYSLOG.match(s, pos)
                if m:
                    st["time"] = ts.from_syslog_match(m)
                    st["host"], st["pid"] = m.group("host"), _int(m.group("pid"))
                    layers.append("syslog")
                    pos, stage = m.end(), 1
                    continue
            if stage <= 3 and "pdsh" not in done and (c.isdigit() or c.islower()):
                r = _pdsh_host(s, pos)
                if r:
                    st["host"] = r[0]
                    layers.append("pdsh")
                    done.add("pdsh")
                    pos, stage = r[1], 3
                    continue
        break
    return pos
