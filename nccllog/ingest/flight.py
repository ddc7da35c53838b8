"""PyTorch Flight Recorder dumps, read without trusting them.

The watchdog writes each rank's dump as pickle protocol 2 of plain data (``torch::jit::Pickler``
with type tags off: dicts, lists, tuples, strings, ints, floats, bools, None), or as JSON
(``_dump_nccl_trace_json`` / ``_dump_fr_trace_json``, Ray's ``rank_<N>.json``). A pickle can run
code when loaded, and these files come from someone else's cluster, so a dump is never loaded as
such: its opcode stream is first checked against an allowlist of plain-data opcodes
(walked opcode by opcode with ``pickletools``' opcode table, building nothing), then loaded by an unpickler whose
``find_class`` and ``persistent_load`` refuse everything, then walked with bounds on depth and on
the number of values (shared references counted each time they are reached, so a memo bomb is
refused). A file is recognised as a dump by its content (schema ``version`` 2.x with ``pg_config``,
``pg_status`` and ``entries``), never by its name; anything that looks like a pickle but fails a
check is a ``Skipped`` entry with the reason, never a rank.
"""

from __future__ import annotations

import io
import json
import math
import os
import pickle
import pickletools
from dataclasses import dataclass
from typing import Any

import regex

from nccllog.ingest import elastic, ras
from nccllog.ingest.numbers import INT64_MAX
from nccllog.ingest.sources import Source
from nccllog.model import Skipped

MAX_DUMP_BYTES = 64 * 1024 * 1024  # a 2,000-entry dump with stacks is a few MB
MAX_OPS = 2_000_000  # opcodes that build a value; bounds the memory a load can take
MAX_VALUES = 4_000_000  # values reached by the walk, shared ones each time (memo/DAG bombs)
MAX_DEPTH = 16  # a dump nests five deep (dump > entries > entry > frames > frame)
MAX_INT_BYTES = 9  # LONG1 payload: a 64-bit nanosecond time needs 8 bytes (plus sign)
HEAD_BYTES = 4096

# Opcodes of plain data in protocols 2-5; everything that names, builds or calls an object
# (GLOBAL, STACK_GLOBAL, REDUCE, INST, OBJ, NEWOBJ, BUILD, EXT*, PERSID, ...) is absent.
ALLOWED_OPS = frozenset(
    {
        "PROTO",
        "FRAME",
        "STOP",
        "MARK",
        "EMPTY_DICT",
        "EMPTY_LIST",
        "EMPTY_TUPLE",
        "TUPLE",
        "TUPLE1",
        "TUPLE2",
        "TUPLE3",
        "SETITEM",
        "SETITEMS",
        "APPEND",
        "APPENDS",
        "BINUNICODE",
        "SHORT_BINUNICODE",
        "BININT",
        "BININT1",
        "BININT2",
        "LONG1",
        "BINFLOAT",
        "NEWTRUE",
        "NEWFALSE",
        "NONE",
        "BINPUT",
        "LONG_BINPUT",
        "MEMOIZE",
        "BINGET",
        "LONG_BINGET",
    }
)
_NO_VALUE_OPS = frozenset({"PROTO", "FRAME", "STOP", "MARK", "BINPUT", "LONG_BINPUT", "MEMOIZE"})
_OPS = {ord(op.code): op for op in pickletools.opcodes if len(op.code) == 1}
# byte -> argument size: n fixed bytes, -2 a one-byte length prefix, -4 a four-byte one.
_ARGS = {c: (op.arg.n if op.arg else 0) for c, op in _OPS.items() if op.name in ALLOWED_OPS}
_NO_VALUE_CODES = frozenset(c for c, op in _OPS.items() if op.name in _NO_VALUE_OPS)
_PROTO, _STOP, _LONG1 = 0x80, ord("."), 0x8A
_CONTAINERS = (dict, list, tuple)  # what an allowed pickle can build besides scalars
KEPT_FRAMES = 64  # frames looked at per entry for the caller of torch (the innermost come first)
_VERSION = regex.compile(r"2\.(\d{1,2})")
_NCCL_VERSION = regex.compile(r"[0-9]{1,3}(?:\.[0-9]{1,4}){1,3}(?:\+[\w.]{1,40})?")  # 2.28.9, 2.21.5+cuda12.4
# What a protocol 0/1 pickle starts with (GLOBAL, MARK, EMPTY_DICT, EMPTY_LIST, PERSID, INST ...).
_OLD_PICKLE_START = b"c(}]PiI"
_RANK_IN_NAME = regex.compile(r"rank[_-]?(\d{1,7})(?:\.json|\.pkl|\.pickle)?$")


class NotADump(Exception):
    """The file is not a Flight Recorder dump; the message says why."""


@dataclass(frozen=True)
class Frame:
    """One Python frame of the stack a collective was called from."""

    name: str
    filename: str
    line: int

    def site(self) -> str:
        """``file:line in name``, the call site as reports show it."""
        return f"{self.filename}:{self.line} in {self.name}"


@dataclass(frozen=True)
class Entry:
    """One recorded collective or point-to-point call of one rank."""

    record_id: int
    pg_id: str
    pg_name: str
    pg_desc: str
    collective_seq_id: int
    p2p_seq_id: int
    op_id: int
    profiling_name: str
    time_created_ns: int | None
    input_sizes: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[str, ...]
    output_sizes: tuple[tuple[int, ...], ...]
    output_dtypes: tuple[str, ...]
    state: str  # scheduled | started | completed
    retired: bool
    timeout_ms: int | None
    is_p2p: bool
    frames: tuple[Frame, ...] = ()

    def signature(self) -> tuple[Any, ...]:
        """What must agree across ranks at one sequence number."""
        return (self.profiling_name, self.input_sizes, self.input_dtypes)

    def call_site(self) -> str | None:
        """The first frame outside torch (the user's call), else the innermost frame."""
        for f in self.frames:
            if not _in_torch(f.filename):
                return f.site()
        return self.frames[0].site() if self.frames else None


@dataclass(frozen=True)
class PgStatus:
    """A process group's progress on one rank when the dump was taken."""

    pg_id: str
    last_enqueued: int | None
    last_started: int | None
    last_completed: int | None


@dataclass(frozen=True)
class Dump:
    """One rank's Flight Recorder dump, typed."""

    source: str
    version: str
    fmt: str  # pickle | json
    rank: int | None  # from the file name; its process groups and the logs' lines may decide it later
    pg_ranks: dict[str, tuple[int, ...]]  # process group name -> global ranks
    pg_desc: dict[str, str]
    pg_status: dict[str, PgStatus]  # pg_id -> status
    entries: tuple[Entry, ...]
    notes: tuple[str, ...] = ()  # where the sources of its rank disagree (correlate/flight.py)
    nccl_version: str | None = None  # `comm_lib_version` (schema 2.10) or `nccl_version` (earlier)

    def allowed_ranks(self) -> frozenset[int] | None:
        """The ranks the writer can be: in every process group its config lists (a rank records
        only the groups it is a member of), or None when the config lists no ranks."""
        groups = [frozenset(r) for r in self.pg_ranks.values() if r]
        return frozenset.intersection(*groups) if groups else None


def partition(sources: list[Source]) -> tuple[list[Source], list[Dump], list[Skipped]]:
    """Split the sources into text to read, Flight Recorder dumps, and would-be dumps refused.

    torchelastic error files and ``ncclras -f json`` reports become the text lines they stand for
    (``ingest/elastic.py``, ``ingest/ras.py``)."""
    texts: list[Source] = []
    dumps: list[Dump] = []
    skipped: list[Skipped] = []
    for src in sources:
        head = None if src.stream is not None else _head(src)  # read once for both checks
        got = try_read(src, head)
        if got is None:
            texts.append(_converted(src, head))
        elif isinstance(got, Dump):
            dumps.append(got)
        else:
            skipped.append(got)
    return texts, dumps, skipped


def try_read(src: Source, head: bytes | None = None) -> Dump | Skipped | None:
    """The dump in ``src``, a Skipped entry when it looks like a pickle or dump but is refused,
    or None when it is something else (text to read as a log). ``head``: its first bytes, when
    already read."""
    if src.stream is not None:  # standard input is read once, as text
        return None
    head = _head(src) if head is None else head
    if head is None or not _candidate(head, src):
        return None
    data = _data(src)
    if data is None:
        return None
    try:
        return parse(data, src.name)
    except NotADump as exc:
        return Skipped(source=src.name, reason=f"not a Flight Recorder dump ({exc})")


def _converted(src: Source, head: bytes | None = None) -> Source:
    """A torchelastic error file or saved ``ncclras`` output as the text lines it stands for."""
    if head is None:
        head = None if src.stream is not None else _head(src)
    if head is None:
        return src
    for kind in (elastic, ras):
        if kind.looks_like(head):
            data = _data(src, limit=MAX_DUMP_BYTES + 1)
            return (kind.to_text(src, data) if data is not None else None) or src
    if ras.looks_like_text(head):
        data = _data(src, limit=ras.MAX_RAS_BYTES + 1)
        return ras.text_to_text(src, data) if data is not None else src
    return src


def parse(data: bytes, name: str) -> Dump:
    """A dump from its bytes (pickle or JSON); raises NotADump with the reason otherwise."""
    if len(data) > MAX_DUMP_BYTES:
        raise NotADump(f"larger than {MAX_DUMP_BYTES} bytes")
    stripped = data.lstrip()
    if stripped[:1] == b"{":
        obj, fmt = _load_json(stripped), "json"
    else:
        obj, fmt = safe_unpickle(data), "pickle"
    _walk(obj)
    return _typed(obj, name, fmt)


def safe_unpickle(data: bytes) -> Any:
    """Load plain data from a pickle after checking every opcode; raises NotADump."""
    _scan(data)
    try:
        return _Refusing(io.BytesIO(data)).load()
    except Exception as exc:
        raise NotADump(f"pickle did not load: {_short(exc)}") from None


def _scan(data: bytes) -> None:
    """Walk the opcode stream up to STOP (opcode table from ``pickletools``) and refuse any opcode
    outside ``ALLOWED_OPS``, protocols other than 2-5, oversized integers and too many values.

    The same walk as ``pickletools.genops``, without building a tuple per opcode: a 2,000-entry
    dump has about 250,000 opcodes."""
    view, n, i, values = memoryview(data), len(data), 0, 0
    while i < n:
        code = data[i]
        spec = _ARGS.get(code)
        if spec is None:
            op = _OPS.get(code)
            raise NotADump(f"pickle opcode {op.name if op else hex(code)} is not plain data")
        i += 1
        if spec == -4:
            size = int.from_bytes(view[i : i + 4], "little")
            i += 4 + size
        elif spec == -2:
            size = data[i] if i < n else 0
            if code == _LONG1 and size > MAX_INT_BYTES:
                raise NotADump("integer too large")
            i += 1 + size
        else:
            if code == _PROTO and i < n and not 2 <= data[i] <= 5:
                raise NotADump(f"pickle protocol {data[i]}")
            i += spec
        if i > n:
            raise NotADump(f"malformed pickle: {_OPS[code].name} runs past the end of the data")
        if code == _STOP:
            return
        if code not in _NO_VALUE_CODES:
            values += 1
            if values > MAX_OPS:
                raise NotADump(f"more than {MAX_OPS} values")
    raise NotADump("malformed pickle: no STOP opcode before the end of the data")


class _Refusing(pickle.Unpickler):
    """An unpickler that resolves no name and no persistent id (the opcode check already refused them)."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused global {module[:40]}.{name[:40]}")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("refused persistent id")


def _load_json(data: bytes) -> Any:
    try:
        return json.loads(
            data.decode("utf-8", "strict"),
            parse_int=_json_int,
            parse_float=_json_float,
            parse_constant=_json_constant,
        )
    except NotADump:
        raise
    except RecursionError:
        raise NotADump("JSON nested too deep") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise NotADump(f"malformed JSON: {_short(exc)}") from None


def _json_int(text: str) -> int:
    if len(text.lstrip("-")) > 20:
        raise NotADump("JSON number too large")
    return int(text)


def _json_float(text: str) -> float:
    if len(text) > 40:
        raise NotADump("JSON number too large")
    value = float(text)
    if not math.isfinite(value):
        raise NotADump("JSON number too large")
    return value


def _json_constant(text: str) -> float:
    raise NotADump(f"JSON constant {text}")


def _walk(obj: Any) -> None:
    """Refuse objects nested too deep or with too many values (each shared reference counted)."""
    seen = 0
    stack: list[tuple[Any, int]] = [(obj, 0)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise NotADump(f"nested deeper than {MAX_DEPTH}")
        # Only containers are pushed: scalars, most of a dump, are only counted.
        if type(value) is dict:
            seen += 2 * len(value)
            kids = [v for v in value.values() if type(v) in _CONTAINERS]
            if not all(type(k) is str for k in value):
                kids += [k for k in value if type(k) in _CONTAINERS]
        else:
            seen += len(value)
            kids = [v for v in value if type(v) in _CONTAINERS]
        if seen > MAX_VALUES:
            raise NotADump(f"more than {MAX_VALUES} values (shared references counted)")
        stack.extend((k, depth + 1) for k in kids)


# --------------------------------------------------------------------------- typing


def _typed(obj: Any, name: str, fmt: str) -> Dump:
    if not isinstance(obj, dict):
        raise NotADump(f"top level is a {type(obj).__name__}, not a dict")
    version = obj.get("version")
    if not isinstance(version, str) or not _VERSION.fullmatch(version):
        raise NotADump("no Flight Recorder schema version 2.x")
    if not isinstance(obj.get("pg_config"), dict) or not isinstance(obj.get("pg_status"), dict):
        raise NotADump("no pg_config and pg_status")
    raw_entries = obj.get("entries", [])  # the JSON form leaves the key out when empty
    if not isinstance(raw_entries, list):
        raise NotADump("entries is not a list")
    pg_ranks: dict[str, tuple[int, ...]] = {}
    pg_desc: dict[str, str] = {}
    for key, cfg in obj["pg_config"].items():
        if isinstance(cfg, dict):
            pg_ranks[str(key)] = tuple(int(r) for r in regex.findall(r"\d{1,7}", str(cfg.get("ranks", ""))))
            pg_desc[str(key)] = str(cfg.get("desc", ""))
    status = {
        str(k): PgStatus(
            pg_id=str(k),
            last_enqueued=_int(v.get("last_enqueued_collective")),
            last_started=_int(v.get("last_started_collective")),
            last_completed=_int(v.get("last_completed_collective")),
        )
        for k, v in obj["pg_status"].items()
        if isinstance(v, dict)
    }
    entries = tuple(e for e in (_entry(raw) for raw in raw_entries) if e is not None)
    lib = obj.get("comm_lib_version", obj.get("nccl_version"))
    return Dump(
        source=name,
        version=version,
        fmt=fmt,
        rank=rank_from_name(name),
        pg_ranks=pg_ranks,
        pg_desc=pg_desc,
        pg_status=status,
        entries=entries,
        nccl_version=lib if isinstance(lib, str) and _NCCL_VERSION.fullmatch(lib) else None,
    )


def _entry(raw: Any) -> Entry | None:
    """One entry, or None when it lacks what the alignment needs."""
    if not isinstance(raw, dict):
        return None
    seq, pg_id = _int(raw.get("collective_seq_id")), raw.get("pg_id")
    if seq is None or pg_id is None:
        return None
    pg = raw.get("process_group")
    pg_name, pg_desc = (str(pg[0]), str(pg[1])) if isinstance(pg, list | tuple) and len(pg) == 2 else ("", "")
    frames = _frames(raw.get("frames"))
    return Entry(
        record_id=_int(raw.get("record_id")) or 0,
        pg_id=str(pg_id),
        pg_name=pg_name or str(pg_id),
        pg_desc=pg_desc,
        collective_seq_id=seq,
        p2p_seq_id=_int(raw.get("p2p_seq_id")) or 0,
        op_id=_int(raw.get("op_id")) or 0,
        profiling_name=str(raw.get("profiling_name", "")),
        time_created_ns=_int(raw.get("time_created_ns")),
        input_sizes=_sizes(raw.get("input_sizes")),
        input_dtypes=tuple(str(d) for d in raw.get("input_dtypes") or ()),
        output_sizes=_sizes(raw.get("output_sizes")),
        output_dtypes=tuple(str(d) for d in raw.get("output_dtypes") or ()),
        state=str(raw.get("state", "")),
        retired=bool(raw.get("retired", False)),
        timeout_ms=_int(raw.get("timeout_ms")),
        is_p2p=bool(raw.get("is_p2p", False)),
        frames=frames,
    )


def _frames(raw: Any) -> tuple[Frame, ...]:
    """The innermost frames down to the first one outside torch (the user's call), at most KEPT_FRAMES."""
    out: list[Frame] = []
    for f in raw[:KEPT_FRAMES] if isinstance(raw, list | tuple) else ():
        if isinstance(f, dict):
            out.append(Frame(str(f.get("name", "")), str(f.get("filename", "")), _int(f.get("line")) or 0))
            if not _in_torch(out[-1].filename):
                break
    return tuple(out)


def _in_torch(filename: str) -> bool:
    return "/torch/" in filename or filename.startswith("torch/")


def _sizes(raw: Any) -> tuple[tuple[int, ...], ...]:
    if not isinstance(raw, list | tuple):
        return ()
    return tuple(tuple(int(d) for d in s if isinstance(d, int)) for s in raw if isinstance(s, list | tuple))


def _int(value: Any) -> int | None:
    """Ints as the pickle has them; the JSON form writes pg_status numbers as strings."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.lstrip("-").isdigit() and len(value) <= 20:
        value = int(value)
    if isinstance(value, int) and -INT64_MAX - 1 <= value <= INT64_MAX:  # what the events table holds
        return value
    return None


def rank_from_name(name: str) -> int | None:
    """The rank the writer put in the file name (``nccl_trace_rank_3``, ``rank_3.json``)."""
    m = _RANK_IN_NAME.search(os.path.basename(name))
    return int(m.group(1)) if m else None


# --------------------------------------------------------------------------- sniffing


def _candidate(head: bytes, src: Source) -> bool:
    """Whether the first bytes look like a pickle or a Flight Recorder JSON dump."""
    if head[:1] == b"\x80":
        return True
    stripped = head.lstrip()
    if stripped[:1] == b"{":
        return b'"version"' in head and (
            b'"pg_config"' in head or b'"pg_status"' in head or b'"entries"' in head
        )
    if head[:1] and head[:1] in _OLD_PICKLE_START:
        # A protocol 0/1 pickle (what a hand-made payload usually is) must parse to its STOP.
        data = _data(src, limit=HEAD_BYTES * 16)
        return data is not None and _whole_pickle(data)
    return False


def _whole_pickle(data: bytes) -> bool:
    try:
        end = max(pos or 0 for _op, _arg, pos in pickletools.genops(io.BytesIO(data)))
    except Exception:
        return False
    return bool(data[end + 1 :].strip() == b"")


def _head(src: Source) -> bytes | None:
    if src.data is not None:
        return src.data[:HEAD_BYTES]
    return _data(src, limit=HEAD_BYTES)


def _data(src: Source, limit: int = MAX_DUMP_BYTES + 1) -> bytes | None:
    if src.data is not None:
        return src.data[:limit]
    assert src.path is not None
    try:
        with open(src.path, "rb") as fh:
            return fh.read(limit)
    except OSError:
        return None  # the text reader reports it


def _short(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
