"""Property tests for attribution on hostile input: parse_line and resolve never raise, every rank/pid is
a non-negative int64 or null, and the message is always the untouched tail of the line."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_ranks import events

from nccllog.attribution import layers, resolve
from nccllog.attribution.layers import INT64_MAX, LineAttrs, clean_text, parse_line, strip_dedup

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# numbers around the edges: small, int64 max, beyond 64 bits
NUMS = st.one_of(
    st.integers(0, 99),
    st.integers(0, 2**22),
    st.sampled_from([2**31, INT64_MAX, INT64_MAX + 1, 10**20, 10**40]),
)
ANY_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=200)
CONTROL = st.text(st.sampled_from("\x00\x07\x08\t\x0b\x0c\r\x1b\x7f\x9b[]():; 0123456789abcE"), max_size=80)


def _ok_int(v: int | None) -> bool:
    return v is None or 0 <= v <= INT64_MAX


def _check(a: LineAttrs, raw: str) -> None:
    for v in (a.rank, a.local_rank, a.srun_task, a.pid, a.tid, a.pg_rank, a.nccl_dev):
        assert _ok_int(v)
    assert 1 <= a.repeat <= INT64_MAX
    base, _ = strip_dedup(clean_text(raw))
    assert base.endswith(a.message)  # the message is the untouched tail after the stripped layers


@SETTINGS
@given(ANY_TEXT)
def test_parse_line_never_raises_on_any_text(text: str) -> None:
    _check(parse_line(text), text)


@SETTINGS
@given(CONTROL)
def test_parse_line_on_control_characters(text: str) -> None:
    _check(parse_line(text), text)


# --- generated prefix stacks -------------------------------------------------------------------------
@st.composite
def stacked(draw: st.DrawFn) -> tuple[str, dict[str, Any], str]:
    want: dict[str, Any] = {}
    parts: list[str] = []
    if draw(st.booleans()):
        t = draw(NUMS)
        parts.append(draw(st.sampled_from([f"{t}: ", f" {t}: ", f"0{t}: ", f"P1  {t}: "])))
        want["srun_task"] = t
    if draw(st.booleans()):
        h = draw(st.sampled_from(["10.0.0.12", "gpu-node-07", "trn-a07", "node3"]))
        parts.append(f"{h}: ")
        want["host"] = h
    for _ in range(draw(st.integers(0, 2))):
        p = draw(NUMS)
        parts.append(f"(WorkerDict pid={p}, ip=10.0.0.9) ")
        want["pid"] = p
    if draw(st.booleans()):
        lr = draw(NUMS)
        parts.append(f"[default{lr}]:")
        want["local_rank"] = lr
    if draw(st.booleans()):
        r = draw(NUMS)
        parts.append(f"[rank{r}]:")
        want["rank"] = r
    if draw(st.booleans()):
        parts.append(
            draw(
                st.sampled_from(
                    [
                        "[E1023 14:02:17.412903117 ProcessGroupNCCL.cpp:632] ",
                        "[W307 01:02:03.123456 socket.cpp:1] ",
                        "[E ProcessGroupNCCL.cpp:474] ",
                    ]
                )
            )
        )
    msg = "msg " + draw(
        ANY_TEXT.filter(lambda s: "across cluster]" not in s and "\x1b" not in s and "\x9b" not in s)
    ).rstrip("\r\n")
    return "".join(parts) + msg, want, msg


@SETTINGS
@given(stacked())
def test_generated_stacks_round_trip(case: tuple[str, dict[str, Any], str]) -> None:
    line, want, msg = case
    a = parse_line(line)
    _check(a, line)
    assert a.message == msg
    for name, value in want.items():
        got = getattr(a, name)
        if isinstance(value, int) and value > INT64_MAX:
            assert got is None
        else:
            assert got == value, (name, line)


@SETTINGS
@given(st.integers(0, 10**30), st.integers(0, 10**30))
def test_huge_numbers_in_every_numeric_slot(x: int, y: int) -> None:
    lines = [
        f"[rank{x}]:[E1023 14:02:17.412903117 ProcessGroupNCCL.cpp:{y}] [PG ID {x} PG GUID {y}(default_pg) Rank {x}] x",
        f"host:{x}:{y} [{x}] NCCL INFO [Rank {y}] ncclCommInitRank comm 0x1 rank 0",
        f"(A pid={x}, ip=1.2.3.4) [trainer{y}]:{x}: y [repeated {x}x across cluster]",
        f"E1023 14:02:17.123000 {x} torch/x.py:{y}] z",
        f"Rank {x}: hello",
        f"[{y}.{x}] NVRM: Xid",
    ]
    for line in lines:
        _check(parse_line(line), line)


# --- resolve --------------------------------------------------------------------------------------------
LINE = st.one_of(
    stacked().map(lambda c: c[0]),
    ANY_TEXT,
    st.builds(
        lambda h, p, r, n: (
            f"{h}:{p}:{p} [0] NCCL INFO comm 0x1 rank {r} nranks {n} cudaDev 0 busId 1 - Init COMPLETE"
        ),
        st.sampled_from(["a", "b", "10.0.0.1"]),
        NUMS,
        NUMS,
        NUMS,
    ),
)
FIELD = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1))


@st.composite
def rows(draw: st.DrawFn) -> list[tuple[str, str, dict[str, Any]]]:
    out = []
    for _ in range(draw(st.integers(0, 12))):
        src = draw(
            st.sampled_from(
                [
                    "rank_3.log",
                    "x/attempt_0/1/stderr.log",
                    "nccl_logs_a_7.txt",
                    "slurm.out",
                    "run_20250101/a.log",
                ]
            )
        )
        fields = {
            "signal": draw(st.sampled_from(["init", "bootstrap", "root_cause", "process_exit", "info"])),
            "comm_rank": draw(FIELD),
            "nranks": draw(FIELD),
            "target_rank": draw(FIELD),
            "target_local_rank": draw(FIELD),
            "target_pid": draw(FIELD),
            "world_size": draw(FIELD),
            "ip": draw(st.sampled_from([None, "10.0.0.1", "172.18.0.2"])),
            "target_host": draw(st.sampled_from([None, "a", "b.cluster"])),
        }
        out.append((src, draw(LINE), fields))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows())
def test_resolve_never_negative_and_never_raises(rs: list[tuple[str, str, dict[str, Any]]]) -> None:
    df, topo = resolve(events(*rs))
    assert df.height == len(rs)
    for col in ("rank", "local_rank", "pid"):
        vals = [v for v in df[col].to_list() if v is not None]
        assert all(0 <= v <= INT64_MAX for v in vals), col
    assert all(isinstance(a, str) and a for a in df["attribution"].to_list())
    assert not [c for c in df.columns if c.startswith("_")]
    assert topo.world_size is None or topo.world_size >= 0
    assert all(r >= 0 for r in topo.pid_rank.values())


# --- NCCL header memo: the same attributes as reading every layer ------------------------------------
_HEAD_TOKENS = st.sampled_from(
    ["gpu-3", "P7", "h", "é", ":", "12", "[0]", "[-1]", " ", "1.25", "misc/socket.cc:50", "(fn)", "NCCL "]
)
_LEVELS = st.sampled_from(["INFO", "WARN", "TRACE", "CALL", "ABORT", "VERSION", "INF", "INFO\t"])
_TAILS = st.sampled_from(
    [
        "Init START",
        "%| 3/9 [00:01<00:02]",
        "it [",
        "b:1:2 [1] NCCL INFO x",
        "NCCL version 2.21.5+cuda12.4",
        ":3:4 NCCL WARN y",
        " NCCL INFO ",
        "[Rank 3] ncclCommInitRank comm 0x1 ",
        "\r",
    ]
)


@st.composite
def nccl_lines(draw: st.DrawFn) -> str:
    host = "".join(draw(st.lists(_HEAD_TOKENS, max_size=3)))
    pid, tid = draw(NUMS), draw(NUMS)
    mid = "".join(draw(st.lists(_HEAD_TOKENS, max_size=3)))
    tail = "".join(draw(st.lists(st.one_of(_TAILS, ANY_TEXT), max_size=3)))
    return f"{host}:{pid}:{tid} {mid}NCCL {draw(_LEVELS)} {tail}"


@SETTINGS
@given(st.lists(nccl_lines(), min_size=1, max_size=6))
def test_nccl_header_memo_reads_as_every_layer(lines: list[str]) -> None:
    seen = [parse_line(t) for t in lines]  # the memo filled
    again = [parse_line(t) for t in lines]  # and read back
    plain = _without_memo(lines)
    assert seen == plain
    assert again == plain


def _without_memo(lines: list[str]) -> list[LineAttrs]:
    """The lines as the full parser reads them, the NCCL header memo emptied and bypassed."""
    layers._NCCL_HEADERS.clear()
    original = layers._known_nccl_header
    try:
        layers._known_nccl_header = lambda s, d, names: -1  # type: ignore[assignment]
        return [parse_line(t) for t in lines]
    finally:
        layers._known_nccl_header = original


def test_nccl_header_memo_after_a_known_header() -> None:
    """A header already read, then lines of it with `NCCL ` later: a second header right after it
    is read as the full parser reads it (the second writer's), `NCCL version` as a message."""
    head = "node7:4411:4412 [3] NCCL INFO "
    lines = [
        head + "Bootstrap : Using eth0",
        head + "NCCL version 2.21.5+cuda12.4",
        head + "node8:5511:5512 [1] NCCL WARN cut in",
        head + "Connected all rings NCCL INFO",
    ]
    layers._NCCL_HEADERS.clear()
    seen = [parse_line(t) for t in lines]
    assert seen == _without_memo(lines)
    assert seen[1].message == "NCCL version 2.21.5+cuda12.4"
    assert (seen[2].host, seen[2].message) == ("node8", "cut in")


def test_nccl_header_memo_keeps_no_long_text() -> None:
    """A line whose `` NCCL INFO `` comes late is read as usual: the memo holds short keys only."""
    for n in range(3):
        line = "a" * (600 + n) + f":1:2 [0] NCCL INFO message {n}"
        assert parse_line(line).message == parse_line(line).message
    assert all(len(head) <= layers.NCCL_HEADER_CHARS for head in layers._NCCL_HEADERS)
