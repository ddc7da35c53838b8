"""The CLI through click's runner, for tests: stdout and stderr apart, exceptions not caught."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result

from nccllog.cli import main


def cli(*args: str | Path, stdin: bytes | None = None) -> Result:
    """Run ``nccllog ARGS`` (paths turned into strings) with ``stdin`` as standard input."""
    return CliRunner().invoke(main, [str(a) for a in args], input=stdin, catch_exceptions=False)
