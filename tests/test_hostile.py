"""Hostile and broken input, end to end through the CLI: every case exits 0 (analysed, with what was
skipped and why) or 2 (one line on stderr, no traceback), nothing is lost silently, log text is inert
in every format, nothing is executed or fetched, and the output is deterministic.

Large inputs are generated into tmp_path at test time; the slowest cases are marked ``slow``.
"""

from __future__ import annotations

import gzip
import html.parser
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
from clirun import cli
from markdown_it import MarkdownIt

from nccllog.ingest import reader
from nccllog.pipeline import InputError, analyze
from nccllog.render import FORMATS, render

HOSTILE_DIR = Path(__file__).resolve().parent / "hostile"
WATCHDOG = (
    "[rank{rank}]:[E1023 14:02:17.412903117 ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, "
    "Timeout(ms)={timeout}) ran for {elapsed} milliseconds before timing out."
)
# What may never reach a terminal raw: C0 controls except tab/newline, DEL, C1.
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
SGR = re.compile(r"\x1b\[[0-9;]*m")


def watchdog(
    rank: int | str = 1, seq: int | str = 7, timeout: int | str = 600000, elapsed: int = 600128
) -> str:
    return WATCHDOG.format(rank=rank, seq=seq, timeout=timeout, elapsed=elapsed)


GOOD = (watchdog() + "\n").encode()


def report(*inputs: str | Path, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """Analyse through the CLI; assert exit 0 and a clean stderr; return the JSON report."""
    res = cli("analyze", "-f", "json", "-q", *extra, *inputs)
    assert res.exit_code == 0, res.stderr
    assert "Traceback" not in res.stderr
    data: dict[str, Any] = json.loads(res.stdout)
    _check_coverage(data["coverage"])
    return data


def refused(*inputs: str | Path, extra: tuple[str, ...] = ()) -> str:
    """Analyse through the CLI; assert exit 2 with exactly one line on stderr; return that line."""
    res = cli("analyze", "-f", "json", "-q", *extra, *inputs)
    assert res.exit_code == 2, res.stdout
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("nccllog: error: ")
    assert "Traceback" not in res.stderr and res.stdout == ""
    return lines[0]


def _check_coverage(cov: dict[str, Any]) -> None:
    assert cov["lines"] >= cov["matched"] + cov["skipped_lines"] >= 0
    for s in cov["skipped"]:
        assert s["source"] and s["reason"]


def reasons(data: dict[str, Any]) -> dict[str, str]:
    return {Path(s["source"]).name: s["reason"] for s in data["coverage"]["skipped"]}


def subprocess_cli(*args: str | Path, timeout: float = 60, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nccllog", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        **kw,
    )


# ---------------------------------------------------------------------------------------------
# encodings and bytes


def test_binary_file_is_skipped_or_counted(tmp_path: Path) -> None:
    # A core-dump-like fragment: mostly NULs and low control bytes.
    (tmp_path / "core.log").write_bytes(bytes(range(32)) * 4096 + b"\x00" * 65536)
    (tmp_path / "rank1.log").write_bytes(GOOD)
    data = report(tmp_path)
    assert reasons(data)["core.log"] == "binary file (not text)"
    assert data["coverage"]["matched"] == 1


def test_only_a_binary_file_is_nothing_to_analyse(tmp_path: Path) -> None:
    (tmp_path / "core.bin").write_bytes(bytes(range(32)) * 4096)
    line = refused(tmp_path / "core.bin")
    assert "binary file (not text)" in line


def test_nul_bytes_inside_text_lines(tmp_path: Path) -> None:
    (tmp_path / "rank1.log").write_bytes(b"before\x00\x00after\n" + GOOD + b"\x00tail\n")
    data = report(tmp_path)
    assert data["coverage"]["lines"] == 3
    assert data["coverage"]["matched"] == 1


def test_invalid_utf8_is_replaced_and_counted(tmp_path: Path) -> None:
    (tmp_path / "rank1.log").write_bytes(
        b"ok \xc3\x28 \xa0\xa1 \xf0\x28\x8c\x28\n" + GOOD + b"\xed\xa0\x80\n"
    )
    data = report(tmp_path)
    cov = data["coverage"]
    assert cov["lines"] == 3 and cov["matched"] == 1
    assert cov["decode_replacements"] > 0


@pytest.mark.parametrize(
    ("codec", "bom"),
    [("utf-16", True), ("utf-16-le", False), ("utf-16-be", True)],
    ids=["bom-le", "no-bom-le", "bom-be"],
)
def test_utf16(tmp_path: Path, codec: str, bom: bool) -> None:
    text = "first line\r\n" + watchdog() + "\r\n"
    raw = text.encode(codec)
    if codec == "utf-16-be" and bom:
        raw = b"\xfe\xff" + raw
    (tmp_path / "rank1.log").write_bytes(raw)
    data = report(tmp_path)
    assert data["coverage"]["lines"] == 2
    assert data["coverage"]["matched"] == 1
    assert any("decoded as utf-16" in n for n in data["coverage"]["notes"])


@pytest.mark.slow
def test_utf16_larger_than_one_chunk(tmp_path: Path) -> None:
    n = 1_100_000  # about 75 MiB in UTF-16, several reader chunks
    body = "".join(f"filler line NCCL INFO number {i}\n" for i in range(n)) + watchdog() + "\n"
    (tmp_path / "rank1.log").write_bytes(body.encode("utf-16"))
    assert (tmp_path / "rank1.log").stat().st_size > reader.CHUNK_BYTES
    data = report(tmp_path)
    assert data["coverage"]["skipped"] == []
    assert data["coverage"]["lines"] == n + 1
    assert data["coverage"]["matched"] >= 1
    assert data["verdict"]["category"] != "no_failure"


def test_crlf_and_bare_cr(tmp_path: Path) -> None:
    (tmp_path / "crlf.log").write_bytes(b"a\r\n" + watchdog(rank=1).encode() + b"\r\nb\r\n")
    # tqdm redraws: one physical line of CR-separated segments, the last one a real message.
    tqdm = b"\r".join([b"  5%|#   | 1/20", b" 10%|##  | 2/20", watchdog(rank=2).encode()]) + b"\r\n"
    (tmp_path / "cr.log").write_bytes(tqdm)
    (tmp_path / "onlycr.log").write_bytes(b"x\ry\r" + watchdog(rank=3).encode() + b"\r")
    data = report(tmp_path)
    assert data["coverage"]["lines"] == 3 + 1 + 1
    ranks = {f["rank"] for f in data["findings"] if "watchdog" in f["pattern"]}
    assert ranks == {1, 2, 3}
    assert not any(f["text"].endswith("\r") for f in data["findings"])


# ---------------------------------------------------------------------------------------------
# huge lines


def test_10mb_line_is_cut_and_counted(tmp_path: Path) -> None:
    (tmp_path / "rank1.log").write_bytes(b"before\n" + b"x" * 10_000_000 + b" NCCL WARN tail\n" + GOOD)
    data = report(tmp_path)
    cov = data["coverage"]
    assert cov["lines"] == 3 and cov["truncated_lines"] == 1 and cov["matched"] == 1
    assert any("longer than 1 MiB" in n for n in cov["notes"])


@pytest.mark.slow
def test_1gb_line_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "rank1.log"
    block = b"y" * (64 << 20)
    with path.open("wb") as f:
        f.write(b"start\n")
        for _ in range(16):
            f.write(block)
        f.write(b"\n" + GOOD)
    del block
    out = tmp_path / "r.json"
    proc = subprocess.run(
        ["/usr/bin/time", "-f", "%M", sys.executable, "-m", "nccllog", "analyze", "-q", "-o", out, path],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    peak_kib = int(proc.stderr.strip().splitlines()[-1])
    # The file is 1 GiB; reading it must cost a bounded multiple of the chunk size, not the file.
    assert peak_kib < 700 * 1024, f"peak RSS {peak_kib} KiB"
    cov = json.loads(out.read_text())["coverage"]
    assert cov["lines"] == 3 and cov["truncated_lines"] == 1 and cov["matched"] == 1


# ---------------------------------------------------------------------------------------------
# files, directories, links


def test_empty_file(tmp_path: Path) -> None:
    (tmp_path / "empty.log").write_bytes(b"")
    assert refused(tmp_path / "empty.log").startswith(
        "nccllog: error: nothing recognised: read 1 file(s), 0 line(s),"
    )


def test_empty_file_next_to_a_log(tmp_path: Path) -> None:
    (tmp_path / "empty.log").write_bytes(b"")
    (tmp_path / "rank1.log").write_bytes(GOOD)
    data = report(tmp_path)
    assert data["coverage"]["files"] == 2 and data["coverage"]["matched"] == 1


def test_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert refused(tmp_path / "empty").endswith("empty: empty directory)")


def test_directory_of_empty_directories(tmp_path: Path) -> None:
    (tmp_path / "logs" / "a" / "b").mkdir(parents=True)
    line = refused(tmp_path / "logs")
    assert "logs: no files in this directory" in line


def test_missing_path(tmp_path: Path) -> None:
    line = refused(tmp_path / "nope")
    assert line.endswith("nope: no such file or directory)")


def test_missing_path_next_to_a_log(tmp_path: Path) -> None:
    (tmp_path / "rank1.log").write_bytes(GOOD)
    data = report(tmp_path / "rank1.log", tmp_path / "nope", tmp_path / "no*.log")
    assert reasons(data) == {"nope": "no such file or directory", "no*.log": "no file matches this pattern"}


def test_unreadable_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    locked = tmp_path / "locked.log"
    locked.write_bytes(GOOD)
    locked.chmod(0)
    (tmp_path / "rank1.log").write_bytes(GOOD)
    if os.geteuid() == 0:  # root reads anything: deny it as the kernel would for a normal user
        real_open = open

        def deny(file: Any, *a: Any, **k: Any) -> Any:
            if str(file) == str(locked):
                raise PermissionError(13, "Permission denied", str(file))
            return real_open(file, *a, **k)

        monkeypatch.setattr(os, "access", lambda p, mode, **k: str(p) != str(locked))
        monkeypatch.setattr("builtins.open", deny)
    data = report(tmp_path)
    assert reasons(data) == {"locked.log": "permission denied"}
    assert data["coverage"]["files"] == 1


def test_unreadable_file_at_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check passed but opening failed (permissions changed in between)."""
    (tmp_path / "a.log").write_bytes(GOOD)
    (tmp_path / "b.log").write_bytes(watchdog(rank=2).encode() + b"\n")
    real_open = open

    def deny(file: Any, *a: Any, **k: Any) -> Any:
        if str(file).endswith("a.log"):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *a, **k)

    monkeypatch.setattr("builtins.open", deny)
    data = report(tmp_path)
    assert reasons(data) == {"a.log": "cannot open: Permission denied"}


def test_unsearchable_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    closed = tmp_path / "closed"
    closed.mkdir()
    (closed / "rank0.log").write_bytes(GOOD)
    closed.chmod(0)
    (tmp_path / "rank1.log").write_bytes(GOOD)
    if os.geteuid() == 0:
        real_scandir = os.scandir

        def deny(path: Any = ".") -> Any:
            if str(path) == str(closed):
                raise PermissionError(13, "Permission denied", str(path))
            return real_scandir(path)

        monkeypatch.setattr(os, "scandir", deny)
    try:
        data = report(tmp_path)
    finally:
        closed.chmod(0o755)
    assert reasons(data) == {"closed": "permission denied"}


def test_dangling_symlink_and_loops(tmp_path: Path) -> None:
    (tmp_path / "rank1.log").write_bytes(GOOD)
    (tmp_path / "dangling.log").symlink_to(tmp_path / "gone.log")
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "up").symlink_to(tmp_path)  # a directory loop
    data = report(tmp_path)
    r = reasons(data)
    assert r["dangling.log"] == "dangling symbolic link"
    assert r["loop1"] == r["loop2"] == "symbolic link loop"
    assert r["up"].startswith("symbolic link loop")
    assert data["coverage"]["files"] == 1


def test_dangling_symlink_alone(tmp_path: Path) -> None:
    (tmp_path / "dangling.log").symlink_to(tmp_path / "gone.log")
    assert refused(tmp_path / "dangling.log").endswith("dangling.log: dangling symbolic link)")


def test_fifo_is_skipped_not_blocked_on(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.log")  # nobody ever writes: opening it would block forever
    (tmp_path / "rank1.log").write_bytes(GOOD)
    (tmp_path / "zero.log").symlink_to("/dev/zero")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(tmp_path / "agent.sock"))
    proc = subprocess_cli("analyze", "-f", "json", tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    r = reasons(data)
    assert r["pipe.log"] == "named pipe (FIFO) not read"
    assert r["zero.log"] == r["agent.sock"] == "not a regular file (device or socket)"
    sock.close()
    proc = subprocess_cli("analyze", tmp_path / "pipe.log", timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().endswith("pipe.log: named pipe (FIFO) not read)")


def test_device_given_directly() -> None:
    proc = subprocess_cli("analyze", "/dev/zero", timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "nccllog: error: nothing to analyse (/dev/zero: not a regular file (device or socket))"
    )


def test_paths_with_spaces_and_non_ascii(tmp_path: Path) -> None:
    d = tmp_path / "run 7 — überlauf" / "節點 0"
    d.mkdir(parents=True)
    (d / "rank 1 (copy).log").write_bytes(GOOD)
    data = report(tmp_path)
    assert data["coverage"]["matched"] == 1
    assert data["findings"][0]["source"].endswith("節點 0/rank 1 (copy).log")
    for fmt in ("text", "markdown", "html"):
        assert cli("analyze", "-f", fmt, tmp_path).exit_code == 0


def test_non_utf8_file_name(tmp_path: Path) -> None:
    name = os.path.join(os.fsencode(tmp_path), b"rank\xff\xfe 1.log")
    with open(name, "wb") as f:
        f.write(GOOD)
    data = report(tmp_path)
    assert data["coverage"]["matched"] == 1
    assert data["findings"][0]["source"].endswith("rank\\xff\\xfe 1.log")
    for fmt in ("text", "markdown", "html"):
        assert cli("analyze", "-f", fmt, tmp_path).exit_code == 0


def test_very_deep_tree(tmp_path: Path) -> None:
    d = tmp_path
    for _ in range(400):  # far deeper than Python's recursion would allow per level
        d = d / "d"
    d.mkdir(parents=True)
    (d / "rank1.log").write_bytes(GOOD)
    data = report(tmp_path)
    assert data["coverage"]["files"] == 1 and data["coverage"]["matched"] == 1


# ---------------------------------------------------------------------------------------------
# compressed input


def _gz(lines: int) -> bytes:
    body = GOOD + b"".join(b"line %d NCCL INFO ok\n" % i for i in range(lines)) + GOOD
    return gzip.compress(body, mtime=0)


def test_truncated_gz(tmp_path: Path) -> None:
    whole = _gz(20000)
    (tmp_path / "rank1.log.gz").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "rank2.log").write_bytes(watchdog(rank=2).encode() + b"\n")
    data = report(tmp_path)
    r = reasons(data)
    assert r["rank1.log.gz"].startswith("truncated gzip data after ")
    assert r["rank1.log.gz"].endswith("decompressed bytes; the rest is unread")


def test_truncated_gz_keeps_what_was_decompressed(tmp_path: Path) -> None:
    """A log compressed by a killed job: the readable head is analysed, not thrown away."""
    whole = _gz(20000)
    (tmp_path / "rank1.log.gz").write_bytes(whole[: len(whole) // 2])
    data = report(tmp_path)
    assert data["coverage"]["lines"] > 1000
    assert not reasons(data)["rank1.log.gz"].startswith("truncated gzip data after 0 ")


def test_corrupt_gz(tmp_path: Path) -> None:
    raw = bytearray(_gz(2000))
    raw[200:260] = b"\x00" * 60
    (tmp_path / "rank1.log.gz").write_bytes(bytes(raw))
    (tmp_path / "fake.log.gz").write_bytes(watchdog(rank=3).encode() + b"\n")  # text, whatever its name
    (tmp_path / "rank2.log").write_bytes(watchdog(rank=2).encode() + b"\n")
    data = report(tmp_path)
    r = reasons(data)
    assert r["rank1.log.gz"].startswith("corrupt gzip data after ")
    assert "fake.log.gz" not in r
    assert 3 in data["ranks"]["seen"]


def test_only_a_corrupt_gz_is_nothing_to_analyse(tmp_path: Path) -> None:
    raw = bytearray(_gz(2000))
    raw[20:80] = b"\x00" * 60
    (tmp_path / "bad.log.gz").write_bytes(bytes(raw))
    assert "bad.log.gz: corrupt gzip data" in refused(tmp_path / "bad.log.gz")


def test_gzip_bomb_is_limited_and_reported(tmp_path: Path) -> None:
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    line = b"x NCCL INFO filler filler filler\n"
    bomb = comp.compress(GOOD) + comp.compress(line * (200 * 1024 * 1024 // len(line))) + comp.flush()
    (tmp_path / "bomb.log.gz").write_bytes(bomb)  # ~200 MB inflated from well under 1 MB
    data = report(tmp_path, extra=("--max-decompressed", "1000000"))
    assert reasons(data)["bomb.log.gz"] == (
        "decompressed size limit reached (1000000 bytes); the rest is unread"
    )
    assert data["coverage"]["bytes_read"] <= 1_000_000
    assert data["coverage"]["matched"] == 1


# ---------------------------------------------------------------------------------------------
# absurd values


def test_numbers_beyond_64_bits(tmp_path: Path) -> None:
    lines = [
        watchdog(rank=1, seq=10**30),
        watchdog(rank=2, seq=7, timeout=10**40),
        watchdog(rank=99999999999999999999999, seq=7),
        "host-a:1:1 [0] NCCL INFO comm 0x1 rank 100000000000000000000000 nranks 99999999999999999999999 "
        "cudaDev 0 busId 1000 commId 0x1 - Init COMPLETE",
    ]
    (tmp_path / "a.log").write_text("\n".join(lines) + "\n")
    data = report(tmp_path)
    assert any("did not fit in 64 bits" in n for n in data["coverage"]["notes"])
    for f in data["findings"]:
        assert f["rank"] is None or 0 <= f["rank"] < 2**63
        for v in f["fields"].values():
            assert not isinstance(v, int) or -(2**63) <= v < 2**63


def test_negative_and_absurd_values(tmp_path: Path) -> None:
    lines = [
        watchdog(rank=-3, seq=7),
        watchdog(rank=1, seq=-5, timeout=0, elapsed=0),
        watchdog(rank=2, seq=10**30, timeout=0),
        "[rank-1]: RuntimeError: negative rank in a prefix",
        "host-a:1:1 [0] NCCL INFO comm 0x1 rank -1 nranks -8 cudaDev -1 busId 1000 commId 0x1 - Init COMPLETE",
    ]
    (tmp_path / "a.log").write_text("\n".join(lines) + "\n")
    data = report(tmp_path)
    assert data["ranks"]["world_size"] is None or data["ranks"]["world_size"] > 0
    for f in data["findings"]:
        assert f["rank"] is None or f["rank"] >= 0
    for r in data["per_rank"]:
        assert r["rank"] >= 0


def test_desync_report_naming_ranks_outside_the_world(tmp_path: Path) -> None:
    init = "gpu-a{r}:10{r}:20{r} [0] NCCL INFO comm 0x{r} rank {r} nranks 2 cudaDev 0 busId 1000 commId 0x1 - Init COMPLETE"
    lines = [
        init.format(r=0),
        init.format(r=1),
        "\t     [0, 1, 3] finished collective #41, but didn't join collective #42 (count from 1)",
        "\t     [0, 99999999999999999999999, -4] finished collective #41, but didn't join collective #42 (count from 1)",
        "[rank1]:[E0307 09:41:55.120447613 ProcessGroupNCCL.cpp:670] [PG ID 0 PG GUID 0(default_pg) Rank 1] "
        "Timeout at NCCL work: 1, last enqueued NCCL work: 1, last completed NCCL work: -1.",
    ]
    (tmp_path / "a.log").write_text("\n".join(lines) + "\n")
    data = report(tmp_path)
    for h in data["hypotheses"]:
        assert all(0 <= r < 2**63 for r in h["culprit_ranks"])


def test_world_sizes_that_disagree(tmp_path: Path) -> None:
    def init(host: str, rank: int, nranks: int) -> str:
        return (
            f"{host}:1{rank}:1{rank} [0] NCCL INFO comm 0x{rank + 1} rank {rank} nranks {nranks} cudaDev 0 "
            f"busId 1000 commId 0x1 - Init COMPLETE"
        )

    lines = [init("host-a", 0, 4), init("host-b", 1, 8), init("host-c", 2, 2), watchdog(rank=1)]
    (tmp_path / "a.log").write_text("\n".join(lines) + "\n")
    data = report(tmp_path)
    assert data["ranks"]["world_size"] in (None, 2, 4, 8)
    assert 1 in data["ranks"]["seen"]
    assert all(r["rank"] >= 0 for r in data["per_rank"])


# ---------------------------------------------------------------------------------------------
# log text that is markup or code: inert in every format


def _hostile_log() -> bytes:
    return (HOSTILE_DIR / "markup.log").read_bytes()


@pytest.fixture(scope="module")
def hostile_outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("hostile")
    (d / "rank0.log").write_bytes(_hostile_log())
    out = {}
    for fmt in FORMATS:
        res = cli("analyze", "-f", fmt, "--color", "never", "--width", "400", d)
        assert res.exit_code == 0, res.stderr
        out[fmt] = res.stdout
    res = cli("analyze", "-f", "text", "--color", "always", "--width", "400", d)
    assert res.exit_code == 0
    out["color"] = res.stdout
    return out


def test_hostile_log_reaches_the_report(hostile_outputs: dict[str, str]) -> None:
    data = json.loads(hostile_outputs["json"])
    texts = "\n".join(f["text"] for f in data["findings"])
    # The payloads are in the evidence (so the checks below test something) ...
    for needle in ("<script>", '"><img', "{{ 7*191 }}", "{% raw %}", "[bold red]", "```"):
        assert needle in texts, needle


@pytest.mark.parametrize("fmt", ["text", "markdown", "html", "json", "color"])
def test_no_raw_escape_reaches_any_output(hostile_outputs: dict[str, str], fmt: str) -> None:
    out = hostile_outputs[fmt]
    if fmt == "color":
        out = SGR.sub("", out)  # the report's own colours are the only escapes allowed
    assert not RAW_CONTROL.search(out), repr(RAW_CONTROL.search(out))
    assert "evil.example" not in out or "\x1b]8" not in out
    assert "1337" not in out  # {{ 7*191 }} was never evaluated


class _Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))


def test_html_contains_no_markup_from_logs(hostile_outputs: dict[str, str]) -> None:
    page = hostile_outputs["html"]
    parser = _Tags()
    parser.feed(page)
    tags = {t for t, _ in parser.tags}
    # The page draws its own SVG; the logs' <img>, <iframe> and <svg onload=…> must stay text.
    assert "img" not in tags and "iframe" not in tags
    for tag, attrs in parser.tags:
        for name, value in attrs:
            assert not name.startswith("on"), (tag, name)
            if name in ("href", "src", "action", "formaction", "srcset", "style"):
                assert "javascript:" not in (value or "").lower(), (tag, name, value)
                assert "evil.example" not in (value or ""), (tag, name, value)
    # Self-contained: links stay inside the page, nothing is loaded from elsewhere.
    for tag, attrs in parser.tags:
        for name, value in attrs:
            if name in ("href", "src") and value:
                assert value.startswith(("#", "data:")), (tag, name, value)
    # Scripts, if the page has any, are its own: none carries log text.
    for body in re.findall(r"<script[^>]*>(.*?)</script>", page, flags=re.S):
        assert "alert(" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_markdown_cannot_break_out(hostile_outputs: dict[str, str]) -> None:
    md = hostile_outputs["markdown"]
    tokens = MarkdownIt("commonmark").enable("table").parse(md)

    def walk(ts: list[Any]) -> list[Any]:
        out = []
        for t in ts:
            out.append(t)
            out.extend(walk(t.children or []))
        return out

    for t in walk(tokens):
        if t.type in ("html_inline", "html_block"):
            assert "script" not in t.content and "img" not in t.content and "onerror" not in t.content, t
        if t.type in ("link_open", "image"):
            assert "evil.example" not in str(t.attrs), t
    # Every table row has as many cells as its header.
    for block in re.split(r"\n\s*\n", md):
        rows = [r for r in block.splitlines() if r.startswith("|")]
        if rows:
            width = len(re.findall(r"(?<!\\)\|", rows[0]))
            assert all(len(re.findall(r"(?<!\\)\|", r)) == width for r in rows), block


def test_rich_markup_shown_literally(hostile_outputs: dict[str, str]) -> None:
    for fmt in ("text", "color"):
        assert "[bold red]" in SGR.sub("", hostile_outputs[fmt])


# ---------------------------------------------------------------------------------------------
# nothing executed, evaluated, unpickled or fetched


def test_no_network_and_nothing_executed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pickle
    import urllib.request

    def forbidden(*a: Any, **k: Any) -> Any:
        raise AssertionError("analysis tried to reach outside")

    payload = [
        "__import__('os').system('touch PWNED')",
        "RuntimeError: {{ ''.__class__.__mro__[1].__subclasses__() }} $(touch PWNED) `touch PWNED`",
        "!!python/object/apply:os.system ['touch PWNED']",
        "NCCL WARN see http://evil.example/x.png and file:///etc/passwd",
        watchdog(rank=1),
    ]
    pickled = b"cos\nsystem\n(S'touch PWNED'\ntR."  # a pickle that would run a shell command
    (tmp_path / "rank1.log").write_bytes("\n".join(payload).encode() + b"\n" + pickled + b"\n")
    for name in ("socket", "create_connection", "getaddrinfo"):
        monkeypatch.setattr(socket, name, forbidden)
    monkeypatch.setattr(urllib.request, "urlopen", forbidden)
    monkeypatch.setattr(pickle, "loads", forbidden)
    monkeypatch.setattr(pickle, "load", forbidden)
    monkeypatch.setattr(subprocess, "Popen", forbidden)
    monkeypatch.setattr(os, "system", forbidden)
    monkeypatch.chdir(tmp_path)
    incident = analyze(tmp_path)
    for fmt in FORMATS:
        render(incident, fmt)
        render(incident, fmt, redact=True)
    assert not (tmp_path / "PWNED").exists()
    assert incident.coverage.matched >= 1


def test_input_error_is_an_exception_not_an_exit(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file or directory"):
        analyze(tmp_path / "nope")


# ---------------------------------------------------------------------------------------------
# determinism


def _corpus(root: Path, reverse: bool) -> None:
    files = {
        "node0/rank0.log": (HOSTILE_DIR / "markup.log").read_bytes(),
        "node1/rank1.log": GOOD,
        "node1/rank2.log.gz": gzip.compress(watchdog(rank=2).encode() + b"\n", mtime=0),
        "node2/rank3.log": watchdog(rank=3, seq=8).encode() + b"\n",
        "node2/ränk 4.log": "NCCL WARN 0x7f ünïcode\n".encode(),
    }
    for name in sorted(files, reverse=reverse):  # creation order changes the directory order
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(files[name])


_RENDER_ALL = (
    "import sys; from nccllog import analyze, render; inc = analyze('logs'); "
    "sys.stdout.buffer.write(b'\\0'.join(render(inc, f).encode() for f in ('text', 'markdown', 'html', 'json')))"
)


@pytest.mark.slow
def test_deterministic_across_processes_and_listing_order(tmp_path: Path) -> None:
    outs: set[bytes] = set()
    for seed, reverse in [("1", False), ("2", True), ("12345", False)]:
        root = tmp_path / "logs"
        if root.exists():
            shutil.rmtree(root)
        _corpus(root, reverse)
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run(
            [sys.executable, "-c", _RENDER_ALL], capture_output=True, cwd=tmp_path, env=env, timeout=60
        )
        assert proc.returncode == 0, proc.stderr
        outs.add(proc.stdout)
    assert len(outs) == 1


def test_deterministic_whatever_scandir_returns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _corpus(tmp_path, reverse=False)
    monkeypatch.chdir(tmp_path)
    first = {fmt: render(analyze("."), fmt) for fmt in FORMATS}
    real = os.scandir

    class Reversed:
        def __init__(self, path: Any) -> None:
            self.entries = list(reversed(list(real(path))))

        def __iter__(self) -> Any:
            return iter(self.entries)

        def __enter__(self) -> Reversed:
            return self

        def __exit__(self, *a: object) -> None:
            return None

    monkeypatch.setattr(os, "scandir", Reversed)
    second = {fmt: render(analyze("."), fmt) for fmt in FORMATS}
    assert first == second


def test_an_elapsed_time_beyond_the_calendar_does_not_crash(tmp_path: Path) -> None:
    # "ran for N milliseconds" with N of thousands of years: the wait's start is before year 1.
    line = (
        "[rank11]:[E1023 14:02:17.412903117 ProcessGroupNCCL.cpp:1564] [Rank 11] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=88, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) "
        "ran for {ms} milliseconds before timing out.\n"
    )
    for ms in (64100000000094, 10**30):
        (tmp_path / "rank_11.log").write_text(line.format(ms=ms))
        incident = analyze([tmp_path])
        for fmt in FORMATS:
            assert render(incident, fmt)
