"""Which rank a Flight Recorder dump belongs to when its file name does not say, or says
something its content or the logs contradict; the report of dumps the logs wrote but nobody gave;
``nccllog lines`` reading dumps, error files and ncclras output like ``analyze``."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from test_flight import WROTE, _payloads, console, dump, entry, late_rank_dumps, write_dumps

from nccllog.cli import main
from nccllog.correlate import flight as fr
from nccllog.ingest import flight
from nccllog.pipeline import analyze


def tp_dp_dumps(world: int = 4) -> dict[int, dict[str, Any]]:
    """2x2 tensor x data parallel: every rank in the default group, a TP group and a DP group; the
    late rank 3 never called #10 of the default group."""
    out = late_rank_dumps(late=3, world=world)
    for r, d in out.items():
        tp, dp = [r - r % 2, r - r % 2 + 1], [r % 2, r % 2 + 2]
        d["pg_config"]["1"] = {"name": "1", "desc": "tp", "ranks": str(tp)}
        d["pg_config"]["2"] = {"name": "2", "desc": "dp", "ranks": str(dp)}
    return out


def parsed(d: dict[str, Any], name: str) -> flight.Dump:
    return flight.parse(pickle.dumps(d, protocol=2), name)


def test_rank_from_the_process_groups_when_the_name_has_none(tmp_path: Path) -> None:
    dumps = tp_dp_dumps()
    (tmp_path / "dumps").mkdir()
    for r, d in dumps.items():
        (tmp_path / "dumps" / f"trace_{chr(97 + r)}").write_bytes(pickle.dumps(d, protocol=2))
    assert parsed(dumps[2], "trace_c").allowed_ranks() == {2}
    (tmp_path / "console.log").write_text(console([0, 1, 2]))
    inc = analyze([tmp_path])
    v = inc.verdict
    assert (v.category, v.culprit_ranks, v.confidence) == ("straggler_hang", (3,), "high")
    assert not [n for n in inc.coverage.notes if "Flight Recorder dump" in n and "rank" in n]


def test_default_group_only_leaves_the_rank_open() -> None:
    got = fr.assign_ranks([parsed(late_rank_dumps()[1], "trace_b")], analyze(console([0])).events)
    assert got[0].rank is None and got[0].allowed_ranks() == {0, 1, 2, 3}


def test_name_contradicted_by_the_process_groups_is_not_used() -> None:
    """A file renamed by hand: its name says rank 0, its groups say it can only be rank 2."""
    (got,) = fr.assign_ranks([parsed(tp_dp_dumps()[2], "fr/nccl_trace_rank_0")], analyze(console([0])).events)
    assert got.rank == 2
    (note,) = got.notes
    assert "rank conflict" in note and "its file name says rank 0" in note and "using rank 2" in note


def test_log_line_and_name_disagree(tmp_path: Path) -> None:
    log = console([0, 1, 2]) + WROTE.format(r=1, name="nccl_trace_rank_2")
    (tmp_path / "console.log").write_text(log)
    d = parsed(late_rank_dumps()[2], "dumps/nccl_trace_rank_2")
    (got,) = fr.assign_ranks([d], analyze([tmp_path / "console.log"]).events)
    assert got.rank == 2  # the writer's own name first
    (note,) = got.notes
    assert "its file name says rank 2" in note and "the log line that says it wrote the file" in note
    assert "says rank 1" in note


def test_two_dumps_of_one_rank_are_reported(tmp_path: Path) -> None:
    dumps = late_rank_dumps()
    write_dumps(tmp_path / "a", dumps)
    write_dumps(tmp_path / "b", {0: dumps[0]})
    (tmp_path / "console.log").write_text(console([0, 1, 2]))
    inc = analyze([tmp_path])
    (note,) = [n for n in inc.coverage.notes if "again" in n]
    assert "b/nccl_trace_rank_0" in note and "a/nccl_trace_rank_0" in note
    assert inc.verdict.culprit_ranks == (3,)


def test_dumps_written_but_not_given_per_host(tmp_path: Path) -> None:
    """Two hosts, each rank's log saying where it wrote its dump: the paths listed per host, and a
    command that collects them."""
    lines = []
    for r in range(4):
        host = f"node-{'ab'[r // 2]}"
        lines.append(f"{host}: " + console([r]).splitlines()[0] + "\n")
        lines.append(f"{host}: " + WROTE.format(r=r, name=f"nccl_trace_rank_{r}"))
    (tmp_path / "console.log").write_text("".join(lines))
    notes = analyze([tmp_path / "console.log"]).coverage.notes
    (note,) = [n for n in notes if "were written but not given" in n]
    assert "node-a: /scratch/fr/nccl_trace_rank_0, /scratch/fr/nccl_trace_rank_1" in note
    assert "node-b: /scratch/fr/nccl_trace_rank_2, /scratch/fr/nccl_trace_rank_3" in note
    assert 'scp "$h:/scratch/fr/*" dumps/' in note and "nccllog analyze <logs> dumps/" in note
    # Given, they are no longer reported.
    write_dumps(tmp_path / "dumps", late_rank_dumps())
    notes = analyze([tmp_path / "console.log", tmp_path / "dumps"]).coverage.notes
    assert not [n for n in notes if "were written but not given" in n]


def test_lines_reads_dumps_error_files_and_ras_output(tmp_path: Path) -> None:
    write_dumps(tmp_path / "dumps", late_rank_dumps())
    (tmp_path / "evil").write_bytes(_payloads(tmp_path / "canary")["global_p2"])
    folder = tmp_path / "run" / "attempt_0" / "1"
    folder.mkdir(parents=True)
    error = {
        "message": {"message": "RuntimeError: boom", "extraInfo": {"py_callstack": "", "timestamp": "0"}}
    }
    (folder / "error.json").write_text(json.dumps(error))
    res = CliRunner().invoke(main, ["lines", str(tmp_path), "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in res.stdout.splitlines()]
    patterns = {r["pattern"] for r in rows}
    assert {"flight.pg_status", "flight.entry", "flight.divergence"} <= patterns
    assert not any("\\x80" in r["text"] or "\x80" in r["text"] for r in rows)  # no dump read as text
    (err,) = [r for r in rows if r["source"].endswith("error.json")]
    assert err["text"] == "1970-01-01T00:00:00Z torchelastic error file (attempt 0): RuntimeError: boom"
    assert [r["rank"] for r in rows if r["pattern"] == "flight.divergence"] == [3]
    assert "not a Flight Recorder dump (pickle opcode GLOBAL is not plain data)" in res.stderr
    assert not (tmp_path / "canary").exists()


def test_older_schema_dump_without_thread_keys(tmp_path: Path) -> None:
    """Schema 2.4 (torch 2.5-2.6) has no thread keys and no comm_lib_version: the done-when case."""
    dumps = {
        r: dump([entry(i, i + 1, version="2.4") for i in range(9 if r == 3 else 10)], version="2.4")
        for r in range(4)
    }
    for r, d in dumps.items():
        if r != 3:
            d["entries"][-1].update(state="started", retired=False, time_discovered_completed_ns=None)
            d["pg_status"]["0"]["last_completed_collective"] = 9
    write_dumps(tmp_path / "dumps", dumps)
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "console.log").write_text(console([0, 1, 2]))
    v = analyze([tmp_path / "logs", tmp_path / "dumps"]).verdict
    assert (v.category, v.culprit_ranks, v.confidence) == ("straggler_hang", (3,), "high")
    assert "/home/ml/proj/train.py:88 in train_step" in v.summary


def test_json_dumps_through_the_pipeline(tmp_path: Path) -> None:
    """Ray's ``rank_<N>.json`` (the JSON form: pg_status numbers as strings, no frames)."""
    (tmp_path / "fr").mkdir()
    for r, d in late_rank_dumps().items():
        for e in d["entries"]:
            del e["frames"]
            e["time_discovered_started_ns"] = e["time_discovered_started_ns"] or 0
            e["time_discovered_completed_ns"] = e["time_discovered_completed_ns"] or 0
        d["pg_status"]["0"] = {k: str(v) for k, v in d["pg_status"]["0"].items()}
        (tmp_path / "fr" / f"rank_{r}.json").write_text(json.dumps(d))
    (tmp_path / "console.log").write_text(console([0, 1, 2]))
    v = analyze([tmp_path]).verdict
    assert (v.category, v.culprit_ranks, v.confidence) == ("straggler_hang", (3,), "high")
    assert "never called nccl:all_reduce #10" in v.summary
