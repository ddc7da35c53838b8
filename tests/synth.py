"""Synthetic Incidents for the renderer, redaction and CLI tests: a straggler hang of any size
(rank ``culprit`` stops at seq ``seq``; every other rank's watchdog times out on it), with hosts,
IPs, user paths, and optional hostile log text in every place a log line can reach a report."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from nccllog.model import (
    EVENT_BASE_COLUMNS,
    Advice,
    CollectiveRow,
    Coverage,
    Environment,
    Evidence,
    Finding,
    Hypothesis,
    Incident,
    RankInfo,
    SettingFinding,
    Skipped,
    TimelineEntry,
)

HOSTILE = (
    "[bold red]markup[/bold red] :smile: \x1b[31mred\x1b[0m \x1b]0;title\x07 \x1b]8;;http://evil.example/\x1b\\link"
    '\x1b]8;;\x1b\\ <script>alert(1)</script> "><img src=x onerror=alert(2)> {{ 7*7 }} {% if 1 %}x{% endif %}'
    " ``` ```` | pipe | *star* _under_ # h1 \u202egnp.exe\u202c \x08\x7f\x9b31m"
)
T0 = datetime(2025, 10, 23, 14, 2, 0)


def host_of(rank: int, per_host: int) -> str:
    return f"node-a{rank // per_host:02d}.cluster.local"


def ip_of(rank: int, per_host: int) -> str:
    return f"10.12.{rank // per_host // 200}.{rank // per_host % 200 + 10}"


def straggler(
    world: int = 8,
    culprit: int = 3,
    per_host: int = 8,
    seq: int = 4812,
    hostile: bool = False,
    user: str = "alice",
) -> Incident:
    """Rank ``culprit`` never enqueued ``seq``; the other ranks' watchdogs fire on it."""
    extra = f" {HOSTILE}" if hostile else ""
    home = f"/home/{user}/runs/llama"
    rows: list[dict[str, Any]] = []
    findings: list[Finding] = []
    timeline: list[TimelineEntry] = []
    ranks: list[RankInfo] = []

    def src(r: int) -> str:
        return f"logs/{host_of(r, per_host)}/rank{r}.log"

    def add(
        r: int, line: int, t: datetime, pattern: str, severity: str, text: str, fields: dict[str, Any]
    ) -> None:
        host = host_of(r, per_host)
        rows.append(
            {
                "source": src(r),
                "line": line,
                "text": text,
                "message": text.split("] ", 1)[-1],
                "pattern": pattern,
                "signal": "collective_timeout" if "timeout" in pattern else "info",
                "category": "straggler_hang" if "timeout" in pattern else None,
                "severity": severity,
                "rank": r,
                "local_rank": r % per_host,
                "pg": "0",
                "pg_rank": r,
                "host": host,
                "pid": 4000 + r,
                "time": t,
                "repeat": 1,
                "attribution": "prefix",
                "seq": fields.get("seq"),
                "op": fields.get("op"),
                "timeout_ms": fields.get("timeout_ms"),
            }
        )
        if severity in ("warning", "error", "critical"):
            findings.append(
                Finding(pattern, src(r), line, r, host, t.isoformat(), fields, severity, text, "x")
            )

    for r in range(world):
        host = host_of(r, per_host)
        ip = ip_of(r, per_host)
        t_init = T0 + timedelta(milliseconds=r)
        init = f"{host}:{4000 + r}:{4100 + r} [{r % per_host}] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:{ip}<0>"
        add(r, 12, t_init, "nccl.net_ib_using", "info", init, {})
        timeline.append(TimelineEntry(t_init.isoformat(), r, host, "nccl.net_ib_using", init, src(r), 12))
        if r == culprit:
            last = f'[rank{r}]: File "{home}/train.py", line 211, in train_step{extra}'
            t_last = T0 + timedelta(seconds=30)
            add(r, 480, t_last, "python.traceback_frame", "info", last, {})
            timeline.append(
                TimelineEntry(t_last.isoformat(), r, host, "python.traceback_frame", last, src(r), 480)
            )
            ranks.append(
                RankInfo(
                    rank=r,
                    host=host,
                    local_rank=r % per_host,
                    pids=(4000 + r,),
                    sources=(src(r),),
                    last_time=t_last.isoformat(),
                    last_enqueued=seq - 1,
                    last_completed=seq - 1,
                    lines=481,
                    status="silent",
                )
            )
            continue
        t_err = T0 + timedelta(seconds=630, milliseconds=3 * r)
        text = (
            f"[rank{r}]:[E1023 14:12:30.412903117 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
            f"operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, "
            f"Timeout(ms)=600000) ran for 600128 milliseconds before timing out.{extra}"
        )
        fields = {"seq": seq, "op": "ALLREDUCE", "timeout_ms": 600000}
        add(r, 900, t_err, "torch.watchdog_timeout", "error", text, fields)
        timeline.append(
            TimelineEntry(t_err.isoformat(), r, host, "torch.watchdog_timeout", text, src(r), 900, "error")
        )
        ranks.append(
            RankInfo(
                rank=r,
                host=host,
                local_rank=r % per_host,
                pids=(4000 + r,),
                sources=(src(r),),
                first_error=findings[-1],
                last_time=t_err.isoformat(),
                last_enqueued=seq,
                last_completed=seq - 1,
                timed_out_seq=seq,
                lines=901,
                status="timed out",
            )
        )
    timeline.sort(key=lambda e: (e.time or "", e.source, e.line))
    events = pl.DataFrame(
        rows, schema={**EVENT_BASE_COLUMNS, "op": pl.String, "seq": pl.Int64, "timeout_ms": pl.Int64}
    )
    culprit_host = host_of(culprit, per_host)
    reporters = tuple(r for r in range(world) if r != culprit)
    evidence = (
        Evidence(
            src(reporters[0]),
            900,
            reporters[0],
            next(x["text"] for x in rows if x["rank"] == reporters[0] and x["line"] == 900),
            host_of(reporters[0], per_host),
            (T0 + timedelta(seconds=630)).isoformat(),
            f"{world - 1} ranks time out on SeqNum {seq}",
        ),
        Evidence(
            src(culprit),
            480,
            culprit,
            f'[rank{culprit}]: File "{home}/train.py", line 211, in train_step{extra}',
            culprit_host,
            (T0 + timedelta(seconds=30)).isoformat(),
            f"rank {culprit} is last heard of 600 s before the timeouts, on {culprit_host}",
        ),
    )
    verdict = Hypothesis(
        category="straggler_hang",
        culprit_ranks=(culprit,),
        culprit_hosts=(culprit_host,),
        confidence="high",
        summary=(
            f"Rank {culprit} on {culprit_host} never enqueued collective {seq} (ALLREDUCE); the other "
            f"{world - 1} ranks waited for it until their 600 s watchdog fired.{extra}"
        ),
        score=0.92,
        evidence=evidence,
        rules_in=(f"{world - 1} of {world} ranks report a timeout on SeqNum {seq}; rank {culprit} does not",),
        rules_out=("no NCCL network error on any rank", f"no OOM or CUDA error on rank {culprit}"),
        remediation=(
            f"Look at what rank {culprit} was doing at 14:02:30 (py-spy dump of its pid 4{culprit:03d}).",
            "Set TORCH_NCCL_ENABLE_MONITORING=1 and collect the flight recorder next time.",
        ),
        collect_next_time=("TORCH_NCCL_TRACE_BUFFER_SIZE=2000", "py-spy dump --pid <pid>"),
    )
    alt = Hypothesis(
        "network_ib",
        (),
        (culprit_host,),
        "low",
        f"An IB link problem on {culprit_host} (no IB error seen).",
        0.1,
    )
    collectives = tuple(
        CollectiveRow(
            pg="0",
            seq=s,
            op="ALLREDUCE",
            reporters=tuple(range(world)) if s < seq else reporters,
            expected=tuple(range(world)),
            silent=() if s < seq else (culprit,),
            timeout_ms=600000 if s == seq else None,
            note=f"rank {culprit} never reached it" if s == seq else "",
        )
        for s in range(seq - 5, seq + 1)
    )
    coverage = Coverage(
        files=world,
        lines=world * 900,
        matched=len(rows),
        unattributed=0,
        skipped=(Skipped(f"{home}/core.4003", "binary file (not text)"),),
        bytes_read=world * 90000,
        notes=(f"{home}/big.log: decoded as utf-16",),
    )
    env = Environment(
        frameworks=("fsdp",),
        launcher="torchrun",
        versions={"nccl": ("2.20.5",), "torch": ("2.4.1",)},
        settings={"NCCL_SOCKET_IFNAME": "eth0", "MASTER_ADDR": ip_of(0, per_host), "NCCL_DEBUG": "INFO"},
        setting_findings=(SettingFinding("NCCL_DEBUG", "INFO", "ok", "verbose logging is on"),),
    )
    advice = (
        Advice("Dump the straggler's Python stack", f"rank {culprit} went silent first", ("py-spy dump",)),
    )
    return Incident(
        verdict=verdict,
        hypotheses=(verdict, alt),
        world_size=world,
        ranks_seen=tuple(range(world)),
        ranks_missing=(),
        ranks=tuple(ranks),
        findings=tuple(findings),
        coverage=coverage,
        events=events,
        collectives=collectives,
        timeline=tuple(timeline),
        host_offsets={host_of(r, per_host): 0.0 for r in range(0, world, per_host)},
        environment=env,
        advice=advice,
        inputs=(f"{home}/logs",),
    )


SECRETS = ("alice", "node-a", "10.12.", "cluster.local")


def write_log_tree(
    root: Path, world: int = 1024, per_host: int = 8, culprit: int = 517, seq: int = 4812
) -> Path:
    """A torchrun ``--tee 3`` log tree of a straggler hang, one console log per host: NCCL init
    lines of every rank, training progress, then every rank but ``culprit`` times out on ``seq``."""
    logs = root / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    for h in range(world // per_host):
        host = f"gpu-{h:03d}"
        lines = ["[default0]:NCCL version 2.21.5+cuda12.4"]
        for lr in range(per_host):
            r = h * per_host + lr
            pid = 40000 + r
            lines.append(
                f"[default{lr}]:{host}:{pid}:{pid} [{lr}] NCCL INFO comm 0x55d2{r:08x} rank {r} nRanks {world} "
                f"nNodes {world // per_host} localRanks {per_host} localRank {lr} MNNVL 0"
            )
            lines.append(
                f"[default{lr}]:{host}:{pid}:{pid + 7} [{lr}] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.{h // 200}.{h % 200}.{lr + 1}<0>"
            )
        for step in range(3):
            lines.append(f"[default0]:step {step}: loss {2.5 - step * 0.1:.3f}")
        for lr in range(per_host):
            r = h * per_host + lr
            if r == culprit:
                continue
            lines.append(
                f"[default{lr}]:[rank{r}]:[E1023 14:12:{30 + lr % 10:02d}.{r:06d}117 ProcessGroupNCCL.cpp:632] "
                f"[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, "
                f"NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600128 milliseconds before timing out."
            )
        (logs / f"{host}.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return logs
