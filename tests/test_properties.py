"""Property tests on hostile input for ingest, matching and the whole pipeline: the reader never raises
and returns exactly the physical lines (whole-file and chunked paths alike), coverage adds up, matching
never raises and keeps every number inside 64 bits, and redacting a whole analysis is idempotent and
leaves no original host or address in any format.

Attribution of single lines and text-level redaction have their own property tests
(test_attribution_props.py, test_redact.py); these go through the pipeline instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nccllog.ingest import reader
from nccllog.ingest.reader import read_sources
from nccllog.ingest.sources import Source
from nccllog.match.keywords import prefilter_keywords
from nccllog.match.library import load_library
from nccllog.match.matcher import match_lines
from nccllog.pipeline import InputError, analyze
from nccllog.redact import redact
from nccllog.render import FORMATS, render

INT64 = (-(2**63), 2**63 - 1)
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLOW_SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


_LIB = load_library()
EXAMPLES = sorted({ex.line for p in _LIB.patterns for ex in p.examples})
KEYWORDS = prefilter_keywords(_LIB)

# Bytes that break readers: line ends, NUL, escapes, invalid and truncated UTF-8, a BOM fragment.
HOSTILE_BYTES = st.sampled_from(
    [
        *(b"\n", b"\r", b"\r\n", b"\x00", b"\t", b'"', b",", b"\x1f", b"\x1e", b"\x01"),
        *(b"\x1b[31m", b"\x1b]0;t\x07", b"\xff", b"\xc3", b"\xc3\xa9", b"\xed\xa0\x80", b"\xf0\x9f\x98"),
        *(b"NCCL WARN", b"Watchdog caught"),
    ]
)
PLAIN = st.binary(min_size=0, max_size=40).map(lambda b: bytes(c % 95 + 32 for c in b))
BLOB = st.lists(st.one_of(HOSTILE_BYTES, PLAIN), max_size=60).map(b"".join)


def _expected_lines(data: bytes) -> list[str]:
    """Physical lines as a plain Python split would give them (lossy UTF-8, CRLF as one ending)."""
    text = data.decode("utf-8", "replace")
    parts = text.split("\n")
    if parts[-1] == "":
        parts.pop()
    return [p.removesuffix("\r") for p in parts]


def _read_all(data: bytes) -> tuple[list[str], reader.FileStats]:
    res = read_sources([Source(name="x.log", data=data)], KEYWORDS, keep_all=True)
    (stats,) = res.stats
    return res.lines.sort("line")["text"].to_list(), stats


def _check_read(data: bytes, texts: list[str], stats: reader.FileStats) -> None:
    if stats.skipped:  # skipped whole, and said why
        assert all(s.reason for s in stats.skipped)
        assert texts == [] and stats.lines == 0
        return
    if stats.encoding != "utf-8":
        assert len(texts) == stats.lines
        return
    want = _expected_lines(data)
    assert stats.lines == len(want)
    assert texts == want


@SETTINGS
@given(BLOB)
def test_reader_returns_exactly_the_physical_lines(data: bytes) -> None:
    texts, stats = _read_all(data)
    _check_read(data, texts, stats)


@SETTINGS
@given(BLOB, st.sampled_from([16, 64, 4096]))
def test_chunked_reader_agrees(data: bytes, chunk: int) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(reader, "CHUNK_BYTES", chunk)
        texts, stats = _read_all(data)
    _check_read(data, texts, stats)


@SETTINGS
@given(st.binary(max_size=3000))
def test_reader_never_raises_on_any_bytes(data: bytes) -> None:
    for name in ("x.log", "x.log.gz"):
        res = read_sources([Source(name=name, data=data)], KEYWORDS)
        (stats,) = res.stats
        assert stats.lines >= res.lines.height or stats.lines == 0


# --- matching -------------------------------------------------------------------------------------

NUMBER = st.one_of(
    st.integers(-(10**30), 10**30).map(str),
    st.sampled_from(["-1", "0", "00", "9" * 25, "0x" + "f" * 20, "1e309", "nan", ""]),
)


@st.composite
def mutated_example(draw: st.DrawFn) -> str:
    """A real pattern example with its numbers replaced by absurd ones and noise spliced in."""
    line = draw(st.sampled_from(EXAMPLES))
    out: list[str] = []
    for token in line.split(" "):
        if any(c.isdigit() for c in token) and draw(st.booleans()):
            token = "".join(draw(NUMBER) if c.isdigit() else c for c in token[:3]) + token[3:]
        out.append(token)
    text = " ".join(out)
    if draw(st.booleans()):
        pos = draw(st.integers(0, len(text)))
        noise = draw(st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=10))
        text = text[:pos] + noise + text[pos:]
    return text


LINE = st.one_of(
    mutated_example(), st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=120)
)


@SETTINGS
@given(st.lists(LINE, min_size=1, max_size=12))
def test_matching_never_raises_and_stays_in_range(lines: list[str]) -> None:
    df = pl.DataFrame(
        {"source": ["rank_3.log"] * len(lines), "line": list(range(1, len(lines) + 1)), "text": lines},
        schema={"source": pl.String, "line": pl.Int64, "text": pl.String},
    )
    result = match_lines(df, _LIB, keep_unmatched=True)
    ev = result.events
    assert result.overflow_fields >= 0
    for col, dtype in ev.schema.items():
        if dtype == pl.Int64:
            vals = ev[col].drop_nulls()
            assert vals.is_empty() or (INT64[0] <= vals.min() and vals.max() <= INT64[1])  # type: ignore[operator]
    for col in ("rank", "local_rank", "pid"):
        assert all(v >= 0 for v in ev[col].drop_nulls().to_list()), col
    assert set(ev["line"].to_list()) <= set(df["line"].to_list())


# --- the whole pipeline ---------------------------------------------------------------------------


@st.composite
def log_tree(draw: st.DrawFn) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for i in range(draw(st.integers(1, 4))):
        lines = draw(st.lists(st.one_of(LINE, LINE.map(lambda s, i=i: f"[rank{i}]:{s}")), max_size=15))
        sep = draw(st.sampled_from(["\n", "\r\n"]))
        body = sep.join(lines) + draw(st.sampled_from(["", sep]))
        junk = draw(st.one_of(st.just(b""), BLOB))
        files[f"rank_{i}.log"] = body.encode("utf-8", "surrogatepass") + junk
    return files


def _physical_lines(data: bytes) -> int:
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


@SLOW_SETTINGS
@given(log_tree())
def test_pipeline_never_raises_and_coverage_adds_up(tmp_path_factory: Any, files: dict[str, bytes]) -> None:
    root: Path = tmp_path_factory.mktemp("logs")
    for name, data in files.items():
        (root / name).write_bytes(data)
    try:
        incident = analyze(root, library=_LIB)
    except InputError as exc:  # every file was skipped whole (binary): allowed, and said why
        assert str(exc).startswith("nothing to analyse (") and "binary" in str(exc)
        return
    cov = incident.coverage
    assert cov.files == len(files)
    whole = {Path(s.source).name for s in cov.skipped if s.lines is None}
    recoded = {Path(n.split(": decoded as ")[0]).name for n in cov.notes if ": decoded as " in n}
    plain = [n for n in files if n not in whole | recoded]
    if not recoded:
        assert cov.lines == sum(_physical_lines(files[n]) for n in plain)
    # lines read = matched + unmatched + skipped, with unmatched >= 0
    assert cov.matched >= 0 and cov.matched + cov.skipped_lines <= cov.lines
    ev = incident.events
    hits = ev.filter(ev["pattern"].is_not_null())  # the rest: files' last lines, kept for liveness
    assert cov.matched == (hits.select("source", "line").unique().height if hits.height else 0)
    assert 0 <= cov.unattributed <= cov.matched
    assert all(r.rank >= 0 for r in incident.ranks)
    assert incident.world_size is None or incident.world_size > 0
    for fmt in FORMATS:
        out = render(incident, fmt)
        assert out
    json.loads(render(incident, "json"))


# --- redaction of a whole analysis ----------------------------------------------------------------

HOST = st.from_regex(r"(gpu|node|trn)-[a-z]{1,3}[0-9]{1,3}", fullmatch=True)
IP = st.tuples(st.integers(11, 99), st.integers(1, 254), st.integers(1, 254), st.integers(2, 254)).map(
    lambda t: ".".join(map(str, t))
)


@st.composite
def multi_host_log(draw: st.DrawFn) -> tuple[str, set[str]]:
    hosts = draw(st.lists(HOST, min_size=2, max_size=4, unique=True))
    ips = draw(st.lists(IP, min_size=len(hosts), max_size=len(hosts), unique=True))
    lines = []
    for r, (h, ip) in enumerate(zip(hosts, ips, strict=True)):
        lines += [
            f"{h}:{100 + r}:{200 + r} [0] NCCL INFO NET/Socket : Using [0]eth0:{ip}<0>",
            f"{h}:{100 + r}:{200 + r} [0] NCCL INFO comm 0x{r + 1} rank {r} nranks {len(hosts)} cudaDev 0 "
            f"busId 1000 commId 0x1 - Init COMPLETE",
        ]
    bad = draw(st.integers(0, len(hosts) - 1))
    peer = ips[(bad + 1) % len(hosts)]
    lines.append(
        f"{hosts[bad]}:{100 + bad}:{200 + bad} [0] misc/socket.cc:538 NCCL WARN socketProgress: Connection "
        f"closed by remote peer {hosts[(bad + 1) % len(hosts)]}<{peer}>"
    )
    lines += draw(st.lists(mutated_example(), max_size=4))
    return "\n".join(lines) + "\n", set(hosts) | set(ips)


@SLOW_SETTINGS
@given(multi_host_log())
def test_redacting_an_analysis_is_idempotent_and_leaves_no_original(case: tuple[str, set[str]]) -> None:
    text, originals = case
    plain = analyze(text, library=_LIB)
    assert any(value in render(plain, "json") for value in originals)  # there is something to redact
    once = redact(plain)
    twice = redact(once)
    for fmt in FORMATS:
        out = render(once, fmt)
        assert render(twice, fmt) == out, fmt
        for value in originals:
            assert value not in out, (fmt, value)
