"""The reader: batched small files and chunked large files give the same lines and numbers;
high-volume progress lines are thinned to the last ones of each file, and counted."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nccllog.ingest import reader
from nccllog.ingest.reader import SAMPLED_KEEP, TAIL_LINES, read_sources
from nccllog.ingest.sources import Source, expand_inputs

KEYWORDS = ["NCCL WARN", "Watchdog caught"]


def _tree(tmp_path: Path) -> Path:
    for i in range(5):
        lines = [f"step {n} loss 1.{n}" for n in range(200)]
        lines[17 + i] = f"host:1:1 [0] misc/socket.cc:50 NCCL WARN socket error {i}"
        lines[150] = "Watchdog caught collective operation timeout\r\n".rstrip("\n")
        (tmp_path / f"rank_{i}.log").write_text("\n".join(lines) + ("\n" if i % 2 else ""))
    (tmp_path / "empty.log").write_text("")
    return tmp_path


def _rows(path: Path) -> list[tuple[str, int, str]]:
    sources, _ = expand_inputs([path])
    read = read_sources(sources, KEYWORDS)
    return sorted(read.lines.select("source", "line", "text").iter_rows())


def test_batched_and_chunked_paths_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = _tree(tmp_path)
    batched = _rows(tree)
    # Tiny blocks force every file through the chunked path.
    monkeypatch.setattr(reader, "CHUNK_BYTES", 512)
    assert _rows(tree) == batched
    per_file = [r for r in batched if r[0].endswith("rank_3.log")]
    assert [r[1] for r in per_file] == [21, 151, *range(201 - TAIL_LINES, 201)]
    assert per_file[0][2].endswith("socket error 3")


def test_line_counts_and_trailing_newline(tmp_path: Path) -> None:
    sources, _ = expand_inputs([_tree(tmp_path)])
    stats = {Path(s.source).name: s.lines for s in read_sources(sources, KEYWORDS).stats}
    assert stats == {"empty.log": 0, **{f"rank_{i}.log": 200 for i in range(5)}}


def test_high_volume_lines_keep_the_last_of_each_file() -> None:
    lines = [f"h:1:1 [0] NCCL INFO AllReduce: opCount {n:x} sendbuff 0x1" for n in range(1000)]
    lines.insert(10, "h:1:1 [0] misc/socket.cc:50 NCCL WARN socket error")
    data = ("\n".join(lines) + "\n").encode()
    read = read_sources([Source(name="r.log", data=data)], KEYWORDS, sampled=[": opCount "])
    kept = read.lines["line"].to_list()
    assert 11 in kept  # the WARN is always kept
    opcount_lines = [n for n in kept if n != 11]
    # The file's last TAIL_LINES lines are always kept; the SAMPLED_KEEP before them are the sample.
    assert opcount_lines == list(range(1002 - SAMPLED_KEEP - TAIL_LINES, 1002))
    assert read.stats[0].sampled_out == 1000 - SAMPLED_KEEP - TAIL_LINES


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
def test_utf16_with_and_without_bom(encoding: str) -> None:
    text = "step 1\nhost:1:1 [0] misc/socket.cc:50 NCCL WARN socket error\n"
    read = read_sources([Source(name="r.log", data=text.encode(encoding))], KEYWORDS)
    assert read.lines.filter(read.lines["text"].str.contains("NCCL WARN"))["line"].to_list() == [2]
    assert read.stats[0].encoding == encoding


def test_a_file_of_nul_bytes_is_a_hole() -> None:
    read = read_sources([Source(name="core.bin", data=b"\x00" * 10000)], KEYWORDS)
    assert [s.reason for s in read.stats[0].skipped] == ["only NUL bytes (10000): a hole, no text"]


def test_only_the_last_progress_bar_redraw_is_matched() -> None:
    from nccllog.match.keywords import prefilter_keywords, sampled_keywords
    from nccllog.match.library import load_library
    from nccllog.match.matcher import match_lines

    lib = load_library()
    bar = "".join(
        f"\rTraining: {p:3d}%|{'#' * (p // 10):<10}| {p}/100 [00:0{p // 25}<00:05, 9.9it/s]"
        for p in range(0, 101, 25)
    )
    data = (
        bar
        + "\rhost:1:1 [0] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer h<1>\n"
    ).encode()
    read = read_sources(
        [Source(name="r.log", data=data)], prefilter_keywords(lib), sampled=sampled_keywords(lib)
    )
    events = match_lines(read.lines, lib).events
    bars = events.filter(events["signal"] == "progress")
    assert bars["step"].to_list() == [100]  # the last redraw only
    assert "nccl.socket_closed_by_peer" in events["pattern"].to_list()  # other segments all stay


@pytest.mark.parametrize(
    ("lead", "column", "value"),
    [("worker1: ", "host", "worker1"), ("3: ", "_srun_task", 3), ("[default2]:", "local_rank", 2)],
)
def test_redraws_after_a_launcher_prefix_keep_its_origin(lead: str, column: str, value: object) -> None:
    # pdsh/srun/torchrun prefix the physical line; tqdm's redraws follow carriage returns.
    from nccllog.match.library import load_library
    from nccllog.match.matcher import match_lines

    lib = load_library()
    bars = "".join(
        f"\rmap: {p:3d}%|{'#' * (p // 10):<10}| {p}/100 [00:{p:02d}<00:05, 9.9it/s]" for p in (0, 50)
    )
    line = (
        lead
        + bars
        + "\r[rank5]:[E ProcessGroupNCCL.cpp:474] [Rank 5] Watchdog caught collective operation timeout: "
    )
    line += "WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800444 milliseconds before timing out.\n"
    read = read_sources([Source(name="c.log", data=line.encode())], list(lib.keywords))
    events = match_lines(read.lines, lib).events
    bar = events.filter(events["signal"] == "progress").to_dicts()
    assert [(r["step"], r["elapsed_s"], r.get(column)) for r in bar] == [(50, 50.0, value)]
    # a segment with a prefix of its own keeps what it says, inside the same launcher stream
    own = events.filter(events["message"].str.contains("Watchdog caught")).to_dicts()
    assert own and own[0]["rank"] == 5 and own[0]["text"].startswith(lead)


def test_high_volume_lines_are_thinned_per_writing_process() -> None:
    # One console interleaving two processes' NCCL opCount lines: each keeps its own last lines.
    lines = [
        f"{i % 2}: node-a:{100 + i % 2}:{100 + i % 2} [0] NCCL INFO AllReduce: opCount {i // 2:x} sendbuff 0x1"
        for i in range(200)
    ]
    lines[-1] = "0: node-a:100:100 [0] NCCL INFO AllReduce: opCount 7f sendbuff 0x1"  # pid 101 stops early
    data = ("\n".join(lines) + "\nend\n").encode()
    read = read_sources([Source(name="console.log", data=data)], KEYWORDS, sampled=[": opCount "])
    kept = read.lines["text"].to_list()
    for pid in ("100", "101"):
        assert sum(f"node-a:{pid}:" in t for t in kept) >= SAMPLED_KEEP


def test_a_long_error_trace_keeps_where_it_started() -> None:
    # NCCL's error trace: the first frame says where the failure began, the last ones where it ended.
    frames = ["graph/xml.cc:850", "graph/topo.cc:696", "init.cc:1012", "init.cc:1548", "group.cc:64"]
    frames += [f"group.cc:{n}" for n in range(400, 410)]
    data = "".join(f"gn-4:311:340 [2] NCCL INFO {f} -> 2\n" for f in frames).encode()
    read = read_sources([Source(name="r.log", data=data)], KEYWORDS, sampled=[".cc:"], keep_first=[".cc:"])
    kept = [t.split(" INFO ")[1].split(" ->")[0] for t in read.lines["text"].to_list()]
    # the writer's first and last SAMPLED_KEEP, and the file's last TAIL_LINES
    assert kept == frames[:SAMPLED_KEEP] + frames[-(SAMPLED_KEEP + TAIL_LINES) :]
    # without ``first``, only the last lines of the writer are kept
    read = read_sources([Source(name="r.log", data=data)], KEYWORDS, sampled=[".cc:"])
    assert not any("graph/xml.cc:850" in t for t in read.lines["text"].to_list())


def test_a_keyword_can_keep_more_last_lines_than_the_default() -> None:
    # One writer's NCCL lines of two high-volume kinds: each kind is thinned on its own count.
    lines = []
    for n in range(300):
        lines.append(f"h:7:7 [0] NCCL INFO AllReduce: opCount {n:x} sendbuff 0x1")
        lines.append(f"h:7:7 [0] NCCL INFO Channel {n % 32:02d}/0 : 0[0] -> 1[1] via P2P/IPC")
    data = ("\n".join(lines) + "\nend\nend\nend\n").encode()
    read = read_sources(
        [Source(name="r.log", data=data)],
        KEYWORDS,
        sampled=[": opCount ", " via P2P/"],
        keep={": opCount ": 20},
    )
    kept = read.lines["text"].to_list()
    assert [t for t in kept if "opCount" in t] == [ln for ln in lines if "opCount" in ln][-20:]
    assert len([t for t in kept if "via P2P" in t]) == SAMPLED_KEEP
    assert read.stats[0].sampled_out == 600 - 20 - SAMPLED_KEEP


# Lines of every kind the accounting distinguishes: matched, progress (thinned), unmatched, blank,
# CR-redrawn, over-long, invalid UTF-8.
_KINDS = [
    "[rank{r}]:[E1023 14:02:17.412903117 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
    "ran for 600128 milliseconds before timing out.",
    "host{r}:1:1 [0] NCCL INFO AllReduce: opCount {r} sendbuff 0x1 recvbuff 0x2 count 1 datatype 7 op 0 "
    "root 0 comm 0x3 [nranks=2] stream 0x4",
    "Map: 50%|#####     | 5/10 [00:01<00:01, 9.9it/s]\rMap: 100%|##########| 10/10 [00:02<00:00, 9.9it/s]",
    "epoch {r} loss 0.{r}",
    "",
    "host{r}:1:1 [0] misc/socket.cc:50 NCCL WARN socket error \xff",
]


@given(
    files=st.lists(
        st.lists(st.tuples(st.integers(0, len(_KINDS) - 1), st.integers(0, 3)), max_size=60),
        min_size=1,
        max_size=4,
    ),
    crlf=st.booleans(),
)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_coverage_adds_up(tmp_path: Path, files: list[list[tuple[int, int]]], crlf: bool) -> None:
    """lines read = matched + unmatched + skipped_lines, and the skipped reasons add up."""
    from nccllog.pipeline import analyze

    end = "\r\n" if crlf else "\n"
    root = Path(tempfile.mkdtemp(dir=tmp_path))
    expected = 0
    for i, lines in enumerate(files):
        body = end.join(_KINDS[k].format(r=r) for k, r in lines)
        (root / f"rank_{i}.log").write_bytes(body.encode("utf-8", "surrogateescape"))
        parts = body.split(end)
        expected += len(parts) - (parts[-1] == "")
    c = analyze(root).coverage
    assert c.lines == c.matched + c.unmatched + c.skipped_lines
    assert c.unmatched >= 0 and c.matched >= 0
    assert c.skipped_lines == sum(n for _, n in c.skipped_line_reasons)
    assert c.lines == expected
