"""Time `nccllog analyze` on generated log trees against ripgrep (or grep) in the same run.

For each case it generates the tree once (cached), then runs, with a warm page cache:
- the baseline: `rg -c -F -f KEYWORDS DIR` (grep -rcF where rg is absent), counting the lines that
  contain any keyword of the pattern library;
- `python -m nccllog analyze DIR --format json`,
and prints wall time, the ratio to the baseline, peak RSS, lines/s and whether the verdict named
the planted culprit.

Usage: python bench/run.py [--cases 1024x1MiB,16384x64KiB,1024x2MiB,2048x1MiB,1024x1MiB.gz|none] [--json out.json]

After the cases it times every pattern of the library on adversarial 1 MiB probes (long
whitespace after its keyword, long runs before and after it, its keyword repeated, its example
padded) and prints the worst pattern's time (target: under 0.2 s; see docs/robustness.md).

"Twice the input" is measured two ways: the same job with logs twice as long (1024x2MiB: memory
must stay flat) and twice the ranks (2048x1MiB: per-rank state grows with the ranks).
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.generate import _size, write_tree
from nccllog.match.library import Library, load_library
from nccllog.match.matcher import prefilter_keywords

DEFAULT_CASES = "1024x1MiB,16384x64KiB,1024x2MiB,2048x1MiB,1024x1MiB.gz"
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


def _tree(cache: Path, case: str, failure: str, seed: int) -> tuple[Path, dict]:
    spec, _, ext = case.partition(".")
    ranks_s, size_s = spec.split("x")
    out = cache / f"{case}-{failure}-{seed}"
    expected_file = cache / f"{out.name}.expected.json"
    if not expected_file.is_file():
        shutil.rmtree(out, ignore_errors=True)
        write_tree(out, int(ranks_s), _size(size_s), failure, seed, "flat", gz=(ext == "gz"))
    return out, json.loads(expected_file.read_text())


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
    return Result(
        case=f"{case} {failure}",
        files=len(files),
        bytes=size,
        lines=lines,
        baseline=name,
        baseline_s=round(base_s, 3),
        nccllog_s=round(secs, 3),
        ratio=round(secs / base_s, 2) if base_s > 0 else float("inf"),
        peak_rss_mib=round(rss, 1),
        lines_per_s=round(lines / secs),
        verdict_ok=ok,
        verdict=f"{v['category']} {v['culprit_ranks']}",
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
    ap.add_argument("--cases", default=DEFAULT_CASES, help="comma list of RANKSxSIZE[.gz]")
    ap.add_argument("--failure", default="straggler", choices=["straggler", "oom", "ib"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cache", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "nccllog-bench")
    ap.add_argument("--json", type=Path, help="also write the results here")
    a = ap.parse_args()
    a.cache.mkdir(parents=True, exist_ok=True)
    keywords = a.cache / "keywords.txt"
    keywords.write_text("\n".join(prefilter_keywords(load_library())) + "\n")
    results = []
    header = f"{'case':<28}{'files':>7}{'MiB':>8}{'base':>5}{'base s':>8}{'nccllog s':>10}{'ratio':>7}{'RSS MiB':>9}{'lines/s':>11}  verdict"
    print(header)
    for case in [] if a.cases == "none" else a.cases.split(","):
        r = run_case(a.cache, case.strip(), a.failure, a.seed, keywords)
        results.append(r)
        print(
            f"{r.case:<28}{r.files:>7}{r.bytes / 2**20:>8.0f}{r.baseline:>5}{r.baseline_s:>8.3f}{r.nccllog_s:>10.3f}"
            f"{r.ratio:>7.2f}{r.peak_rss_mib:>9.1f}{r.lines_per_s:>11,}  {'OK' if r.verdict_ok else 'WRONG'} {r.verdict}",
            flush=True,
        )
    pid, probe, secs = worst_pattern(load_library())
    verdict = "OK" if secs <= WORST_TARGET_S else "OVER TARGET"
    print(
        f"worst pattern on a 1 MiB probe: {pid} ({probe}) {secs:.3f} s (target {WORST_TARGET_S} s) {verdict}"
    )
    if a.json:
        a.json.write_text(json.dumps([asdict(r) for r in results], indent=2) + "\n")


if __name__ == "__main__":
    main()
