"""Flight Recorder dumps: the safe reader, the cross-rank divergence, the join with the text logs,
and the hostile corpus (every payload inert, skipped with a reason, memory bounded).

Dumps are built at test time as ``pickle.dumps(plain dict, protocol=2)`` with the keys torch's
FlightRecorder writes (schema 2.10, and 2.4 without the thread keys), or as the JSON form.
"""

from __future__ import annotations

import json
import pickle
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from nccllog.cli import main
from nccllog.correlate import flight as fr
from nccllog.ingest import flight
from nccllog.ingest.sources import Source
from nccllog.pipeline import analyze

T0 = 1_732_000_000_000_000_000
WATCHDOG = (
    "[rank{r}]:[E1122 10:15:27.724333940 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=4096, NumelOut=4096, Timeout(ms)=600000) "
    "ran for 600105 milliseconds before timing out.\n"
)
STATUS = (
    "[rank{r}]:[E1122 10:15:27.724401113 ProcessGroupNCCL.cpp:2001] [PG ID 0 PG GUID 0(default_pg) Rank {r}]  "
    "failure detected by watchdog at work sequence id: {seq} PG status: last enqueued work: {seq}, "
    "last completed work: {done}\n"
)
WROTE = (
    "[rank{r}]:[I1122 10:15:29.018214555 FlightRecorder.cpp:86] Finished writing Flight Recorder debug info "
    "to /scratch/fr/{name}\n"
)


def entry(
    rid: int,
    seq: int,
    *,
    op: str = "nccl:all_reduce",
    size: int = 4096,
    state: str = "completed",
    line: int = 88,
    func: str = "train_step",
    version: str = "2.10",
) -> dict[str, Any]:
    """One entry with exactly the keys getCollectiveTrace writes."""
    e: dict[str, Any] = {
        "frames": [
            {
                "name": "all_reduce",
                "filename": "/usr/lib/python3/site-packages/torch/distributed/distributed_c10d.py",
                "line": 2801,
            },
            {"name": func, "filename": "/home/ml/proj/train.py", "line": line},
            {"name": "<module>", "filename": "/home/ml/proj/train.py", "line": 140},
        ],
        "record_id": rid,
        "pg_id": 0,
        "process_group": ("0", "default_pg"),
        "collective_seq_id": seq,
        "p2p_seq_id": 0,
        "op_id": seq,
        "profiling_name": op,
        "time_created_ns": T0 + seq * 1_000_000,
        "input_sizes": [[size]],
        "input_dtypes": ["Float"],
        "output_sizes": [[size]],
        "output_dtypes": ["Float"],
        "state": state,
        "time_discovered_started_ns": T0 + seq * 1_000_000 + 10 if state != "scheduled" else None,
        "time_discovered_completed_ns": T0 + seq * 1_000_000 + 20 if state == "completed" else None,
        "retired": state == "completed",
        "timeout_ms": 600000,
        "is_p2p": False,
    }
    if version == "2.10":
        e["thread_id"] = "140211"
        e["thread_name"] = "pt_main_thread"
    return e


def dump(entries: list[dict[str, Any]], world: int = 4, version: str = "2.10") -> dict[str, Any]:
    seqs = [e["collective_seq_id"] for e in entries]
    done = [e["collective_seq_id"] for e in entries if e["state"] == "completed"]
    started = [e["collective_seq_id"] for e in entries if e["state"] != "scheduled"]
    d: dict[str, Any] = {
        "version": version,
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(world)))}},
        "pg_status": {
            "0": {
                "last_enqueued_collective": max(seqs, default=0),
                "last_started_collective": max(started, default=0),
                "last_completed_collective": max(done, default=0),
            }
        },
        "entries": entries,
    }
    if version == "2.10":
        d["comm_lib_version"] = "2.26.2"
    return d


def late_rank_dumps(late: int = 3, world: int = 4) -> dict[int, dict[str, Any]]:
    """Every rank completed #1-#9; all but ``late`` started #10 (the late one never called it)."""
    out = {}
    for r in range(world):
        es = [entry(i, i + 1) for i in range(9)]
        if r != late:
            es.append(entry(9, 10, state="started"))
        out[r] = dump(es, world)
    return out


def write_dumps(folder: Path, dumps: dict[int, dict[str, Any]], prefix: str = "nccl_trace_rank_") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for r, d in dumps.items():
        (folder / f"{prefix}{r}").write_bytes(pickle.dumps(d, protocol=2))


def console(ranks: list[int], seq: int = 10, done: int = 9) -> str:
    return "".join(WATCHDOG.format(r=r, seq=seq) + STATUS.format(r=r, seq=seq, done=done) for r in ranks)


# --------------------------------------------------------------------------- reader


@pytest.mark.parametrize("version", ["2.10", "2.4"])
def test_pickle_dump_read_with_torch_keys(version: str) -> None:
    d = dump([entry(0, 1, version=version), entry(1, 2, state="started", version=version)], version=version)
    got = flight.parse(pickle.dumps(d, protocol=2), "fr/nccl_trace_rank_2")
    assert got.rank == 2 and got.version == version and got.fmt == "pickle"
    assert got.pg_ranks == {"0": (0, 1, 2, 3)}
    assert got.pg_status["0"].last_enqueued == 2 and got.pg_status["0"].last_completed == 1
    e = got.entries[1]
    assert (e.collective_seq_id, e.profiling_name, e.state, e.input_sizes) == (
        2,
        "nccl:all_reduce",
        "started",
        ((4096,),),
    )
    assert e.call_site() == "/home/ml/proj/train.py:88 in train_step"


def test_json_dump_read() -> None:
    """The JSON form: pg_status numbers as strings, 0 for unknown times, no frames, no empty entries key."""
    d = dump([entry(0, 1), entry(1, 2, state="scheduled")])
    for e in d["entries"]:
        del e["frames"]
        e["process_group"] = list(e["process_group"])
        e["time_discovered_started_ns"] = e["time_discovered_started_ns"] or 0
        e["time_discovered_completed_ns"] = e["time_discovered_completed_ns"] or 0
    d["pg_status"]["0"] = {k: str(v) for k, v in d["pg_status"]["0"].items()}
    got = flight.parse(json.dumps(d).encode(), "ray/rank_5.json")
    assert got.rank == 5 and got.fmt == "json"
    assert got.pg_status["0"].last_enqueued == 2
    assert got.entries[1].state == "scheduled" and got.entries[1].frames == ()
    no_entries = {k: v for k, v in d.items() if k != "entries"}
    assert flight.parse(json.dumps(no_entries).encode(), "rank_1.json").entries == ()


def test_numbers_beyond_64_bits_are_dropped_not_fatal(tmp_path: Path) -> None:
    d = dump([entry(0, 1), entry(1, 2**70, state="started")])
    d["entries"][1].update(time_created_ns=T0, time_discovered_started_ns=T0)  # 72 bits at most
    d["entries"][0]["timeout_ms"] = -(2**66)
    d["pg_status"]["0"]["last_enqueued_collective"] = 2**69
    (tmp_path / "nccl_trace_rank_0").write_bytes(pickle.dumps(d, protocol=2))
    got = flight.parse((tmp_path / "nccl_trace_rank_0").read_bytes(), "nccl_trace_rank_0")
    assert [e.collective_seq_id for e in got.entries] == [1] and got.entries[0].timeout_ms is None
    assert got.pg_status["0"].last_enqueued is None
    analyze([tmp_path])  # the events table takes what is left


def test_recognised_by_content_not_name(tmp_path: Path) -> None:
    (tmp_path / "whatever.bin").write_bytes(pickle.dumps(dump([entry(0, 1)]), protocol=2))
    (tmp_path / "nccl_trace_rank_0").write_text("an ordinary log line\n")
    got = flight.try_read(Source(name="whatever.bin", path=tmp_path / "whatever.bin"))
    assert isinstance(got, flight.Dump) and got.rank is None
    assert flight.try_read(Source(name="n", path=tmp_path / "nccl_trace_rank_0")) is None
    other = flight.try_read(Source(name="p", data=pickle.dumps({"a": [1, 2]}, protocol=2)))
    assert isinstance(other, flight.Skipped) and "schema version" in other.reason


# --------------------------------------------------------------------------- divergence


def test_late_rank_named_at_high_confidence_with_call_site(tmp_path: Path) -> None:
    """Every logging rank waited in #10; the dumps show rank 3 never called it."""
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "console.log").write_text(console([0, 1, 2]))
    dumps = late_rank_dumps()
    dumps[3]["entries"][-1]["frames"][1]["line"] = 131  # its last all_reduce came from elsewhere
    write_dumps(tmp_path / "dumps", dumps)
    inc = analyze([tmp_path / "logs", tmp_path / "dumps"])
    v = inc.verdict
    assert (v.category, v.culprit_ranks, v.confidence) == ("straggler_hang", (3,), "high")
    assert "never called nccl:all_reduce #10" in v.summary
    assert "/home/ml/proj/train.py:88 in train_step" in v.summary  # where the others wait
    assert "/home/ml/proj/train.py:131" in v.summary  # where the late rank last called one
    assert inc.events.filter(inc.events["signal"] == "flight_recorder").height > 0


def test_extra_collective_blames_the_rank_that_issued_it() -> None:
    """Rank 2 issued an extra broadcast as #10; fr_trace would list ranks 0, 1, 3 as missing from it."""
    dumps = late_rank_dumps(late=-1)
    extra = [entry(i, i + 1) for i in range(9)]
    extra += [entry(9, 10, op="nccl:broadcast", size=16, state="started", line=57, func="sync_flag")]
    extra += [entry(10, 11, state="scheduled")]
    dumps[2] = dump(extra)
    parsed = [flight.parse(pickle.dumps(d, protocol=2), f"nccl_trace_rank_{r}") for r, d in dumps.items()]
    (div,) = fr.divergences(parsed)
    assert (div.kind, div.culprits, div.seq) == ("mismatch", (2,), 10)
    assert div.culprit_op == "nccl:broadcast" and div.culprit_site == "/home/ml/proj/train.py:57 in sync_flag"


def test_extra_collective_through_the_pipeline(tmp_path: Path) -> None:
    dumps = late_rank_dumps(late=-1)
    dumps[2] = dump(
        [entry(i, i + 1) for i in range(9)]
        + [entry(9, 10, op="nccl:broadcast", size=16, state="started", line=57, func="sync_flag")]
        + [entry(10, 11, state="scheduled")]
    )
    write_dumps(tmp_path / "dumps", dumps)
    (tmp_path / "console.log").write_text(console([0, 1, 3]))
    v = analyze([tmp_path]).verdict
    assert (v.category, v.culprit_ranks, v.confidence) == ("collective_mismatch", (2,), "high")
    assert "nccl:broadcast at /home/ml/proj/train.py:57 in sync_flag" in v.summary


def test_mismatch_verdict_through_the_pipeline(tmp_path: Path) -> None:
    dumps = late_rank_dumps(late=-1)
    dumps[1] = dump([entry(i, i + 1) for i in range(9)] + [entry(9, 10, size=2048, state="started")])
    write_dumps(tmp_path, dumps)
    v = analyze([tmp_path]).verdict
    assert (v.category, v.culprit_ranks, v.confidence) == ("collective_mismatch", (1,), "high")


def test_rank_from_the_logs_finished_writing_line(tmp_path: Path) -> None:
    dumps = late_rank_dumps()
    names = {r: f"trace_{chr(97 + r)}" for r in dumps}
    (tmp_path / "dumps").mkdir()
    for r, d in dumps.items():
        (tmp_path / "dumps" / names[r]).write_bytes(pickle.dumps(d, protocol=2))
    log = console([0, 1, 2]) + "".join(WROTE.format(r=r, name=names[r]) for r in range(4))
    (tmp_path / "console.log").write_text(log)
    v = analyze([tmp_path / "console.log", tmp_path / "dumps"]).verdict
    assert (v.category, v.culprit_ranks) == ("straggler_hang", (3,))


def test_dumps_written_but_not_given(tmp_path: Path) -> None:
    (tmp_path / "console.log").write_text(
        console([0, 1, 2]) + "".join(WROTE.format(r=r, name=f"nccl_trace_rank_{r}") for r in range(3))
    )
    notes = analyze([tmp_path / "console.log"]).coverage.notes
    (note,) = [n for n in notes if "Flight Recorder dumps were written but not given" in n]
    assert "/scratch/fr/nccl_trace_rank_0" in note and "scp" in note and "nccllog analyze" in note


def test_not_started_on_gpu() -> None:
    dumps = late_rank_dumps(late=-1)
    dumps[0] = dump([entry(i, i + 1) for i in range(9)] + [entry(9, 10, state="scheduled")])
    parsed = [flight.parse(pickle.dumps(d, protocol=2), f"nccl_trace_rank_{r}") for r, d in dumps.items()]
    (div,) = fr.divergences(parsed)
    assert (div.kind, div.culprits) == ("not_started", (0,))


def test_all_in_the_collective_names_nobody() -> None:
    parsed = [
        flight.parse(pickle.dumps(d, protocol=2), f"nccl_trace_rank_{r}")
        for r, d in late_rank_dumps(late=-1).items()
    ]
    assert fr.divergences(parsed) == []


# --------------------------------------------------------------------------- hostile corpus


def _payloads(canary: Path) -> dict[str, bytes]:
    cmd = f"touch {canary}"

    class Reduce:
        def __reduce__(self) -> tuple[Any, ...]:
            import os

            return (os.system, (cmd,))

    good = pickle.dumps(dump([entry(i, i + 1) for i in range(20)]), protocol=2)
    deep = b"\x80\x02" + b"]" * 100_000 + b"a" * 99_999 + b"."
    # DAG bomb: each level is a list holding the previous level ten times (memo references).
    bomb = b"\x80\x02]q\x00"
    for i in range(1, 12):
        bomb += b"](" + (b"h" + bytes([i - 1])) * 10 + b"eq" + bytes([i])
    bomb += b"."
    return {
        "global_p0": pickle.dumps(Reduce(), protocol=0),
        "global_p2": pickle.dumps(Reduce(), protocol=2),
        "stack_global": pickle.dumps(Reduce(), protocol=4),
        "reduce": b"\x80\x02])R.",
        "inst": f"(iposix\nsystem\nS'{cmd}'\n.".encode(),
        "obj": b"\x80\x02(]o.",
        "build": b"\x80\x02]}b.",
        "newobj": b"\x80\x02])\x81.",
        "ext": b"\x80\x02\x82\x01.",
        "persid": b"Pfoo\n.",
        "binpersid": b"\x80\x02X\x03\x00\x00\x00fooQ.",
        "length_4gb": b"\x80\x02X\xff\xff\xff\xffabc.",
        "truncated": good[: len(good) // 2],
        "deep": deep,
        "dag_bomb": bomb,
        "json_huge": b'{"version": "2.10", "pg_config": {}, "pg_status": {}, "entries": ['
        + b"9" * 5000
        + b"]}",
        "json_huge_float": b'{"version": "2.10", "pg_config": {}, "pg_status": {}, "entries": [1e999]}',
        "json_nan": b'{"version": "2.10", "pg_config": {}, "pg_status": {}, "entries": [NaN]}',
        "ext4": b"\x80\x02\x84\x01\x00\x00\x00.",
        "json_deep": b'{"version": "2.10", "pg_config": {}, "pg_status": {}, "x": '
        + b"[" * 100_000
        + b"]" * 100_000
        + b"}",
    }


def test_hostile_corpus_is_inert_and_skipped(tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    payloads = _payloads(canary)
    for name, data in payloads.items():
        (corpus / name).write_bytes(data)
    (tmp_path / "good.log").write_text(console([0, 1]))
    args = ["analyze", "-f", "json", str(tmp_path / "good.log"), str(corpus)]
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert not canary.exists()
    skipped = {Path(s["source"]).name: s["reason"] for s in json.loads(res.stdout)["coverage"]["skipped"]}
    assert set(skipped) == set(payloads)
    assert all(r.startswith("not a Flight Recorder dump (") for r in skipped.values()), skipped
    assert "shared references counted" in skipped["dag_bomb"]
    text = CliRunner().invoke(main, ["analyze", str(tmp_path / "good.log"), str(corpus)]).output
    assert "skipped" in text and "not a Flight Recorder dump" in " ".join(text.split())


@pytest.mark.parametrize("name", ["dag_bomb", "deep", "json_deep", "length_4gb"])
def test_hostile_memory_bounded(tmp_path: Path, name: str) -> None:
    data = _payloads(tmp_path / "canary")[name]
    tracemalloc.start()
    with pytest.raises(flight.NotADump):
        flight.parse(data, name)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 64 * 1024 * 1024


def test_hostile_alone_exits_2(tmp_path: Path) -> None:
    (tmp_path / "evil").write_bytes(_payloads(tmp_path / "canary")["global_p2"])
    res = CliRunner().invoke(main, ["analyze", str(tmp_path / "evil")])
    assert res.exit_code == 2
    assert "not a Flight Recorder dump (pickle opcode GLOBAL is not plain data)" in res.stderr


# --------------------------------------------------------------------------- advice


def test_no_advice_to_enable_what_torch_enables_by_default() -> None:
    from nccllog.advice.detect import Detected
    from nccllog.advice.remedy import collect_next_time, fits_versions

    new, old = Detected(torch=(2, 7, 0)), Detected(torch=(2, 4, 1))
    assert not any("DUMP_ON_TIMEOUT=1" in s for s in collect_next_time(new, False))
    assert any("TORCH_NCCL_DEBUG_INFO_TEMP_FILE=" in s for s in collect_next_time(new, False))  # 2.7's name
    assert any("TORCH_FR_DUMP_TEMP_FILE=" in s for s in collect_next_time(Detected(torch=(2, 8, 0)), False))
    assert any("DUMP_ON_TIMEOUT=1" in s for s in collect_next_time(old, False))
    assert any("TRACE_BUFFER_SIZE=2000" in s for s in collect_next_time(new, True))  # this run had it off
    # A rule's step for what 2.7 does by default is dropped by its version gate in remediation.toml.
    step = "TORCH_NCCL_TRACE_BUFFER_SIZE=2000 and TORCH_NCCL_DUMP_ON_TIMEOUT=1: every rank dumps its flight recorder on timeout"
    assert not fits_versions(step, new, False) and fits_versions(step, old, False)


def test_warn_enable_debug_info_exists_from_nccl_2_19_4() -> None:
    from nccllog.advice.variables import table

    var = table().variables["NCCL_WARN_ENABLE_DEBUG_INFO"]
    assert var.since == (2, 19, 4)


def test_the_default_groups_members_give_the_world_size(tmp_path: Path) -> None:
    # two ranks' dumps of an eight-rank job: the default group lists all eight
    write_dumps(
        tmp_path / "dumps", {r: d for r, d in late_rank_dumps(late=7, world=8).items() if r in (0, 1)}
    )
    assert analyze([str(tmp_path / "dumps")]).world_size == 8


def test_the_dumps_nccl_version_joins_the_events(tmp_path: Path) -> None:
    write_dumps(tmp_path / "dumps", late_rank_dumps())  # schema 2.10 names comm_lib_version 2.26.2
    events = analyze([str(tmp_path / "dumps")]).events
    assert set(events["nccl_version"].drop_nulls().to_list()) == {"2.26.2"}
