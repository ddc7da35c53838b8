"""Imports flow one way: ingest -> attribution -> match -> correlate -> advice -> render (and the
entry points above them). A module importing a later stage fails this test (read with ast, so a
lazy import inside a function counts too)."""

from __future__ import annotations

import ast
from pathlib import Path

import nccllog

ROOT = Path(nccllog.__file__).parent

# Each top-level module or package of nccllog and its level: a module may import its own
# package and any lower level, never a higher one (nor another package of its own level).
LEVELS: dict[str, int] = {
    # the shared vocabulary every stage may use
    "schema": 0,
    "version": 0,
    "text_safety": 0,
    "vocab": 0,
    "model": 1,
    "errors": 2,
    # the stages, in data-flow order
    "ingest": 3,
    "attribution": 4,
    "match": 5,
    "correlate": 6,
    "advice": 7,
    "redact": 8,
    "render": 9,
    # the entry points
    "parts": 6,  # reads candidate lines like ingest, checked against the pattern library's keywords
    "spread": 10,  # reading and matching on several processes, for the pipeline
    "pipeline": 11,
    "ray_extract": 11,
    "cli": 12,
    "__init__": 13,
    "__main__": 14,
}


# The command line is one unit in three files (cli.py uses cli_inspect.py and registers cli_scale.py);
# spread.py and the worker process it starts (spread_worker.py) are one unit.
SAME_UNIT = {"cli_scale": "cli", "cli_inspect": "cli", "spread_worker": "spread"}


def _unit(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    return SAME_UNIT.get(rel.parts[0], rel.parts[0])


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported nccllog module) for every import in a file, relative ones resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = path.relative_to(ROOT.parent).with_suffix("").parts[:-1]
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "nccllog"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            if module.split(".")[0] != "nccllog":
                continue
            if module == "nccllog":  # `from nccllog import x`: x is a module or a root name
                out += [(node.lineno, f"nccllog.{a.name}") for a in node.names]
            else:
                out.append((node.lineno, module))
    return out


def _target(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__"
    name = SAME_UNIT.get(parts[1], parts[1])
    return name if name in LEVELS else "__init__"


def test_every_unit_has_a_level() -> None:
    units = {_unit(p) for p in ROOT.rglob("*.py")}
    assert units <= set(LEVELS), f"give these a level in LEVELS: {sorted(units - set(LEVELS))}"


def test_imports_flow_one_way() -> None:
    upward: list[str] = []
    for path in sorted(ROOT.rglob("*.py")):
        src = _unit(path)
        for line, module in _imports(path):
            dst = _target(module)
            if dst == src:
                continue
            if LEVELS[dst] >= LEVELS[src]:
                upward.append(f"{path.relative_to(ROOT)}:{line} ({src}) imports {module} ({dst})")
    assert not upward, "imports against the data flow:\n" + "\n".join(upward)


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The parser finds a lazy import of a later stage (what the test above would report)."""
    f = ROOT / "match" / "matcher.py"
    found = {_target(m) for _line, m in _imports(f)}
    assert "attribution" in found and "correlate" not in found
    bad = tmp_path / "x.py"
    bad.write_text("def f():\n    from nccllog.render import text\n", encoding="utf-8")
    tree = ast.parse(bad.read_text(encoding="utf-8"))
    lazy = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert lazy and _target(lazy[0].module or "") == "render"
