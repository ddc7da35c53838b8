"""Linear matching: every library pattern, and the prefix and timestamp regexes of ingest, must
take time that grows with the length of a line, not with its square.

Each regex is run on adversarial probes (long whitespace after its keyword, long runs of the
character classes patterns start with, repeated keywords and separators, its own example lines
padded) at two lengths, ``SMALL`` and 4 x ``SMALL``. A regex fails when the longer probe takes
more than ``MAX_RATIO`` times as long as the shorter one (linear: about 4; quadratic: about 16).
Times are CPU time of this process (``time.process_time``: a busy machine does not inflate it,
as it does wall time), probes faster than ``FLOOR_S`` at the longer length are not judged (too
short to time, and far from any harm), and a suspect is confirmed at 16 x ``SMALL`` with the best
of ``REPEATS`` runs at each length. This is a ratio, not a wall-clock limit.

``SMALL`` is 8 KiB (probes of 8, 32 and 128 KiB) and ``FLOOR_S`` is 0.3 ms at 32 KiB: for a
quadratic regex that is the same bar as 5 ms at 128 KiB (probes 4 times as long, 16 times the
time), so the lint catches what it caught with 32 KiB probes in a quarter of the time; the
canaries below check that it still catches known quadratic regexes. bench/run.py reports the
worst pattern's time on 1 MiB probes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import regex

from nccllog.attribution import layers as prefixes
from nccllog.ingest import timestamps
from nccllog.ingest.reader import read_sources
from nccllog.ingest.sources import Source
from nccllog.match import matcher
from nccllog.match.keywords import prefilter_keywords, sampled_keywords
from nccllog.match.library import Library, Pattern, load_library
from nccllog.match.matcher import match_lines
from nccllog.pipeline import analyze

LIBRARY: Library = load_library()
KEYWORDS = prefilter_keywords(LIBRARY)
SAMPLED = sampled_keywords(LIBRARY)
SMALL = 8 * 1024
MAX_RATIO = 10.0
REPEATS = 3
FLOOR_S = 0.0003  # at 4 x SMALL; a quadratic regex over it here takes over 5 ms at 128 KiB
TIMEOUT_S = 2.0
# Runs of the characters and separators that leading classes (`\w+`, `[\w./+-]+`, `\d+`, `\S+`)
# and lazy tails (`.+?\s*$`) rescan.
RUNS = (" ", "a", "0", "[", "(", "a.", "a-", "a/", "0:", "a:", "-0 ", ". ", "] ", ", ")


def probes(keywords: tuple[str, ...], lines: tuple[str, ...], n: int) -> Iterator[tuple[str, str]]:
    """(name, text) adversarial probes of about ``n`` characters for a regex with these keywords and
    example lines."""

    def fill(unit: str) -> str:
        return (unit * (n // len(unit) + 1))[:n]

    for kw in keywords[:2]:
        for sep in ("", " ", ":", ". "):
            yield f"({kw!r}+{sep!r})*", fill(kw + sep)
        for c in RUNS:
            yield f"{c!r}*+{kw!r}+{c!r}*", fill(c) + kw + fill(c)
        yield f"{kw!r}+ x+spaces+x", kw + " x" + " " * n + "x"
    for i, line in enumerate(lines[:2]):
        yield f"example{i}+spaces+x", line + " " * n + "x"
        yield f"(example{i}+' ')*", fill(line + " ")
        for q in (0.5, 0.75):
            cut = int(len(line) * q)
            for c in (" ", "a", "0"):
                yield f"example{i}@{q}+{c!r}*", line[:cut] + fill(c) + line[cut:]


def _time(fn: Callable[[str], object], text: str, repeats: int) -> float:
    """The best CPU time of ``repeats`` runs of ``fn(text)``: time the process spent waiting for
    a core on a busy machine is not counted, and the best run drops the rest of the noise."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        fn(text)
        best = min(best, time.process_time() - t0)
    return best


def superlinear(fn: Callable[[str], object], keywords: tuple[str, ...], lines: tuple[str, ...]) -> list[str]:
    """The probes on which ``fn`` grows clearly faster than the length, with their ratios.

    A probe whose time grows more than ``MAX_RATIO`` times from 1x to 4x is measured once more at
    16x: a quadratic regex grows as fast again, while a linear one that crossed a cache size or
    met a busy machine does not.
    """
    bad = []
    sizes = (SMALL, 4 * SMALL, 16 * SMALL)
    made = [dict(probes(keywords, lines, n)) for n in sizes[:2]]
    for name in made[0]:
        try:
            times = [_time(fn, made[0][name], 1), _time(fn, made[1][name], 1)]
            if times[1] < FLOOR_S or times[1] / max(times[0], 1e-7) <= MAX_RATIO:
                continue
            made.append(dict(probes(keywords, lines, sizes[2])))
            times = [_time(fn, made[i][name], REPEATS) for i in range(3)]
            del made[2:]
        except TimeoutError:
            bad.append(f"{name}: over {TIMEOUT_S} s")
            continue
        ratios = [times[i + 1] / max(times[i], 1e-7) for i in range(2)]
        if min(ratios) > MAX_RATIO:
            bad.append(f"{name}: x{ratios[0]:.0f}, x{ratios[1]:.0f} ({times[2]:.3f} s at {sizes[2]} chars)")
    return bad


def _search(rx: regex.Pattern[str]) -> Callable[[str], object]:
    # A probe that runs into the timeout is far beyond linear: TimeoutError fails the pattern.
    return lambda text: rx.search(text, timeout=TIMEOUT_S)


def test_a_mild_quadratic_is_caught() -> None:
    """The lint's own check, at the edge of what it judges: a regex that rescans to the end of the
    line from one start in 1,024 characters (about 1 s on a 1 MiB line) fails it."""
    line = "Q" + "a" * 1022
    bad = superlinear(_search(regex.compile(r"Q[^x]*x")), (), (line,))
    assert [b.split(":")[0] for b in bad] == ["(example0+' ')*"], bad


@pytest.mark.parametrize("pattern", LIBRARY.patterns, ids=[p.id for p in LIBRARY.patterns])
def test_pattern_is_linear(pattern: Pattern) -> None:
    lines = tuple(ex.line for ex in pattern.examples)
    bad = superlinear(_search(pattern.regex), pattern.keywords, lines)
    assert not bad, f"{pattern.id} ({pattern.path}) is superlinear on: " + "; ".join(bad)


PREFIX_LINES = (
    "[rank3]:[E1023 14:02:17.412903117 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught",
    "gpu-node-07:48233:48233 [3] bootstrap.cc:97 NCCL WARN Bootstrap : no socket interface found",
    "Epoch 1:  45%|####5     | 45/100 [00:09<00:11,  4.90it/s] [rank0]: x",
    " 45%|####5     | 45/100 [00:09<00:11,  4.90it/s]",
    "2025-10-23T14:02:17.123Z worker-1 kernel: NVRM: Xid (PCI:0000:3b:00): 79, GPU fallen",
    "(WorkerDict pid=48233, ip=10.0.0.12) [2025-10-23 14:02:20,715] [ERROR] [launch.py:325:x] y",
)


def test_prefix_parsing_is_linear() -> None:
    bad = superlinear(prefixes.parse_line, ("%|", "it [", "[rank0]:", "NCCL WARN ", ": "), PREFIX_LINES)
    assert not bad, "parse_line is superlinear on: " + "; ".join(bad)


def test_timestamp_parsing_is_linear() -> None:
    lines = (
        "2025-10-23T14:02:17.123456Z",
        "[  123.456789]",
        "Thu Oct 23 14:02:17 2025",
        "1023 14:02:17.412903",
    )
    for fn in (timestamps.parse_timestamp, timestamps.parse_uptime):
        bad = superlinear(fn, ("[", "2025-10-23 "), lines)
        assert not bad, f"{fn.__name__} is superlinear on: " + "; ".join(bad)


def test_carriage_return_segments_are_linear() -> None:
    """A line of many tqdm redraws costs time in proportion to its length, not segments x keywords."""
    seg = "Epoch 1:  45%|####5     | 45/100 [00:09<00:11,  4.90it/s] NCCL WARN x"

    def match(text: str) -> object:
        read = read_sources([Source(name="bar.log", data=text.encode() + b"\n")], KEYWORDS, sampled=SAMPLED)
        return match_lines(read.lines, LIBRARY)

    times = [_time(match, "\r".join([seg] * n), REPEATS) for n in (1000, 4000)]
    assert times[1] / times[0] < MAX_RATIO, times


def test_timed_out_line_is_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pattern that backtracks without end is stopped by the line budget; the line is reported."""
    (tmp_path / "slow.toml").write_text(
        'id = "user.slow"\ntitle = "t"\nproducer = "user"\nfamily = "f"\nversions = "v"\n'
        'severity = "error"\nsignal = "error_line"\nkeywords = ["SLOW "]\n'
        "regex = '''SLOW (?:a|a)*b'''\n[fields]\n"
        "[[examples]]\nline = 'SLOW aab'\n[[near_misses]]\nline = 'SLOW x'\n"
    )
    monkeypatch.setattr(matcher, "LINE_BUDGET_S", 0.2)
    log = "ok\nSLOW " + "a" * 40 + "!\nNCCL WARN Cuda failure 'out of memory'\n"
    incident = analyze(log, patterns=[tmp_path])
    assert [(s.source, s.reason, s.lines) for s in incident.coverage.skipped] == [
        ("<paste>", matcher.TIMEOUT_REASON, "2")
    ]
    assert incident.coverage.matched >= 1
