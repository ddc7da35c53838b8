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


def mixed_jobs() -> str:
    """Three unrelated runs in one paste: world sizes 8, 32 and 10, months apart."""

    def job(date: str, ws: int, seq: int, silent: int) -> list[str]:
        mmdd = f"{int(date[5:7])}{date[8:10]}"
        lines = [f"{date} 09:00:{r % 60:02d},100 - INFO - rank {r}/{ws} started" for r in range(ws)]
        for r in range(ws):
            if r != silent:
                lines.append(
                    watchdog(r, mmdd, f"09:40:12.{100000 + r:06d}123", seq, "ALLREDUCE", 4096, 600000 + r)
                )
        return lines

    lines = job("2025-03-02", 8, 120, 3) + job("2025-07-19", 32, 5224, 17) + job("2025-11-05", 10, 77, 4)
    return "\n".join(lines) + "\n"
