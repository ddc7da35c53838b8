"""Two phases: parts written by `nccllog extract` and merged by `analyze` give what one pass gives,
whatever the split of the files; a Parquet file that is not a valid part is skipped with a reason."""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import os
import pickle
import random
import tarfile
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

import nccllog
from nccllog import parts
from nccllog.cli import main
from nccllog.ingest.reader import CANDIDATE_SCHEMA, FileStats
from nccllog.ingest.sources import Source
from nccllog.match.library import load_library
from nccllog.render import render

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
LOG_DIRS = sorted(p / "logs" for p in FIXTURES.iterdir() if (p / "logs").is_dir())
LIB = load_library([])
DIGEST = parts.keyword_digest(LIB)
# What the split must not change: the verdict, the other explanations, the ranks and the collectives.
COMPARED = ("verdict", "hypotheses", "ranks", "collectives")


def _extract(inputs: list[str], **kw: Any) -> parts.Extraction:
    return parts.extract(inputs, library=LIB, **kw)


def _files(root: Path) -> list[str]:
    return sorted(str(p) for p in root.rglob("*") if p.is_file())


def _split(files: list[str], k: int, rng: random.Random) -> list[list[str]]:
    groups: list[list[str]] = [[] for _ in range(k)]
    for f in files:
        groups[rng.randrange(k)].append(f)
    return groups


def _round_trip(ex: parts.Extraction, name: str = "part.parquet") -> parts.Extraction:
    got = parts.read_part(Source(name=name, data=parts.to_bytes(ex)), DIGEST)
    assert isinstance(got, parts.Extraction), got
    return got


def _same_reading(one: parts.Extraction, merged: parts.Extraction) -> None:
    assert_frame_equal(one.read.lines, merged.read.lines)
    assert sorted(one.read.stats, key=lambda s: s.source) == sorted(merged.read.stats, key=lambda s: s.source)
    assert sorted(one.dumps, key=lambda d: d.source) == list(merged.dumps)
    assert set(one.skipped) == set(merged.skipped)


def _analyze(inputs: list[str]) -> nccllog.Incident:
    return nccllog.analyze(inputs, library=LIB)


def _verdicts(incident: nccllog.Incident) -> dict[str, Any]:
    data = json.loads(render(incident, "json"))
    return {k: data[k] for k in COMPARED}


@pytest.mark.parametrize("logs", LOG_DIRS, ids=lambda p: p.parent.name)
def test_any_split_of_a_fixture_reads_the_same(logs: Path) -> None:
    """Every fixture, split at random into parts that go through Parquet: the merged reading equals
    one pass's (lines, per-file statistics, dumps, skips), so the analysis is the same."""
    files = _files(logs)
    rng = random.Random(logs.parent.name)
    one = _extract(files)
    pieces = [_round_trip(_extract(g), f"part-{i}") for i, g in enumerate(_split(files, 3, rng))]
    merged = parts.merge(parts.Extraction(pieces[0].read.__class__(one.read.lines.clear(), ())), pieces)
    _same_reading(one, merged)


@pytest.mark.parametrize(
    "name",
    [
        "ts-hf-fsdp-final-save-rank0-extra-gather",
        "net-rdzv-staggered-node-setup-900s",
        "crash-oom-rank5-cascade",
    ],
)
def test_parts_of_a_fixture_give_the_same_analysis(name: str, tmp_path: Path) -> None:
    files = _files(FIXTURES / name / "logs")
    groups = _split(files, 2, random.Random(name))
    paths = []
    for i, g in enumerate(groups):
        paths.append(tmp_path / f"part-{i}.parquet")
        parts.write_part(_extract(g), paths[-1])
    assert _verdicts(_analyze([str(p) for p in paths])) == _verdicts(_analyze(files))


# --- generated trees: ranks, hosts and years that only the whole data set resolves -------------------


def _watchdog(r: int, seq: int, second: int) -> str:
    return (
        f"[E1023 14:12:{second:02d}.000117 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
        f"operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, "
        f"Timeout(ms)=600000) ran for 600128 milliseconds before timing out."
    )


def _entry(i: int, seq: int, state: str = "completed") -> dict[str, Any]:
    return {
        "record_id": i,
        "pg_id": 0,
        "process_group": ["0", "default_pg"],
        "collective_seq_id": seq,
        "p2p_seq_id": 0,
        "op_id": seq,
        "profiling_name": "nccl:all_reduce",
        "time_created_ns": 1_700_000_000_000_000_000 + seq,
        "input_sizes": [[1024]],
        "input_dtypes": ["Float"],
        "output_sizes": [[1024]],
        "output_dtypes": ["Float"],
        "state": state,
        "retired": state == "completed",
        "timeout_ms": 600000,
        "is_p2p": False,
        "frames": [{"name": "train_step", "filename": "/home/u/train.py", "line": 88}],
    }


def _dump(world: int, seq: int, stops: bool) -> bytes:
    entries = [_entry(i, i + 1) for i in range(seq - 1)]
    if not stops:
        entries.append(_entry(seq - 1, seq, state="started"))
    status = {"last_enqueued_collective": len(entries), "last_started_collective": len(entries)}
    status["last_completed_collective"] = seq - 1
    data = {
        "version": "2.10",
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(world)))}},
        "pg_status": {"0": status},
        "entries": entries,
    }
    return pickle.dumps(data, protocol=2)


def write_tree(root: Path, world: int, per_host: int, culprit: int, dumps: bool) -> list[str]:
    """Per-process NCCL debug files name host and pid (their init lines give the rank); the
    watchdog's year-less lines sit in per-rank console files whose rank only the pid map resolves;
    one host's file is gzipped, two files are in a tar, the year comes from one file's time."""
    seq = 77
    names: list[str] = []
    for r in range(world):
        host, pid = f"gpu-{r // per_host:02d}", 4000 + r
        nccl = [
            f"{host}:{pid}:{pid} [{r % per_host}] NCCL INFO comm 0x7f{r:04x} rank {r} nranks {world} "
            f"cudaDev {r % per_host} busId 1000 commId 0x11 - Init COMPLETE"
        ]
        body = ("\n".join(nccl) + "\n").encode()
        name = root / f"nccl_logs_{host}_{pid}.txt"
        if r == 1:
            name = name.with_suffix(".txt.gz")
            body = gzip.compress(body, mtime=0)
        name.write_bytes(body)
        names.append(str(name))
        console = [f"{host}:{pid}:{pid} [{r % per_host}] NCCL INFO cudaDriverVersion 12040"]
        if r != culprit:
            console.append(
                f"{host}:{pid}:{pid + 3} [{r % per_host}] NCCL INFO " + _watchdog(r, seq, 30 + r % 20)
            )
        (root / f"console-{r:03d}.out").write_text("\n".join(console) + "\n")
        names.append(str(root / f"console-{r:03d}.out"))
        if dumps and r < 4:
            (root / f"nccl_trace_rank_{r}").write_bytes(_dump(world, seq, r == culprit))
            names.append(str(root / f"nccl_trace_rank_{r}"))
    os.utime(names[-1], (1_761_000_000, 1_761_000_000))  # 2025: the year of the year-less lines
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for i in range(2):
            data = f"[rank{i}]:NCCL version 2.21.5+cuda12.4\n".encode()
            info = tarfile.TarInfo(f"extra/rank_{i}.log")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    (root / "extra.tar").write_bytes(buf.getvalue())
    names.append(str(root / "extra.tar"))
    return sorted(names)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    world=st.integers(2, 12),
    per_host=st.integers(1, 4),
    culprit=st.integers(0, 11),
    dumps=st.booleans(),
    k=st.integers(2, 4),
    seed=st.integers(0, 2**16),
)
def test_any_split_of_a_generated_tree_gives_the_same_analysis(
    tmp_path_factory: pytest.TempPathFactory,
    world: int,
    per_host: int,
    culprit: int,
    dumps: bool,
    k: int,
    seed: int,
) -> None:
    root = tmp_path_factory.mktemp("tree")
    files = write_tree(root, world, per_host, culprit % world, dumps)
    one = _extract(files)
    pieces = [_round_trip(_extract(g)) for g in _split(files, k, random.Random(seed))]
    merged = parts.merge(pieces[0], pieces[1:])
    _same_reading(one, merged)
    for i, piece in enumerate(pieces):
        parts.write_part(piece, root / f"part-{i}.parquet")
    got = _analyze([str(root / f"part-{i}.parquet") for i in range(k)])
    assert _verdicts(got) == _verdicts(_analyze(files))


def test_parts_and_plain_logs_mix(tmp_path: Path) -> None:
    files = write_tree(tmp_path, 8, 4, 5, dumps=True)
    parts.write_part(_extract(files[:7]), tmp_path / "a.parquet")
    mixed = _analyze([str(tmp_path / "a.parquet"), *files[7:]])
    assert _verdicts(mixed) == _verdicts(_analyze(files))
    assert mixed.verdict.culprit_ranks == (5,)


# --- sharding, names, duplicates ------------------------------------------------------------------


def test_shards_read_every_file_once(tmp_path: Path) -> None:
    files = write_tree(tmp_path, 6, 2, 0, dumps=False)
    seen: list[str] = []
    for i in range(4):
        ex = _extract([str(tmp_path)], shard=(i, 4))
        seen += [st.source for st in ex.read.stats if not st.source.startswith(str(tmp_path / "extra.tar"))]
    tar_members = 2
    assert sorted(seen) == sorted(f for f in files if not f.endswith(".tar"))
    assert len(seen) == len(files) - 1 and tar_members == 2
    with pytest.raises(nccllog.UsageError):
        _extract(files, shard=(4, 4))


def test_prefix_keeps_same_named_files_apart(tmp_path: Path) -> None:
    for node in ("a", "b"):
        (tmp_path / node).mkdir()
        (tmp_path / node / "rank_0.log").write_text(f"[rank0]:NCCL version 2.21.{ord(node)}+cuda12.4\n")
    os.chdir(tmp_path)
    pa = _extract(["a/rank_0.log"], prefix="node-a")
    assert [st.source for st in pa.read.stats] == ["node-a/a/rank_0.log"]


def test_same_name_twice(tmp_path: Path) -> None:
    (tmp_path / "rank_0.log").write_text("[rank0]:NCCL version 2.21.5+cuda12.4\n")
    first = _round_trip(_extract([str(tmp_path / "rank_0.log")]))
    again = parts.merge(first, [first])  # the same file given twice is read once
    assert again.read.lines.height == first.read.lines.height and not again.skipped
    (tmp_path / "rank_0.log").write_text("[rank0]:NCCL version 2.21.5+cuda12.4\nmore\n")
    other = _round_trip(_extract([str(tmp_path / "rank_0.log")]))
    clash = parts.merge(first, [other])
    assert [s.reason.startswith("another file of this name") for s in clash.skipped] == [True]
    assert clash.read.lines.height == first.read.lines.height


# --- untrusted parts --------------------------------------------------------------------------------


def _good(tmp_path: Path) -> parts.Extraction:
    files = write_tree(tmp_path, 4, 2, 1, dumps=True)
    return _extract(files)


def _refusal(data: bytes) -> str:
    got = parts.read_part(Source(name="p.parquet", data=data), DIGEST)
    assert isinstance(got, nccllog.Skipped)
    assert got.reason.startswith(parts.REJECTED)
    return got.reason.removeprefix(parts.REJECTED)


def _bytes(df: pl.DataFrame) -> bytes:
    buf = io.BytesIO()
    df.write_parquet(buf)
    return buf.getvalue()


def test_round_trip_keeps_everything(tmp_path: Path) -> None:
    ex = _good(tmp_path)
    back = _round_trip(ex)
    _same_reading(ex, back)
    assert back.dumps and back.dumps == tuple(sorted(ex.dumps, key=lambda d: d.source))


def test_the_part_schema_covers_what_the_reader_returns() -> None:
    """A new field in the reader's output must reach the part (or this test says it does not)."""
    fields = {f.name for f in dataclasses.fields(FileStats)}
    assert fields == {"source", "skipped", "mtime", "encoding", *parts._FILE_COUNTS}
    assert all(parts.PART_SCHEMA[c] == t for c, t in CANDIDATE_SCHEMA.items())


def test_foreign_damaged_and_mismatched_parquet_are_skipped(tmp_path: Path) -> None:
    good = parts.to_frame(_good(tmp_path))
    assert "without a 'part.table' column" in _refusal(_bytes(pl.DataFrame({"a": [1]})))
    assert "damaged Parquet file" in _refusal(parts.to_bytes(_good(tmp_path))[:400])
    assert "damaged Parquet file" in _refusal(b"PAR1" + b"\x00" * 64 + b"PAR1")
    newer = good.with_columns(pl.when(pl.col(parts.TABLE) == "meta").then(2).alias("part.version"))
    assert "schema version 2" in _refusal(_bytes(newer))
    assert "column 'line' is" in _refusal(_bytes(good.with_columns(pl.col("line").cast(pl.Int32))))
    assert "column 'kw' is missing" in _refusal(_bytes(good.drop("kw")))
    assert "unexpected column" in _refusal(_bytes(good.with_columns(pl.lit(1).alias("zz"))))
    other = good.with_columns(
        pl.when(pl.col(parts.TABLE) == "meta").then(pl.lit("sha256:0")).alias("part.keywords")
    )
    assert "other prefilter keywords" in _refusal(_bytes(other))
    bad_table = good.with_columns(pl.lit("evil").alias(parts.TABLE))
    assert "holds a value other than" in _refusal(_bytes(bad_table))
    line0 = good.with_columns(
        pl.when(pl.col(parts.TABLE) == "line").then(0).otherwise(pl.col("line")).alias("line")
    )
    assert "line number below 1" in _refusal(_bytes(line0))
    stray = good.with_columns(
        pl.when(pl.col(parts.TABLE) == "line")
        .then(pl.lit("elsewhere.log"))
        .otherwise(pl.col("source"))
        .alias("source")
    )
    assert "lines of a file the part does not list" in _refusal(_bytes(stray))
    evil = good.with_columns(
        pl.when(pl.col(parts.TABLE) == "dump")
        .then(pl.lit('{"version": "9"}'))
        .otherwise(pl.col("dump.json"))
        .alias("dump.json")
    )
    assert "Flight Recorder dump" in _refusal(_bytes(evil))
    neg = good.with_columns(
        pl.when(pl.col(parts.TABLE) == "file").then(-1).otherwise(pl.col("file.lines")).alias("file.lines")
    )
    assert "negative file.lines" in _refusal(_bytes(neg))


def test_cli_extract_then_analyze(tmp_path: Path) -> None:
    files = write_tree(tmp_path / "t" if (tmp_path / "t").mkdir() is None else tmp_path, 8, 4, 5, dumps=False)
    runner = CliRunner()
    for i in range(2):
        res = runner.invoke(
            main, ["extract", *files, "--shard", f"{i}/2", "-o", str(tmp_path / f"part-{i}.parquet")]
        )
        assert res.exit_code == 0, res.output
        assert "nccllog: wrote part" in res.output
    pl.DataFrame({"a": [1]}).write_parquet(tmp_path / "foreign.parquet")
    res = runner.invoke(
        main,
        [
            "analyze",
            str(tmp_path / "part-0.parquet"),
            str(tmp_path / "part-1.parquet"),
            str(tmp_path / "foreign.parquet"),
            "-f",
            "json",
        ],
    )
    assert res.exit_code == 0, res.output
    assert f"nccllog: skipped {tmp_path / 'foreign.parquet'}: not read as an nccllog part" in res.output
    res = runner.invoke(main, ["extract", *files, "--shard", "2/2", "-o", str(tmp_path / "x.parquet")])
    assert res.exit_code == 2 and res.output.startswith("nccllog: error: --shard '2/2'")
    # the size limits read sizes as analyze does
    res = runner.invoke(
        main, ["extract", *files, "--max-decompressed", "512M", "-o", str(tmp_path / "y.parquet")]
    )
    assert res.exit_code == 0, res.output


def test_a_part_inside_an_archive_is_named_not_read(tmp_path: Path) -> None:
    data = parts.to_bytes(_good(tmp_path))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("p.parquet")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    (tmp_path / "parts.tar").write_bytes(buf.getvalue())
    (tmp_path / "rank_0.log").write_text("[rank0]:NCCL version 2.21.5+cuda12.4\n")
    incident = _analyze([str(tmp_path / "parts.tar"), str(tmp_path / "rank_0.log")])
    assert any("inside an archive" in s.reason for s in incident.coverage.skipped)


def test_parts_merge_into_a_part(tmp_path: Path) -> None:
    files = write_tree(tmp_path, 6, 3, 2, dumps=True)
    for i in range(2):
        parts.write_part(_extract(files, shard=(i, 2)), tmp_path / f"p{i}.parquet")
    both = _extract([str(tmp_path / "p0.parquet"), str(tmp_path / "p1.parquet")])
    _same_reading(_extract(files), both)
