"""A lint of the pattern library, beyond what the loader enforces (docs/patterns.md, "Lint"):

- the file's stem is the name part of its id (``nccl.comm_init`` in ``comm_init.toml``);
- the file's folder is its producer (``patterns/nccl/`` for ``producer = "nccl"``);
- every pattern has at least two near-misses;
- every example asserts every field it captures (``fields = {…}`` names each non-null field);
- no example is matched by a second pattern unless the example declares it (``also = [ids]``).

Examples run through the production reader and matcher, as in test_patterns.py. A file's path
never decides a match (the library is in id order, see docs/patterns.md), which the last test here
shows by loading the library from other paths.
"""

from __future__ import annotations

import tomllib
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from nccllog.ingest.reader import read_sources
from nccllog.ingest.sources import Source
from nccllog.match.keywords import prefilter_keywords, sampled_keywords
from nccllog.match.library import Library, builtin_pattern_dir, load_library
from nccllog.match.matcher import match_lines


def _files() -> dict[str, tuple[Path, dict[str, Any]]]:
    root = builtin_pattern_dir()
    out = {}
    for f in sorted(root.rglob("*.toml")):
        data = tomllib.loads(f.read_text(encoding="utf-8"))
        out[data["id"]] = (f.relative_to(root), data)
    return out


FILES = _files()


def test_stem_is_the_id_name() -> None:
    found = sorted(str(rel) for pid, (rel, _d) in FILES.items() if rel.stem != pid.split(".", 1)[1])
    assert not found, f"file stem differs from the id's name: {found}"


def test_folder_is_the_producer() -> None:
    found = sorted(str(rel) for rel, d in FILES.values() if rel.parent != Path(str(d.get("producer"))))
    assert not found, f"folder differs from the producer: {found}"


def test_two_near_misses() -> None:
    found = sorted(pid for pid, (_rel, d) in FILES.items() if len(d.get("near_misses", [])) < 2)
    assert not found, f"fewer than two [[near_misses]]: {found}"


@pytest.fixture(scope="module")
def matched() -> tuple[Library, list[tuple[str, int]], dict[int, list[dict[str, Any]]]]:
    """Every example of the library through the production path, one source per example."""
    lib = load_library()
    sources, meta = [], []
    for p in lib.patterns:
        for j, ex in enumerate(p.examples):
            sources.append(Source(name=f"ex{len(meta)}.log", data=ex.line.encode("utf-8")))
            meta.append((p.id, j))
    read = read_sources(sources, prefilter_keywords(lib), sampled=sampled_keywords(lib))
    rows: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in match_lines(read.lines, lib).events.to_dicts():
        rows[int(r["source"][2:-4])].append(r)
    return lib, meta, rows


def test_examples_assert_all_their_fields(
    matched: tuple[Library, list[tuple[str, int]], dict[int, list[dict[str, Any]]]],
) -> None:
    lib, meta, rows = matched
    patterns = {p.id: p for p in lib.patterns}
    unasserted = []
    for k, (pid, j) in enumerate(meta):
        p = patterns[pid]
        mine = [r for r in rows[k] if r["pattern"] == pid]
        if not mine:
            continue  # test_patterns.py reports an example that does not match
        missing = sorted(n for n in p.fields if mine[0][n] is not None and n not in p.examples[j].fields)
        if missing:
            unasserted.append(f"{pid} example {j}: {missing}")
    assert not unasserted, "examples that capture fields they do not assert:\n" + "\n".join(unasserted)


def test_no_undeclared_second_match(
    matched: tuple[Library, list[tuple[str, int]], dict[int, list[dict[str, Any]]]],
) -> None:
    _lib, meta, rows = matched
    undeclared = []
    for k, (pid, j) in enumerate(meta):
        others = {r["pattern"] for r in rows[k]} - {pid}
        declared = set(FILES[pid][1]["examples"][j].get("also", []))
        if others != declared:
            undeclared.append(f"{pid} example {j}: matched by {sorted(others)}, declared {sorted(declared)}")
    assert not undeclared, "declare a second match with also = [ids], or fix the patterns:\n" + "\n".join(
        undeclared
    )


def test_paths_do_not_order_the_library(tmp_path: Path) -> None:
    """The library is in id order whatever the files are called or where they are, so moving or
    renaming a file changes no match: the same files under scrambled paths load identically."""
    lib = load_library()
    assert [p.id for p in lib.patterns] == sorted(p.id for p in lib.patterns)
    root = builtin_pattern_dir()
    for k, rel in enumerate(sorted((rel for rel, _d in FILES.values()), key=str, reverse=True)):
        moved = tmp_path / f"d{k % 7}" / f"{k:03d}.toml"  # reversed, in folders of another order
        moved.parent.mkdir(exist_ok=True)
        moved.write_bytes((root / rel).read_bytes())
    other = load_library([tmp_path], builtin=False)
    assert [p.id for p in other.patterns] == [p.id for p in lib.patterns]
    assert other.keyword_patterns == lib.keyword_patterns
    assert other.field_types == lib.field_types
    assert other.quiet_keywords == lib.quiet_keywords
