"""Time `nccllog analyze` on generated log trees against ripgrep (or grep) in the same run.

For each case it generates the tree once (cached), then runs, with a warm page cache:
- the baseline: `rg -c -F -f KEYWORDS DIR` (grep -rcF where rg is absent), counting the lines that
  contain any keyword of the pattern library;
- `python -m nccllog analyze DIR --format json`,
and prints wall time, the ratio to the baseline, peak RSS, lines/s and whether the verdict named
the planted culprit.

Usage: python bench/run.py [--cases 1024x1MiB,16384x64KiB,...|none] [--json out.json] [--no-probes]

Cases are ``RANKSxSIZE[.gz]`` (one file per rank), ``watchdog:SIZE`` (one rank's watchdog lines
repeated to SIZE bytes in one file, next to its silent peer's log: memory must not follow lines)
and ``onefile:RANKS`` (every rank's lines interleaved in one console file: memory follows ranks).
Each case with a target (``TARGETS``) is checked against it: the ratio to the baseline and the peak
RSS of the nccllog process (GNU time's maximum resident set size, else the children's rusage).

After the cases it times every pattern of the library on adversarial 1 MiB probes (long
whitespace after its keyword, long runs before and after it, its keyword repeated, its example
padded) and prints the worst pattern's time (target: under 0.2 s; see docs/robustness.md).

"Twice the input" is measured two ways: the same job with logs twice as long (1024x2MiB: memory
must stay flat) and twice the ranks at the same bytes (2048x512KiB against 1024x1MiB: at most
twice the time).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.generate import Job, _c10, _failure_lines, _init_chatter, _progress, _size, write_tree
from nccllog.match.keywords import prefilter_keywords
from nccllog.match.library import Library, load_library

DEFAULT_CASES = (
    "1024x1MiB,16384x64KiB,65536x16KiB,1024x2MiB,2048x512KiB,1024x1MiB.gz,watchdog:256MiB,onefile:1000000"
)
MIB = 2**20
# case -> (ratio to the baseline at most, peak RSS in MiB at most); None: not a target
TARGETS: dict[str, tuple[float | None, float]] = {
    "1024x1MiB": (3.0, 300),
    "16384x64KiB": (5.0, 512),
    "65536x16KiB": (8.0, 1024),
    "watchdog:256MiB": (None, 1024),
    "onefile:1000000": (None, 4096),
}
TWICE_RANKS = ("1024x1MiB", "2048x512KiB")  # same bytes, twice the ranks: at most twice the time
PROBE_CHARS = 2**20
WORST_TARGET_S = 0.2


@dataclass
class Result:
    """One measured case."""

    case: str
    files: int
    bytes: int
    lines: int
    baseline: str
    baseline_s: float
    nccllog_s: float
    ratio: float
    peak_rss_mib: float
    lines_per_s: float
    verdict_ok: bool
    verdict: str
    target: str = ""
    target_ok: bool = True


def _tree(cache: Path, case: str, failure: str, seed: int) -> tuple[Path, dict]:
    if ":" in case:
        return _special_tree(cache, case, seed)
    spec, _, ext = case.partition(".")
    ranks_s, size_s = spec.split("x")
    out = cache / f"{case}-{failure}-{seed}"
    expected_file = cache / f"{out.name}.expected.json"
    if not expected_file.is_file():
        shutil.rmtree(out, ignore_errors=True)
        write_tree(out, int(ranks_s), _size(size_s), failure, seed, "flat", gz=(ext == "gz"))
    return out, json.loads(expected_file.read_text())


def _special_tree(cache: Path, case: str, seed: int) -> tuple[Path, dict]:
    """``watchdog:SIZE`` or ``onefile:RANKS`` (straggler), written once into the cache."""
    kind, _, arg = case.partition(":")
    out = cache / f"{kind}-{arg}-straggler-{seed}"
    expected_file = cache / f"{out.name}.expected.json"
    if expected_file.is_file():
        return out, json.loads(expected_file.read_text())
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    if kind == "watchdog":
        job = Job(2, "straggler", seed)
        job.culprit = 1
        job.hang_at = job.start + timedelta(seconds=60)
        with (out / "rank_1.log").open("w") as f:  # the silent culprit: init, then steps that stop
            f.writelines(s + "\n" for s in _init_chatter(job, 1))
            for step in range(1, 50):
                f.writelines(s + "\n" for s in _progress(job, 1, step, job.start + timedelta(seconds=step)))
        with (out / "rank_0.log").open("w") as f:
            f.writelines(s + "\n" for s in _init_chatter(job, 0))
            for step in range(1, 60):
                f.writelines(s + "\n" for s in _progress(job, 0, step, job.start + timedelta(seconds=step)))
            block = "".join(s + "\n" for s in _failure_lines(job, 0, job.hang_at))
            f.write(block * max(_size(arg) // len(block), 1))
        expected = {"category": "straggler_hang", "culprit_ranks": [1]}
    else:
        expected = _one_file(out / "console.log", int(arg), seed)
    expected_file.write_text(json.dumps(expected, indent=2) + "\n")
    return out, expected


def _one_file(path: Path, ranks: int, seed: int) -> dict:
    """Every rank's lines in one console file (``[rankN]:`` prefixes): a start-up line and a
    progress line each, then the watchdog lines of every rank but the silent straggler."""
    job = Job(ranks, "straggler", seed)
    job.hang_at = job.start + timedelta(seconds=60)
    step_at = job.start + timedelta(seconds=50)
    with path.open("w") as f:
        for rank in range(ranks):
            opts = f"size: {ranks}, global rank: {rank}, TIMEOUT(ms): 600000, USE_HIGH_PRIORITY_STREAM: 0"
            msg = (
                f"[PG ID 0 PG GUID 0(default_pg) Rank {rank}] ProcessGroupNCCL initialization options: {opts}"
            )
            f.write(_c10(rank, job.start, "ProcessGroupNCCL.cpp:869", msg, "I") + "\n")
        for rank in range(ranks):
            step = 40 if rank == job.culprit else 50
            f.write(
                f"[rank{rank}]:step {step:6d} | loss 2.0000 | lr 3.00e-04 | {step_at:%Y-%m-%d %H:%M:%S}\n"
            )
        for rank in range(ranks):
            f.writelines(s + "\n" for s in _failure_lines(job, rank, job.hang_at))
    return job.expected()


def _timed(cmd: list[str], **kw: object) -> tuple[float, subprocess.CompletedProcess[bytes]]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, **kw)  # type: ignore[call-overload]
    return time.perf_counter() - t0, proc


def _baseline(tree: Path, keywords: Path, gz: bool) -> tuple[str, float]:
    if shutil.which("rg"):
        cmd = ["rg", "-c", "-F", "-f", str(keywords), str(tree)]
        if gz:
            cmd.insert(1, "-z")
        return "rg", _timed(cmd)[0]
    cmd = ["zgrep" if gz else "grep", "-rcF", "-f", str(keywords), str(tree)]
    return cmd[0], _timed(cmd)[0]


def _measured(
    cmd: list[str], cwd: str, cache: Path
) -> tuple[float, float, subprocess.CompletedProcess[bytes]]:
    """Run ``cmd``; return wall seconds, peak RSS in MiB (GNU time, else rusage), and the process."""
    gnu_time = shutil.which("time") or ("/usr/bin/time" if Path("/usr/bin/time").exists() else None)
    if gnu_time:
        rss_file = cache / "rss.txt"
        secs, proc = _timed([gnu_time, "-f", "%M", "-o", str(rss_file), *cmd], cwd=cwd)
        return secs, int(rss_file.read_text().split()[-1]) / 1024, proc
    secs, proc = _timed(cmd, cwd=cwd)
    return secs, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, proc


def run_case(cache: Path, case: str, failure: str, seed: int, keywords: Path) -> Result:
    """Generate (once) and measure one case."""
    tree, expected = _tree(cache, case, failure, seed)
    files = [p for p in tree.rglob("*") if p.is_file()]
    size = sum(p.stat().st_size for p in files)
    gz = case.endswith(".gz")
    # Warm the page cache so both tools read from memory.
    _baseline(tree, keywords, gz)
    name, base_s = _baseline(tree, keywords, gz)
    out = cache / "report.json"
    cmd = [
        sys.executable,
        "-m",
        "nccllog",
        "analyze",
        str(tree),
        "--format",
        "json",
        "-o",
        str(out),
        "--quiet",
    ]
    secs, rss, proc = _measured(cmd, str(Path(__file__).resolve().parent.parent), cache)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"nccllog failed on {case}: {proc.stderr.decode(errors='replace')[-2000:]}")
    report = json.loads(out.read_text())
    v = report["verdict"]
    ok = v["category"] == expected["category"] and sorted(v["culprit_ranks"]) == sorted(
        expected["culprit_ranks"]
    )
    lines = report["coverage"]["lines"]
    ratio = round(secs / base_s, 2) if base_s > 0 else float("inf")
    target, target_ok = "", True
    if case in TARGETS:
        max_ratio, max_rss = TARGETS[case]
        target = (
            f"RSS <= {max_rss:.0f} MiB" if max_ratio is None else f"<= {max_ratio:g}x, <= {max_rss:.0f} MiB"
        )
        target_ok = rss <= max_rss and (max_ratio is None or ratio <= max_ratio)
    return Result(
        case=f"{case} {failure}",
        files=len(files),
        bytes=size,
        lines=lines,
        baseline=name,
        baseline_s=round(base_s, 3),
        nccllog_s=round(secs, 3),
        ratio=ratio,
        peak_rss_mib=round(rss, 1),
        lines_per_s=round(lines / secs),
        verdict_ok=ok,
        verdict=f"{v['category']} {v['culprit_ranks']}",
        target=target,
        target_ok=target_ok,
    )


def _pattern_probes(keyword: str, example: str) -> list[tuple[str, str]]:
    """Adversarial 1 MiB lines for a pattern with this keyword and example line."""
    n = PROBE_CHARS

    def fill(unit: str) -> str:
        return (unit * (n // len(unit) + 1))[:n]

    half = n // 2
    return [
        ("keyword, spaces, x", keyword + " x" + " " * n + "x"),
        ("a-run, keyword, a-run", fill("a")[:half] + keyword + fill("a")[:half]),
        ("digit-run, keyword, digit-run", fill("0")[:half] + keyword + fill("0")[:half]),
        ("keyword repeated", fill(keyword + " ")),
        ("example, spaces, x", example + " " * n + "x"),
    ]


def worst_pattern(library: Library) -> tuple[str, str, float]:
    """(pattern id, probe, seconds) of the slowest search of any pattern on a 1 MiB probe."""
    worst = ("", "", 0.0)
    for p in library.patterns:
        for name, text in _pattern_probes(p.keywords[0], p.examples[0].line):
            t0 = time.perf_counter()
            with contextlib.suppress(TimeoutError):  # 60 s: reported as such, far over target
                p.regex.search(text, timeout=60)
            secs = time.perf_counter() - t0
            if secs > worst[2]:
                worst = (p.id, name, secs)
    return worst


def main() -> None:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--cases", default=DEFAULT_CASES, help="comma list of RANKSxSIZE[.gz], watchdog:SIZE, onefile:RANKS"
    )
    ap.add_argument("--failure", default="straggler", choices=["straggler", "oom", "ib"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cache", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "nccllog-bench")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--no-probes", action="store_true", help="skip the 1 MiB pattern probes")
    a = ap.parse_args()
    a.cache.mkdir(parents=True, exist_ok=True)
    keywords = a.cache / "keywords.txt"
    keywords.write_text("\n".join(prefilter_keywords(load_library())) + "\n")
    results = []
    header = (
        f"{'case':<32}{'files':>7}{'MiB':>7}{'base':>5}{'base s':>8}{'nccllog s':>10}{'ratio':>7}"
        f"{'RSS MiB':>9}{'lines/s':>11}  verdict / target"
    )
    print(header)
    failed = False
    for case in [] if a.cases == "none" else a.cases.split(","):
        r = run_case(a.cache, case.strip(), a.failure, a.seed, keywords)
        results.append(r)
        failed = failed or not r.verdict_ok
        target = f"  target {r.target}: {'OK' if r.target_ok else 'MISSED'}" if r.target else ""
        print(
            f"{r.case:<32}{r.files:>7}{r.bytes / MIB:>7.0f}{r.baseline:>5}{r.baseline_s:>8.3f}{r.nccllog_s:>10.3f}"
            f"{r.ratio:>7.2f}{r.peak_rss_mib:>9.1f}{r.lines_per_s:>11,}  {'OK' if r.verdict_ok else 'WRONG'} "
            f"{r.verdict}{target}",
            flush=True,
        )
    by_case = {r.case.split()[0]: r for r in results}
    if all(c in by_case for c in TWICE_RANKS):
        one, two = (by_case[c] for c in TWICE_RANKS)
        growth = two.nccllog_s / one.nccllog_s
        print(
            f"twice the ranks at the same bytes ({TWICE_RANKS[1]} vs {TWICE_RANKS[0]}): {growth:.2f}x the time "
            f"(target <= 2x: {'OK' if growth <= 2 else 'MISSED'}), {two.peak_rss_mib / one.peak_rss_mib:.2f}x the memory"
        )
    if not a.no_probes:
        pid, probe, secs = worst_pattern(load_library())
        verdict = "OK" if secs <= WORST_TARGET_S else "OVER TARGET"
        print(
            f"worst pattern on a 1 MiB probe: {pid} ({probe}) {secs:.3f} s (target {WORST_TARGET_S} s) {verdict}"
        )
    if a.json:
        a.json.write_text(json.dumps([asdict(r) for r in results], indent=2) + "\n")
    if failed:
        raise SystemExit("a verdict named the wrong culprit")


if __name__ == "__main__":
    main()
