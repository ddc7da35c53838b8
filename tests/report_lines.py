"""Log lines for the report tests, written in the producers' real formats with our own values."""

from __future__ import annotations


def watchdog(rank: int, mmdd: str, clock: str, seq: int, op: str, numel: int, ran_ms: int) -> str:
    """A PyTorch 2.4+ watchdog timeout line of one rank (c10 prefix, 9-digit fraction)."""
    return (
        f"[rank{rank}]:[E{mmdd} {clock} ProcessGroupNCCL.cpp:607] [Rank {rank}] Watchdog caught "
        f"collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={numel}, "
        f"NumelOut={numel}, Timeout(ms)=600000) ran for {ran_ms} milliseconds before timing out."
    )


def mismatch_job(world: int = 10, odd: int = 7) -> str:
    """Every rank times out at #4410; rank ``odd`` ran BROADCAST of 812 elements, the others
    ALLREDUCE of 1,048,576."""
    out = []
    for r in range(world):
        op, n = ("BROADCAST", 812) if r == odd else ("ALLREDUCE", 1048576)
        out.append(watchdog(r, "1014", f"11:47:00.{123456 + r * 1111:06d}789", 4410, op, n, 600010 + r))
    return "\n".join(out) + "\n"


def job_lines(date: str, ws: int, seq: int, silent: int, hour: int = 9) -> list[str]:
    """One run of ``ws`` ranks on ``date``: each rank says it started at ``hour``:00, and 40
    minutes later every rank but ``silent`` times out at collective ``seq``."""
    mmdd = f"{int(date[5:7])}{date[8:10]}"
    lines = [f"{date} {hour:02d}:00:{r % 60:02d},100 - INFO - rank {r}/{ws} started" for r in range(ws)]
    for r in range(ws):
        if r != silent:
            clock = f"{hour:02d}:40:12.{100000 + r:06d}123"
            lines.append(watchdog(r, mmdd, clock, seq, "ALLREDUCE", 4096, 600000 + r))
    return lines


def mixed_jobs() -> str:
    """Three unrelated runs in one paste: world sizes 8, 32 and 10, months apart."""
    lines = job_lines("2025-03-02", 8, 120, 3) + job_lines("2025-07-19", 32, 5224, 17)
    return "\n".join(lines + job_lines("2025-11-05", 10, 77, 4)) + "\n"


def rerun_jobs(first_seq: int, second_seq: int, second_hour: int) -> str:
    """Two runs of the same world size (8) on one day: the first at 09:00 times out at
    ``first_seq`` (rank 3 silent), the second at ``second_hour``:00 at ``second_seq`` (rank 5)."""
    lines = job_lines("2025-03-02", 8, first_seq, 3) + job_lines("2025-03-02", 8, second_seq, 5, second_hour)
    return "\n".join(lines) + "\n"
