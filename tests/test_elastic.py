"""torchelastic error files: the JSON ``@record`` writes becomes the lines it holds, timed (UTC),
attributed by its attempt folder, and read by the pattern library like any log."""

from __future__ import annotations

import json
from pathlib import Path

from nccllog.ingest import elastic
from nccllog.ingest.sources import Source
from nccllog.pipeline import analyze

MESSAGE = (
    "DistBackendError: [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=10, "
    "OpType=ALLREDUCE, NumelIn=4096, NumelOut=4096, Timeout(ms)=600000) ran for 600105 milliseconds before "
    "timing out.\nException raised from checkTimeout at /opt/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:632"
)
STACK = (
    "Traceback (most recent call last):\n"
    '  File "/home/ml/proj/train.py", line 88, in train_step\n'
    "    dist.all_reduce(t)\n"
    "torch.distributed.DistBackendError: [Rank 3] Watchdog caught collective operation timeout\n"
)


def error_file(message: object = MESSAGE, timestamp: str = "1764108574", code: int | None = None) -> bytes:
    inner: dict[str, object] = {
        "message": message,
        "extraInfo": {"py_callstack": STACK, "timestamp": timestamp},
    }
    if code is not None:
        inner["errorCode"] = code
    return json.dumps({"message": inner}).encode()


def test_error_file_becomes_its_lines() -> None:
    src = Source(name="x/error.json", data=error_file(code=1))
    assert elastic.looks_like(src.data or b"")
    out = elastic.to_text(src, src.data or b"")
    assert out is not None and out.name == "x/error.json"
    lines = (out.data or b"").decode().splitlines()
    assert lines[0].startswith(
        "2025-11-25T22:09:34Z torchelastic error file (error code 1): DistBackendError: [Rank 3]"
    )
    assert lines[1].startswith("Exception raised from checkTimeout")
    assert lines[2] == "Traceback (most recent call last):"


def test_error_file_in_an_attempt_folder(tmp_path: Path) -> None:
    folder = tmp_path / "run_x" / "attempt_1" / "3"
    folder.mkdir(parents=True)
    (folder / "error.json").write_bytes(error_file())
    ev = analyze([tmp_path]).events
    row = ev.filter(ev["pattern"] == "torch.watchdog_timeout").row(0, named=True)
    assert row["local_rank"] == 3 and row["seq"] == 10
    assert str(row["time"]) == "2025-11-25 22:09:34"
    assert "torchelastic error file (attempt 1): DistBackendError" in row["text"]


def test_not_an_error_file_stays_text() -> None:
    for data in (b'{"message": "plain json log line"}\n', b'{"message": {"extraInfo": 5}}', b"{" * 50_000):
        src = Source(name="a.json", data=data)
        assert elastic.to_text(src, data) is None


def test_message_as_plain_string() -> None:
    data = json.dumps({"message": "RuntimeError: boom", "extraInfo": {"timestamp": "x"}}).encode()
    out = elastic.to_text(Source(name="e.json", data=data), data)
    assert out is not None and (out.data or b"").decode() == "torchelastic error file: RuntimeError: boom\n"


def test_hostile_error_files_stay_text() -> None:
    """Huge numbers, non-finite constants and deep nesting: not converted, never fatal."""
    head = b'{"message": {"message": "RuntimeError: x", "extraInfo": {"py_callstack": "", "timestamp": '
    for tail in (b"9" * 5000 + b"}}}", b"1e999}}}", b"NaN}}}", b"[" * 100_000 + b"]" * 100_000 + b"}}}"):
        data = head + tail
        assert elastic.looks_like(data[:4096])
        out = elastic.to_text(Source(name="error.json", data=data), data)
        assert out is None or b"RuntimeError: x" in (out.data or b"")
