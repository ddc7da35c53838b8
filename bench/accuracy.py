"""How often nccllog's verdict is right, per set of labelled cases.

For each set it prints category and culprit accuracy, the confusion matrix (expected category by
row, nccllog's by column) and the calibration table (confidence level -> share of verdicts right,
category and culprit both). A verdict counts as right when its category is the expected one or one
the label also accepts, and it names exactly the expected culprit ranks (and hosts, where given).

Usage:
    python bench/accuracy.py                    # scenario fixtures, unsealed real-thread fixtures, GF-Bench
    python bench/accuracy.py --sealed           # ... and the sealed real-thread fixtures (end of a change only)
    python bench/accuracy.py --corpus DIR       # ... and a local folder of <id>/paste.txt + <id>/label.toml,
                                                # read as `nccllog paste` reads standard input
    python bench/accuracy.py --json out.json    # the per-case results too

Verdicts wrong at high confidence are listed on stderr (the target is none). Exit status 1 when a
case of the scenario, real-thread or GF-Bench sets that records no known gap is wrong (CI runs it);
0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.cases import Case, corpus_cases, fixture_cases, gfbench_cases
from nccllog import analyze
from nccllog.cli import unquote_paste
from nccllog.match.library import Library, load_library
from nccllog.pipeline import InputError

LEVELS = ("high", "medium", "low")


@dataclass(frozen=True)
class Outcome:
    """nccllog's verdict on one case, judged against its label."""

    name: str
    group: str
    expected: str
    got: str
    culprits_expected: list[int]
    culprits_got: list[int]
    hosts_got: list[str]
    confidence: str
    category_ok: bool
    culprit_ok: bool
    known_gap: bool

    @property
    def right(self) -> bool:
        """Category and culprit both right."""
        return self.category_ok and self.culprit_ok


def run_case(case: Case, library: Library) -> Outcome:
    """Analyse one case as a user would hand it to nccllog."""
    try:
        if case.group == "corpus":
            data = unquote_paste(case.inputs.read_bytes())
            incident = analyze(["-"], stdin=data, library=library)
        else:
            incident = analyze(str(case.inputs), library=library)
        v = incident.verdict
        got, ranks, hosts, conf = v.category, list(v.culprit_ranks), list(v.culprit_hosts), v.confidence
    except InputError as exc:  # nothing analysable: the user gets no verdict
        got, ranks, hosts, conf = f"error: {exc}"[:60], [], [], "low"
    return Outcome(
        name=case.name,
        group=case.group,
        expected=case.category,
        got=got,
        culprits_expected=list(case.culprit_ranks),
        culprits_got=ranks,
        hosts_got=hosts,
        confidence=conf,
        category_ok=case.category_ok(got),
        culprit_ok=case.culprit_ok(ranks, hosts),
        known_gap="verdict" in case.gaps,
    )


def _pct(n: int, d: int) -> str:
    return f"{n}/{d} ({100 * n / d:.0f}%)" if d else "0/0"


def report(group: str, outcomes: list[Outcome]) -> str:
    """The text block of one set: accuracy, misses, confusion matrix, calibration."""
    n = len(outcomes)
    lines = [
        f"== {group}: {n} cases",
        f"category right: {_pct(sum(o.category_ok for o in outcomes), n)}",
        f"culprit right:  {_pct(sum(o.culprit_ok for o in outcomes), n)}",
        f"both right:     {_pct(sum(o.right for o in outcomes), n)}",
    ]
    misses = [o for o in outcomes if not o.right]
    if misses:
        lines.append("misses:")
        for o in misses:
            gap = " (known gap)" if o.known_gap else ""
            lines.append(
                f"  {o.name}: expected {o.expected} {o.culprits_expected}, got {o.got} {o.culprits_got} "
                f"{o.confidence}{gap}"
            )
    confusion: dict[str, Counter[str]] = defaultdict(Counter)
    for o in outcomes:
        confusion[o.expected][o.got if not o.got.startswith("error") else "error"] += 1
    cols = sorted({c for row in confusion.values() for c in row})
    lines.append("confusion (rows expected, columns got):")
    lines.append("  " + " " * 26 + " ".join(f"{c[:10]:>10}" for c in cols))
    for exp in sorted(confusion):
        lines.append(f"  {exp:<26}" + " ".join(f"{confusion[exp][c] or '.':>10}" for c in cols))
    lines.append("calibration (confidence -> both right):")
    for level in LEVELS:
        at = [o for o in outcomes if o.confidence == level]
        lines.append(f"  {level:<7} {_pct(sum(o.right for o in at), len(at))}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Evaluate the chosen sets, print the tables, return the exit status."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sealed", action="store_true", help="include the sealed real-thread fixtures")
    ap.add_argument("--corpus", type=Path, help="a folder of <id>/paste.txt + <id>/label.toml")
    ap.add_argument("--json", type=Path, help="write every case's outcome to this file")
    args = ap.parse_args(argv)
    library = load_library(())
    cases = fixture_cases(sealed=args.sealed) + gfbench_cases()
    if args.corpus:
        cases += corpus_cases(args.corpus)
    outcomes = [run_case(c, library) for c in cases]
    groups: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        groups[o.group].append(o)
    order = ["scenarios", "captured", "real-threads", "sealed", "gf-bench", "corpus"]
    print("\n\n".join(report(g, groups[g]) for g in order if groups.get(g)))
    if args.json:
        args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=2) + "\n", encoding="utf-8")
    wrong_high = [o for o in outcomes if o.confidence == "high" and not o.right]
    unexpected = [
        o for o in outcomes if not o.right and not o.known_gap and o.group not in ("sealed", "corpus")
    ]
    for o in wrong_high:
        print(f"wrong at high confidence: {o.name}", file=sys.stderr)
    for o in unexpected:
        print(f"wrong without a recorded gap: {o.name}", file=sys.stderr)
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
