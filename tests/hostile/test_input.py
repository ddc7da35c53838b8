"""The hostile-input corpus of docs/robustness.md ("Input: size, containers, encodings, time"):
each case is generated here at test time and run through the CLI, with its expected exit code,
message and bound (time or memory)."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest
from clirun import cli

WATCHDOG = (
    "[rank{rank}]:[E1023 14:02:17.412903117 ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, "
    "Timeout(ms)=600000) ran for 600128 milliseconds before timing out."
)


def good(rank: int = 1) -> bytes:
    return (WATCHDOG.format(rank=rank) + "\n").encode()


def report(*inputs: str | Path, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    res = cli("analyze", "-f", "json", "-q", *extra, *inputs)
    assert res.exit_code == 0, res.stderr
    assert "Traceback" not in res.stderr
    data: dict[str, Any] = json.loads(res.stdout)
    return data


def refused(*inputs: str | Path, extra: tuple[str, ...] = (), stdin: bytes | None = None) -> str:
    res = cli("analyze", "-f", "json", "-q", *extra, *inputs, stdin=stdin)
    assert res.exit_code == 2, res.stdout
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nccllog: error: "), res.stderr
    return lines[0]


def reasons(data: dict[str, Any]) -> dict[str, str]:
    return {Path(s["source"]).name: s["reason"] for s in data["coverage"]["skipped"]}


def seen(data: dict[str, Any]) -> list[int]:
    return list(data["ranks"]["seen"])


def run_module(cmd: str, timeout: float) -> tuple[subprocess.CompletedProcess[bytes], float, int]:
    """A shell pipeline into ``python -m nccllog``: (result, CPU seconds, peak RSS in MB) of that
    pipeline alone (``os.wait4`` on its shell, which waits for its processes), so neither a busy
    machine nor an earlier test's child counts. ``timeout`` (wall clock) only stops a hang."""
    args = ["sh", "-c", cmd.replace("NCCLLOG", f"{sys.executable} -m nccllog")]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(args, stdout=out, stderr=err, env=env, start_new_session=True)
        deadline = time.monotonic() + timeout
        while not (done := os.wait4(proc.pid, os.WNOHANG))[0]:
            if time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                raise subprocess.TimeoutExpired(args, timeout)
            time.sleep(0.05)
        proc.returncode = os.waitstatus_to_exitcode(done[1])  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        res = subprocess.CompletedProcess(args, proc.returncode, out.read(), err.read())
    usage = done[2]
    return res, usage.ru_utime + usage.ru_stime, usage.ru_maxrss // 1024


# --- A. size: numbers, standard input, decompression budgets ---------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "host1:{n}:{n} [0] NCCL INFO comm 0x1 rank 0 nranks 2 - Init COMPLETE",  # pid, tid
        "[rank{n}]:[E1023 14:02:17.412903117 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught",
        "{n}: RuntimeError: CUDA error: an illegal memory access was encountered",  # srun label
    ],
)
def test_huge_digit_runs_in_prefix_fields(tmp_path: Path, line: str) -> None:
    # Python's int() refuses more than 4,300 digits; these runs are 5,000 and 100,000 long.
    body = "".join(line.format(n="9" * n) + "\n" for n in (5000, 100_000))
    (tmp_path / "a.log").write_text(body + good().decode())
    start = time.monotonic()
    data = report(tmp_path)
    assert time.monotonic() - start < 30
    assert 1 in seen(data)  # analysed; the oversized field is simply empty


@pytest.mark.slow
def test_endless_stdin_stops_at_the_limit() -> None:
    """`yes | nccllog analyze -`: read in chunks up to --max-decompressed, memory bounded."""
    line = WATCHDOG.format(rank=1)
    res, cpu, peak = run_module(
        f"(echo '{line}'; yes) | NCCLLOG analyze - -f json -q --max-decompressed 200000000", 600
    )
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert reasons(data)["<stdin>"] == "standard input limit reached (200000000 bytes); the rest is unread"
    assert data["coverage"]["lines"] == 1 + (200_000_000 - len(line) - 1) // 2
    # CPU seconds of the pipeline (every thread of nccllog, and `yes`): the work, not the wait
    assert cpu < 90 and peak < 2000, (cpu, peak)


def _bomb(megabytes: int) -> bytes:
    comp = gzip.compress(good() + b"x NCCL INFO filler\n" * (megabytes * 1024 * 1024 // 19), 9, mtime=0)
    return comp


def test_total_decompression_budget_over_files(tmp_path: Path) -> None:
    for i in range(4):
        (tmp_path / f"rank{i}.log.gz").write_bytes(_bomb(20))  # 20 MiB each, under 1 MiB compressed
    start = time.monotonic()
    data = report(tmp_path, extra=("--max-total-decompressed", "30000000"))
    assert time.monotonic() - start < 60
    r = reasons(data)
    limit = "total decompressed size limit reached (30000000 bytes over all inputs); the rest is unread"
    assert r["rank1.log.gz"] == limit
    assert r["rank2.log.gz"] == r["rank3.log.gz"] == limit
    assert data["coverage"]["bytes_read"] <= 30_000_000
    assert seen(data) == [1]


def test_gzip_bomb_stops_in_seconds_at_default_limits(tmp_path: Path) -> None:
    """No budget given: the expansion ratio (over 250:1 past 64 MiB) stops a bomb early."""
    (tmp_path / "bomb.log").write_bytes(_bomb(300))  # 300 MiB from about 300 KB
    start = time.monotonic()
    data = report(tmp_path)
    assert time.monotonic() - start < 30
    assert reasons(data)["bomb.log"].startswith("expands more than 250:1 (a compression bomb?) after ")
    assert data["coverage"]["bytes_read"] < 80 * 1024 * 1024
    assert seen(data) == [1]


def test_per_file_budget_applies_to_archive_members(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("logs/rank_2.log", good(2) + b"x NCCL INFO filler\n" * 1_000_000)
    (tmp_path / "logs.zip").write_bytes(buf.getvalue())
    data = report(tmp_path / "logs.zip", extra=("--max-decompressed", "1000000"))
    assert (
        reasons(data)["rank_2.log"] == "decompressed size limit reached (1000000 bytes); the rest is unread"
    )
    assert seen(data) == [2]


# --- B. content, not names -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "pack"),
    [
        ("rank1.log.bz2", bz2.compress),
        ("rank1.log.xz", lzma.compress),
        ("rank1.log", lambda b: gzip.compress(b, mtime=0)),  # gzip without the suffix
        ("rank1.txt", lambda b: lzma.compress(bz2.compress(b))),  # two layers
    ],
)
def test_compressed_whatever_the_name(tmp_path: Path, name: str, pack: Any) -> None:
    (tmp_path / name).write_bytes(pack(good()))
    data = report(tmp_path / name)
    assert seen(data) == [1]
    assert data["coverage"]["skipped"] == []


def test_zstd_is_skipped_with_a_reason(tmp_path: Path) -> None:
    (tmp_path / "rank2.log.zst").write_bytes(b"\x28\xb5\x2f\xfd" + os.urandom(200))
    (tmp_path / "rank1.log").write_bytes(good())
    assert reasons(report(tmp_path))["rank2.log.zst"].startswith("zstd-compressed data")
    assert refused(tmp_path / "rank2.log.zst").startswith("nccllog: error: nothing to analyse (")


def _tar(members: dict[str, bytes], mode: str = "w:gz") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.mark.parametrize("name", ["logs.tar.gz", "logs.tgz", "logs.tar", "logs.bin"])
def test_tar_of_a_log_folder_keeps_member_names(tmp_path: Path, name: str) -> None:
    mode = "w" if name == "logs.tar" else "w:gz"
    (tmp_path / name).write_bytes(_tar({"job/rank_3.log": good(3)[7:], "job/rank_5.log": b"step 1\n"}, mode))
    data = report(tmp_path / name)
    assert 3 in seen(data)  # "[rank3]:" stripped from the line: the member's name gives the rank
    assert data["coverage"]["files"] == 2


def test_zip_of_logs_is_read(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("rank_0.log", good(0))
        zf.writestr("sub/rank_4.log.gz", gzip.compress(good(4), mtime=0))
    (tmp_path / "logs.log").write_bytes(buf.getvalue())  # a zip named .log
    assert seen(report(tmp_path / "logs.log")) == [0, 4]


def test_archive_path_tricks_and_links(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name in ("../../etc/rank_1.log", "/abs/rank_2.log"):
            info = tarfile.TarInfo(name)
            info.size = len(good())
            tar.addfile(info, io.BytesIO(good()))
        link = tarfile.TarInfo("evil.log")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
        inner = tarfile.TarInfo("nested.tar")
        nested = _tar({"rank_9.log": good(9)}, "w")
        inner.size = len(nested)
        tar.addfile(inner, io.BytesIO(nested))
    (tmp_path / "a.tar").write_bytes(buf.getvalue())
    before = set(Path(tmp_path).rglob("*"))
    data = report(tmp_path / "a.tar")
    assert set(Path(tmp_path).rglob("*")) == before  # nothing extracted anywhere
    sources = {s["source"] for s in data["coverage"]["skipped"]}
    assert any(s.endswith("a.tar/evil.log") for s in sources)
    assert reasons(data)["nested.tar"].startswith("tar archive inside an archive")
    assert {s.split("a.tar/")[-1] for s in data["per_rank"][0]["sources"]} <= {
        "etc/rank_1.log",
        "abs/rank_2.log",
    }


def test_tar_header_bomb_is_refused(tmp_path: Path) -> None:
    # A pax header claiming 100 MB: tarfile would read it whole into memory.
    hdr = tarfile.TarInfo("././@PaxHeader")
    hdr.type, hdr.size = tarfile.XHDTYPE, 100 * 1024 * 1024
    raw = hdr.tobuf(format=tarfile.USTAR_FORMAT) + b"0" * 100 * 1024 * 1024
    (tmp_path / "bomb.tar").write_bytes(raw)
    (tmp_path / "rank1.log").write_bytes(good())
    assert reasons(report(tmp_path))["bomb.tar"].startswith("damaged tar archive after 0 member(s)")


def test_leading_nul_hole_is_skipped_and_the_rest_read(tmp_path: Path) -> None:
    (tmp_path / "rank1.log").write_bytes(b"\x00" * (3 * 1024 * 1024) + good())
    data = report(tmp_path)
    assert seen(data) == [1]
    assert reasons(data)["rank1.log"].startswith("leading hole of 3145728 NUL bytes skipped")


@pytest.mark.parametrize("order", ["utf16-then-utf8", "utf8-then-utf16"])
def test_encoding_decided_per_part(tmp_path: Path, order: str) -> None:
    a, b = good(1).decode(), good(2).decode()
    if order == "utf16-then-utf8":
        body = ("step 1\n" + a).encode("utf-16") + b.encode()
    else:
        body = a.encode() + ("step 1\n" + b).encode("utf-16-le")
    (tmp_path / "mixed.log").write_bytes(body)
    data = report(tmp_path)
    assert seen(data) == [1, 2]
    assert any("and utf-8" in n for n in data["coverage"]["notes"])


# --- C. nothing recognised, unreadable inputs -----------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"",  # an empty paste
        b"Dear team,\nthe job died again.\n",  # not a log
        "".join(
            f"Map: {p:3d}%|{'#' * (p // 10):<10}| {p}/100 [00:0{p // 25}<00:05, 9.9it/s]\n"
            for p in range(0, 101, 5)
        ).encode(),
    ],
    ids=["empty", "prose", "tqdm"],
)
def test_nothing_recognised_is_no_all_clear(body: bytes) -> None:
    res = cli("paste", "-q", "-f", "json", stdin=body)
    if not body:  # not a single line: nothing to analyse
        assert res.exit_code == 2 and res.stdout == ""
        assert res.stderr.startswith("nccllog: error: nothing recognised: read 1 file(s), 0 line(s)")
        assert res.stderr.count("\n") == 1
        return
    # Some text that nccllog does not know: a report whose verdict is unknown, and a warning.
    assert res.exit_code == 0
    assert res.stderr.startswith("nccllog: warning: nothing recognised: read 1 file(s)")
    assert res.stderr.count("\n") == 1
    assert json.loads(res.stdout)["verdict"]["category"] == "unknown"


def test_mistyped_input_next_to_a_good_one_warns(tmp_path: Path) -> None:
    (tmp_path / "rank1.log").write_bytes(good())
    res = cli("analyze", "-q", "-f", "json", tmp_path / "rank1.log", tmp_path / "rnak2.log")
    assert res.exit_code == 0
    assert res.stderr == f"nccllog: warning: {tmp_path / 'rnak2.log'}: no such file or directory\n"
    res = cli("analyze", "-q", "--strict", tmp_path / "rank1.log", tmp_path / "rnak2.log")
    assert res.exit_code == 2
    assert res.stderr.splitlines()[-1].startswith("nccllog: error: 1 input(s) could not be read (--strict)")


# --- D/E. accounting and time -----------------------------------------------------------------


def test_cut_text_is_marked(tmp_path: Path) -> None:
    line = good()[:-1] + b" " + b"z" * 10_000
    (tmp_path / "rank1.log").write_bytes(line + b"\n")
    data = report(tmp_path)
    texts = [f["text"] for f in data["findings"]]
    assert texts and all(len(t) <= 4000 for t in texts)
    kept = texts[0].index("…[cut ")
    assert texts[0].endswith(f"…[cut {len(line) - kept} chars]"), texts[0][-40:]


def _iso(stamp: str, text: str) -> str:
    return f"{stamp} {text}\n"


def test_iso_offsets_across_a_dst_change(tmp_path: Path) -> None:
    """The CUDA error (02:50 summer time) comes before the timeouts (02:00 winter time, 10 minutes
    later): read as printed, the order flips and the verdict is a straggler."""
    init = "[rank{r}]: NCCL INFO comm 0x1 rank {r} nranks 4 - Init COMPLETE"
    cuda = "[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered"
    wd = WATCHDOG.replace("[E1023 14:02:17.412903117 ", "[E ")
    for r in range(4):
        body = _iso("2025-10-26T01:40:00.000000+02:00", init.format(r=r))
        if r == 1:
            body += _iso("2025-10-26T02:50:00.000000+02:00", cuda)
        else:
            body += _iso("2025-10-26T02:00:30.000000+01:00", wd.format(rank=r))
        (tmp_path / f"rank{r}.log").write_text(body)
    data = report(tmp_path)
    assert data["verdict"]["category"] == "cuda_error" and data["verdict"]["culprit_ranks"] == [1]
    assert data["timeline"][0]["time"] == "2025-10-26T00:50:00"  # UTC


def test_unalignable_host_is_named(tmp_path: Path) -> None:
    """Two hosts with timed lines and no sync point in common (no init, no timeout on both)."""
    line = "{h}:100:100 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.{n}<0>"
    (tmp_path / "a.log").write_text(
        _iso("2025-10-23T14:00:00", line.format(h="nodea", n=1)) + good(0).decode()
    )
    (tmp_path / "b.log").write_text(_iso("2025-10-23T14:00:05", line.format(h="nodeb", n=2)))
    data = report(tmp_path)
    assert data["coverage"]["unaligned_hosts"] == ["nodea", "nodeb"]
    assert data["host_offsets"] == {"nodea": None, "nodeb": None}
    assert any("could not be aligned" in n for n in data["coverage"]["notes"])
