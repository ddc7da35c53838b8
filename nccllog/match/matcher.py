"""Candidate lines -> events: attribution of each line, then the regexes of the patterns whose keywords hit.

A line may match several patterns; a pattern marked ``fallback`` is used only when no other
pattern matched. Lines that hit no pattern but look like warnings or errors are grouped into
masked templates so that unknown failures still show up.

Matching is linear in the length of a line: the library's regexes are written so (checked by
tests/test_linear.py), keywords are looked up per carriage-return segment, and every search runs
under the ``regex`` module's timeout with a budget per physical line (``LINE_BUDGET_S``): a line
whose budget runs out is counted in the coverage (file and line), never dropped silently.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl
import regex

from nccllog.attribution.columns import INTERNAL_SCHEMA, internal_columns, line_columns
from nccllog.attribution.layers import LineAttrs, forget_nccl_headers, launcher_prefix, parse_line
from nccllog.attribution.paths import FileAttrs, attrs_from_path
from nccllog.ingest.numbers import INT64_MAX
from nccllog.match.keywords import ALERT_WORDS, sampled_keywords
from nccllog.match.library import Library, Pattern
from nccllog.match.shapes import number_blind, shape
from nccllog.model import EVENT_BASE_COLUMNS, Skipped

WARNING_LEVELS = frozenset({"W", "WARN", "WARNING"})
QUIET_LEVELS = frozenset({"W", "I", "V", "D", "WARN", "INFO", "TRACE", "WARNING", "DEBUG"})
MEMO_SIZE = 16384  # distinct messages whose matches are remembered (the memo is cleared when full)
MEMO_CHARS = 1024  # longer messages are matched afresh (a long one rarely recurs)
MAX_TEXT = 4000  # characters of the raw line kept in the events table
# Seconds the regexes of the patterns may spend on one physical line, all segments and patterns
# together. Linear patterns need well under 0.2 s for a 1 MiB line; the budget only stops a
# pattern (a user's own, say) that backtracks without end.
LINE_BUDGET_S = 5.0
TIMEOUT_REASON = "pattern matching ran out of its time budget; matched only in part"
# Rows kept per writer and pattern (source, rank, pid, host, srun task, pattern): the first and the
# last this many; the ones between are counted (``MatchResult.thinned_lines``), not kept, so memory
# follows ranks and patterns, not lines (256 MiB of one rank's repeated watchdog lines).
KEEP_FIRST = KEEP_LAST = 64
_ANSI = regex.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?")
_MASK = regex.compile(r"0x[0-9a-fA-F]+|\b[0-9a-f]{8,}\b|\d+(?:\.\d+)*")

_FIELD_DTYPES: dict[str, Any] = {
    "int": pl.Int64,
    "hex": pl.Int64,
    "float": pl.Float64,
    "clock": pl.Float64,
    "str": pl.String,
}


@dataclass(frozen=True)
class MatchResult:
    """Events (raw attribution, internal `_` columns included) and unmatched alert templates."""

    events: pl.DataFrame
    templates: tuple[tuple[str, int, str], ...]  # (masked template, count, "source:line" example)
    overflow_fields: int  # integer fields that did not fit in 64 bits and became null
    timed_out: tuple[Skipped, ...] = ()  # per file, the lines whose matching ran out of time
    thinned_lines: int = 0  # matched lines left out: repeats of one writer and pattern (KEEP_FIRST)


def events_schema(library: Library) -> dict[str, Any]:
    """Column -> dtype of the events table for this library (base, then fields sorted, then internal)."""
    schema = dict(EVENT_BASE_COLUMNS)
    for name, typ in library.field_types.items():
        schema[name] = _FIELD_DTYPES[typ]
    schema.update(INTERNAL_SCHEMA)
    return schema


def match_lines(
    lines: pl.DataFrame,
    library: Library,
    *,
    keep_unmatched: bool = False,
    budget_s: float | None = None,
) -> MatchResult:
    """Match candidate lines (columns source, line, text) against the library.

    With ``keep_unmatched`` every line becomes a row (pattern null where nothing matched), which
    gives per-line attribution listings. ``budget_s`` bounds the regex time of one physical line
    (default ``LINE_BUDGET_S``).
    """
    schema = events_schema(library)
    rows = _EventBuilder(schema)
    templates: Counter[str] = Counter()
    template_example: dict[str, str] = {}
    overflow = 0
    timed_out: dict[str, list[int]] = {}
    if lines.height == 0:
        return MatchResult(pl.DataFrame(schema=schema), (), 0)
    if "kw" not in lines.columns:
        kw_expr = pl.col("text").str.extract_many(list(library.keywords), overlapping=True)
        lines = lines.with_columns(kw_expr.alias("kw"))
    hits = lines.select("source", "line", "text", "kw")
    alert = list(ALERT_WORDS)
    sampled = frozenset(sampled_keywords(library))
    file_cache: dict[str, FileAttrs] = {}
    src = hits.get_column("source")  # each file's lines together (as read): its counts go when they end
    together = src.n_unique() == 1 + int(src.ne_missing(src.shift(1)).slice(1).sum())
    bound = _Bound(None if keep_unmatched else KEEP_FIRST, per_file=together)
    # The same message (a prefix's rank, pid and time stripped) recurs on every rank: NCCL's
    # init chatter, the watchdog's lines. What the patterns found in it is computed once.
    found_memo = _Found()
    # (a segment's keywords, whether its level is quiet) -> its patterns, their ids, number-blind
    candidate_memo: dict[tuple[tuple[str, ...], bool], tuple[list[Pattern], tuple[str, ...], bool]] = {}
    hit_lines = 0
    last_hit: tuple[str, int] | None = None
    for source, line_no, text, kws in hits.iter_rows():
        fa = file_cache.get(source)
        if fa is None:
            fa = file_cache[source] = attrs_from_path(source)
        # distinct keywords: a line of many redraws lists one keyword once per occurrence
        distinct = sorted(set(kws or ()))
        deadline = time.monotonic() + (LINE_BUDGET_S if budget_s is None else budget_s)
        out_of_time = False
        for segment in _segments(text, distinct, sampled):
            seg_kws = tuple([k for k in distinct if k in segment])
            attrs = parse_line(segment)
            # a line its own logger marks as a warning or information is no error statement
            quiet = attrs.level in QUIET_LEVELS
            known = candidate_memo.get((seg_kws, quiet))
            if known is None:
                known = candidate_memo[(seg_kws, quiet)] = _candidates(library, seg_kws, quiet)
            offset, found, late = found_memo.get(known, attrs.message, deadline)
            out_of_time = out_of_time or late
            if offset:
                attrs = _with_message(attrs, attrs.message[offset:])
            for pat, values, lost in found:
                overflow += lost
                bound.add(rows, (source, line_no, segment, attrs, fa, pat, values, None))
            if found:
                hit_lines += (source, line_no) != last_hit
                last_hit = (source, line_no)
                continue
            level = _own_level(attrs)
            # A line without any keyword was kept as one of its file's last lines: it dates the
            # writer's last sign of life, so it stays as a row without a pattern.
            telling = kws and not library.quiet_keywords.issuperset(distinct)
            if keep_unmatched or (not kws and attrs.message.strip()) or (telling and level):
                bound.add(rows, (source, line_no, segment, attrs, fa, None, {}, level))
            if any(w in segment for w in alert):
                tpl = _MASK.sub("N", attrs.message.strip())[:200]
                if tpl:
                    templates[tpl] += 1
                    template_example.setdefault(tpl, f"{source}:{line_no}")
        if out_of_time:
            timed_out.setdefault(source, []).append(line_no)
    bound.finish(rows)
    events = rows.frame()
    forget_nccl_headers()  # 32,768 of them at 16,384 files: their memory serves the stages after
    # select before filter: a filter of the whole table would copy every column
    spots = events.select("source", "line", "pattern").filter(pl.col("pattern").is_not_null())
    kept_hits = spots.select("source", "line").unique().height
    ordered = sorted(templates.items(), key=lambda kv: (-kv[1], kv[0]))
    return MatchResult(
        events=events,
        templates=tuple((t, c, template_example[t]) for t, c in ordered),
        overflow_fields=overflow,
        timed_out=tuple(
            Skipped(source=src, reason=TIMEOUT_REASON, lines=_ranges(nums))
            for src, nums in sorted(timed_out.items())
        ),
        thinned_lines=hit_lines - kept_hits,
    )


def _ranges(numbers: list[int]) -> str:
    """``1,2,3,7`` -> ``1-3, 7``."""
    out: list[str] = []
    nums = sorted(set(numbers))
    start = prev = nums[0]
    for n in [*nums[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(out)


def _own_level(attrs: LineAttrs) -> str | None:
    """``warning`` for a line its own logger marks as one. A warning no pattern knows still tells
    that its writer saw nothing worse: a paste of such warnings is "no failure", unlike a log
    that merely stops."""
    return "warning" if attrs.level in WARNING_LEVELS else None


def _find(
    candidates: list[Pattern], message: str, deadline: float
) -> tuple[int, list[tuple[Pattern, regex.Match[str]]], bool]:
    """The patterns that match ``message`` (fallback patterns only where no other one does), the
    offset of the text they matched in, and whether a search ran past ``deadline`` (it then counts
    as no match). An unknown leading layer (a viewer's line number, a collector's stamp) can hide
    a message whose pattern is anchored at the start, so each kind is retried after the first
    separators."""
    late = False
    for fallback in (False, True):
        kind = [p for p in candidates if p.fallback == fallback]
        if not kind:
            continue
        for offset in _offsets(message):
            text = message[offset:]
            found: list[tuple[Pattern, regex.Match[str]]] = []
            for p in kind:
                left = deadline - time.monotonic()
                if left <= 0:
                    return offset, found, True
                try:
                    m = p.regex.search(text, timeout=left)
                except TimeoutError:
                    late = True
                    continue
                if m is not None:
                    found.append((p, m))
            if found:
                return offset, found, late
    return 0, [], late


_SEPARATOR = regex.compile(r"(?:\]|\||>>|: | -)\s+")
MAX_RETRIES = 3


def _offsets(message: str) -> Iterator[int]:
    """0, then the separator offsets, computed only when the whole message matched nothing."""
    yield 0
    yield from _separator_offsets(message)


def _separator_offsets(message: str) -> list[int]:
    """Where the text after one of the first separators (`] `, `| `, `>> `, `: `, ` - `) begins."""
    head = message[:160]
    return [m.end() for m in _SEPARATOR.finditer(head)][:MAX_RETRIES]


def _segments(text: str, kws: list[str], sampled: frozenset[str]) -> list[str]:
    """Split a physical line at bare carriage returns (tqdm redraws); drop ANSI escapes.

    ``kws`` are the distinct keywords found in the whole line. Of the redraws that carry only high-volume
    keywords (``sampled``: progress bars), only the last is kept: one bar line can hold thousands
    of redraws, and only where it stopped matters.
    """
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "\r" not in text:
        return [text]
    parts = [s for s in text.split("\r") if s.strip()]
    frequent = [k for k in kws if k in sampled]
    if len(parts) < 2:
        return parts
    # A launcher (pdsh, srun --label, torchrun --tee, Ray) prefixes each physical line of one
    # child's stream, so every segment after a CR comes from the same origin as the first one.
    lead = launcher_prefix(parts[0])
    keep = list(range(len(parts)))
    if frequent:
        others = [k for k in kws if k not in sampled]
        redraw = [any(k in s for k in frequent) and not any(k in s for k in others) for s in parts]
        last = max((i for i, r in enumerate(redraw) if r), default=-1)
        keep = [i for i in keep if not redraw[i] or i == last]
    return [parts[i] if not i or not lead or parts[i].startswith(lead) else lead + parts[i] for i in keep]


def _candidates(
    library: Library, kws: tuple[str, ...], quiet: bool
) -> tuple[list[Pattern], tuple[str, ...], bool]:
    """The patterns with a keyword in ``kws`` (the keywords of one segment), in library order,
    their ids, and whether they are all blind to numbers (``shapes``); on a ``quiet`` line (its
    level a warning or information) no error-line pattern."""
    idx: set[int] = set()
    for k in kws:
        idx.update(library.keyword_patterns.get(k, ()))
    pats = [library.patterns[i] for i in sorted(idx)]
    if quiet:
        pats = [p for p in pats if p.signal != "error_line"]
    return pats, tuple(p.id for p in pats), bool(pats) and all(number_blind(p.regex) for p in pats)


_Hits = tuple[tuple[Pattern, dict[str, Any], int], ...]  # (pattern, its typed fields, fields lost)


class _Found:
    """What the patterns found in each message (offset, hits), remembered per message and, where
    the patterns are blind to numbers, per shape (``shapes``): a message of a known shape takes
    that shape's match spans and reads its own fields from them, without a search."""

    def __init__(self) -> None:
        self.found: dict[tuple[str, tuple[str, ...]], tuple[int, _Hits]] = {}
        self.spans: dict[tuple[str, tuple[str, ...]], tuple[int, tuple[tuple[Pattern, _Spans], ...]]] = {}

    def get(
        self, candidates: tuple[list[Pattern], tuple[str, ...], bool], message: str, deadline: float
    ) -> tuple[int, _Hits, bool]:
        """(offset, hits, whether a search ran out of time) for ``message``."""
        pats, ids, blind = candidates
        known = self.found.get((message, ids))
        if known is not None:
            return (*known, False)
        small = len(message) <= MEMO_CHARS
        form = shape(message) if blind and small else None
        spans = None if form is None else self.spans.get((form, ids))
        late = False
        if spans is not None:
            offset, pat_spans = spans
            text = message[offset:]
            hits = tuple(
                (pat, *_typed_fields(pat, [text[a:b] if a >= 0 else None for a, b in sp]))
                for pat, sp in pat_spans
            )
        else:
            offset, matches, late = _find(pats, message, deadline)
            hits = tuple((pat, *_typed_fields(pat, [m.group(f) for f in pat.fields])) for pat, m in matches)
            if form is not None and not late:
                where = tuple((pat, tuple(m.span(f) for f in pat.fields)) for pat, m in matches)
                _remember(self.spans, (form, ids), (offset, where))
        if small and not late:
            _remember(self.found, (message, ids), (offset, hits))
        return offset, hits, late


_Spans = tuple[tuple[int, int], ...]  # a match's span of each field of its pattern ((-1, -1): none)


def _remember(memo: dict[Any, Any], key: Any, value: Any) -> None:
    if len(memo) >= MEMO_SIZE:
        memo.clear()
    memo[key] = value


def _with_message(attrs: LineAttrs, message: str) -> LineAttrs:
    """``attrs`` with another message (``dataclasses.replace`` without its 23-argument init)."""
    out = object.__new__(LineAttrs)
    out.__dict__.update(attrs.__dict__)
    out.__dict__["message"] = message
    return out


def _typed_fields(pat: Pattern, raws: list[str | None]) -> tuple[dict[str, Any], int]:
    """The pattern's fields from their matched texts (in ``pat.fields`` order), typed; and how many
    integers did not fit in 64 bits."""
    values: dict[str, Any] = {}
    lost = 0
    for (name, typ), raw in zip(pat.fields.items(), raws, strict=True):
        if raw is None:
            values[name] = None
            continue
        if typ == "str":
            values[name] = raw
            continue
        try:
            if typ == "float":
                values[name] = float(raw)
                continue
            if typ == "clock":
                values[name] = _clock_seconds(raw)
                continue
            num = int(raw, 16) if typ == "hex" else int(raw)
        except ValueError:
            values[name] = None
            continue
        if -INT64_MAX - 1 <= num <= INT64_MAX:
            values[name] = num
        else:
            values[name] = None
            lost += 1
    return values, lost


def _cut(text: str) -> str:
    """``text`` within MAX_TEXT characters, a cut one marked with how much went."""
    if len(text) <= MAX_TEXT:
        return text
    mark = f"…[cut {len(text) - MAX_TEXT + 20} chars]"
    return text[: MAX_TEXT - 20] + mark


def _clock_seconds(raw: str) -> float | None:
    """``[H:]MM:SS`` -> seconds; None for anything else."""
    parts = raw.split(":")
    if not 2 <= len(parts) <= 3 or not all(p.isascii() and p.isdigit() for p in parts):
        return None
    total = 0
    for p in parts:
        total = total * 60 + int(p)
    return float(total)


class _EventBuilder:
    """Collects event rows; every ``FLUSH_ROWS`` rows they become a polars frame, one column at a time.

    Python objects cost about ten times the memory of the same values in polars, and a dict per
    row costs more than the row, so rows are kept as they come and turned into columns at a flush.
    A column that is null in every row of a flush (most pattern fields, most attribution columns)
    becomes a polars scalar column: no memory for its rows, in this frame or any later copy.
    """

    FLUSH_ROWS = 32768

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        self.frames: list[pl.DataFrame] = []
        self.orders: list[pl.Series] = []
        self.added = 0  # rows offered so far, kept or not: the input order of the next one
        self.out_of_order = False
        self.rows: list[_Row] = []
        self.order: list[int] = []

    def add(self, row: _Row, order: int | None = None) -> None:
        """Add one row; ``order`` is its place in the input where rows are added out of order."""
        self.rows.append(row)
        self.order.append(self.added if order is None else order)
        self.out_of_order = self.out_of_order or order is not None
        self.added += 1
        if len(self.rows) >= self.FLUSH_ROWS:
            self._flush()

    def _flush(self) -> None:
        rows = self.rows
        if not rows:
            return
        source, line, text, attrs, fattrs, pats, values, levels = map(list, zip(*rows, strict=True))
        a = line_columns(attrs)
        # Unknown years are stood in for by 2000 (a leap year, so 29 February survives) until
        # rank resolution infers the real one from the rest of the logs.
        base: dict[str, list[Any]] = {
            "source": source,
            "line": line,
            "text": [t if len(t) <= MAX_TEXT else _cut(t) for t in text],
            "message": [t if len(t) <= MAX_TEXT else _cut(t) for t in a["message"]],
            "pattern": [p.id if p else None for p in pats],
            "signal": [p.signal if p else None for p in pats],
            "category": [p.category if p else None for p in pats],
            "severity": [p.severity if p else lv for p, lv in zip(pats, levels, strict=True)],
            "rank": a["rank"],
            "local_rank": a["local_rank"],
            "pg": a["pg"],
            "pg_rank": a["pg_rank"],
            "host": a["host"],
            "pid": a["pid"],
            "time": [None if t is None else t.complete(2000) for t in a["time"]],
            "repeat": a["repeat"],
            "attribution": [],  # written by rank resolution
        }
        base.update(internal_columns(attrs, fattrs, a))
        fields: dict[str, list[Any]] = {}
        for i, row_values in enumerate(values):
            for name, value in row_values.items():
                if value is not None:
                    col = fields.get(name)
                    if col is None:
                        col = fields[name] = [None] * len(rows)
                    col[i] = value
        real: dict[str, list[Any]] = {}
        for name in self.schema:
            column = base[name] if name in base else fields.get(name)
            if column and column.count(None) < len(column):  # C, not a generator per value
                real[name] = column
        frame = pl.DataFrame(real, schema={name: self.schema[name] for name in real})
        nulls = [pl.lit(None, self.schema[name]).alias(name) for name in self.schema if name not in real]
        self.frames.append(frame.with_columns(nulls).select(list(self.schema)))
        self.orders.append(pl.Series(self.order, dtype=pl.Int64))
        self.rows, self.order = [], []

    def frame(self) -> pl.DataFrame:
        """The events table with the full schema (every field column present)."""
        self._flush()
        if not self.frames:
            return pl.DataFrame(schema=self.schema)
        out = concat_columns(self.frames, self.schema)
        if self.out_of_order:  # rows kept back (the last of a writer's repeats) go back in place
            out = out.sort(pl.concat(self.orders), maintain_order=True)
        return out


_Row = tuple[str, int, str, LineAttrs, FileAttrs, Pattern | None, Mapping[str, Any], str | None]


def concat_columns(frames: list[pl.DataFrame], schema: dict[str, Any]) -> pl.DataFrame:
    """``pl.concat(frames, rechunk=True)`` of frames with ``schema``'s columns, a column at a time,
    emptying ``frames``: each column's parts go once it is joined (one column held twice, not the
    table); a column null in every frame stays a polars scalar column (no memory per row)."""
    height = sum(f.height for f in frames)
    columns: list[pl.Series] = []
    nulls: list[pl.Expr] = []
    for name in schema:
        if all(f[name].null_count() == f.height for f in frames):
            nulls.append(pl.lit(None, schema[name]).alias(name))
            continue
        parts = [f.drop_in_place(name) for f in frames]
        columns.append(pl.concat(parts, rechunk=True))
        del parts
    frames.clear()
    out = pl.DataFrame(columns, height=height)
    return out.with_columns(nulls).select(list(schema)) if nulls else out.select(list(schema))


class _Bound:
    """Keeps the first ``limit`` and the last ``limit`` rows of each writer and pattern; the rows
    between are dropped as they are pushed out (deterministic: no sampling). ``None``: keep all.

    Rows of a line that names no writer at all (no rank, pid, host or srun task in its prefix or
    file name) are always kept: rank resolution may still place them by their neighbours.
    """

    def __init__(self, limit: int | None, per_file: bool = False) -> None:
        self.limit = limit
        self.seen: dict[tuple[Any, ...], int] = {}
        self.last: dict[tuple[Any, ...], deque[tuple[int, _Row]]] = {}
        self.per_file = per_file  # rows come file by file: a file's counts go when its rows end
        self.source: str | None = None

    def add(self, rows: _EventBuilder, row: _Row) -> None:
        source, _line, _text, a, fa, pat, _values, _level = row
        if self.per_file and source != self.source:
            self.seen.clear()
            self.source = source
        writer = (a.rank, a.pid, a.host, a.srun_task, fa.rank, fa.pid, fa.host)
        if self.limit is None or writer == (None,) * 7:
            self._put(rows, row)
            return
        key = (source, *writer, pat.id if pat else None)
        n = self.seen.get(key, 0)
        self.seen[key] = n + 1
        if n < self.limit:
            self._put(rows, row)
            return
        last = self.last.get(key)
        if last is None:
            last = self.last[key] = deque(maxlen=self.limit)
        last.append((rows.added, row))
        rows.added += 1

    @staticmethod
    def _put(rows: _EventBuilder, row: _Row, order: int | None = None) -> None:
        rows.add(row, order)

    def finish(self, rows: _EventBuilder) -> None:
        """Add the rows kept back (the last ones of each writer and pattern), in their input order."""
        for last in self.last.values():
            for order, row in last:
                self._put(rows, row, order)
        self.last.clear()
