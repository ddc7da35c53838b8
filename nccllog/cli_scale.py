"""The two-phase commands: ``nccllog extract`` (a part from some of a job's logs) and
``nccllog ray-extract`` (a part from every node of a Ray cluster); docs/scale.md."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import click

from nccllog.cli import _fail, _guarded, _isatty, _progress, _stdin_stream, read_limit_options
from nccllog.cli_inspect import size_label as _size
from nccllog.ingest.sources import unreadable
from nccllog.text_safety import clean


def _shard(value: str | None) -> tuple[int, int] | None:
    """``i/N`` -> (i, N), 0 <= i < N."""
    if value is None:
        return None
    m = re.fullmatch(r"(\d{1,6})/(\d{1,6})", value.strip())
    if not m or not 0 <= int(m.group(1)) < int(m.group(2)):
        _fail(f"--shard {value!r}: expected i/N with 0 <= i < N, e.g. 0/8 (see 'nccllog extract --help')")
    return int(m.group(1)), int(m.group(2))


@click.command("extract")
@click.argument("inputs", nargs=-1, required=True)
@click.option(
    "--output", "-o", required=True, type=click.Path(dir_okay=False), help="The part to write (.parquet)."
)
@click.option(
    "--shard", help="i/N: read only every N-th input file (by sorted name), from the i-th (0-based)."
)
@click.option(
    "--prefix",
    help="Put this before every file name (e.g. the node's name), so that nodes writing"
    " the same local paths stay apart.",
)
@click.option(
    "--patterns",
    "pattern_dirs",
    multiple=True,
    type=click.Path(),
    help="Add a directory of patterns (give the same to analyze).",
)
@read_limit_options
@click.option("--quiet", "-q", is_flag=True, help="No progress bar and no notes on stderr (errors only).")
@click.option("--strict", is_flag=True, help="Exit 2 when an input named cannot be read.")
@click.option("--traceback", is_flag=True, help="Show Python tracebacks of errors.")
def extract_cmd(
    inputs: Sequence[str],
    output: str,
    shard: str | None,
    prefix: str | None,
    pattern_dirs: Sequence[str],
    max_decompressed: int,
    max_total_decompressed: int,
    quiet: bool,
    strict: bool,
    traceback: bool,
) -> None:
    """Read some of a job's logs (files, directories, globs, archives, -) into one part: the
    candidate lines, per-file coverage and dumps, a small Parquet file. Then analyse all the
    parts together: nccllog analyze part-*.parquet (docs/scale.md)."""
    from nccllog import parts

    stdin = _stdin_stream() if "-" in inputs else None
    with _progress(not quiet) as progress:
        got = _guarded(
            parts.extract,
            traceback,
            list(inputs),
            patterns=list(pattern_dirs),
            shard=_shard(shard),
            prefix=prefix,
            stdin=stdin,
            max_decompressed=max_decompressed,
            max_total_decompressed=max_total_decompressed,
            progress=progress,
        )
    skipped = [*got.skipped, *(s for st in got.read.stats for s in st.skipped)]
    bad = [s for s in skipped if unreadable(s.reason)]
    for s in skipped:
        if unreadable(s.reason) or s.reason.startswith(parts.REJECTED):
            click.echo(f"nccllog: skipped {clean(s.source, 200)}: {clean(s.reason, 300)}", err=True)
    if strict and bad:
        _fail(
            f"{len(bad)} input(s) could not be read (--strict): {clean(bad[0].source, 200)}: {bad[0].reason}"
        )
    size = _guarded(parts.write_part, traceback, got, output)
    if not quiet:
        read = sum(st.bytes for st in got.read.stats)
        share = f", {100 * size / read:.2f}% of {_size(read)} read" if read else ""
        click.echo(
            f"nccllog: wrote part {clean(output)}: {len(got.read.stats)} file(s), "
            f"{got.read.lines.height} candidate line(s), {len(got.dumps)} dump(s), {_size(size)}{share}",
            err=True,
        )


@contextmanager
def _node_progress(enabled: bool) -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar of nodes done, on stderr (only on a terminal)."""
    if not enabled or not _isatty(sys.stderr):
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True, markup=False, emoji=False, highlight=False)
    bar = Progress(
        TextColumn("extracting on nodes"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )
    task = bar.add_task("nodes", total=None)

    def update(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    with bar:
        yield update


@click.command("ray-extract")
@click.argument("paths", nargs=-1)
@click.option(
    "--output-dir",
    "-o",
    required=True,
    type=click.Path(file_okay=False),
    help="Write one part per node here.",
)
@click.option("--address", help="The Ray cluster to use (default: the running one, as ray.init('auto')).")
@click.option("--ray-logs/--no-ray-logs", default=True, show_default=True, help="Read Ray's worker logs.")
@click.option(
    "--torch-dumps/--no-torch-dumps",
    default=True,
    show_default=True,
    help="Read Flight Recorder dumps under ~/.cache/torch and the TORCH_*_TEMP_FILE prefixes.",
)
@click.option(
    "--patterns", "pattern_dirs", multiple=True, type=click.Path(), help="Add a directory of patterns."
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bar and no notes on stderr (errors only).")
@click.option("--traceback", is_flag=True, help="Show Python tracebacks of errors.")
def ray_extract_cmd(
    paths: Sequence[str],
    output_dir: str,
    address: str | None,
    ray_logs: bool,
    torch_dumps: bool,
    pattern_dirs: Sequence[str],
    quiet: bool,
    traceback: bool,
) -> None:
    """Extract on every alive node of a Ray cluster (one task pinned to each node) the logs it
    holds: PATHS (the same paths on every node), the node's NCCLLOG_LOGS, Ray's worker logs and
    Flight Recorder dumps; writes one part per node to --output-dir. Then: nccllog analyze DIR."""
    from nccllog import ray_extract as rx

    _guarded(rx.require_ray, traceback)
    with _node_progress(not quiet) as progress:
        got = _guarded(
            rx.ray_extract,
            traceback,
            list(paths),
            ray_logs=ray_logs,
            torch_dumps=torch_dumps,
            patterns=list(pattern_dirs),
            address=address,
            progress=progress,
        )
    out = Path(output_dir)
    _guarded(out.mkdir, traceback, parents=True, exist_ok=True)
    written = 0
    for part in got:
        if part.data is None:
            click.echo(
                f"nccllog: warning: node {clean(part.node_id)}: extraction failed: {clean(part.error or '')}",
                err=True,
            )
            continue
        name = out / f"part-{re.sub(r'[^A-Za-z0-9._-]', '_', part.host)}-{part.node_id[:8]}.parquet"
        _guarded(name.write_bytes, traceback, part.data)
        written += 1
    if not written:
        _fail(f"no node returned a part ({len(got)} node(s) tried)")
    if not quiet:
        files, lines = sum(p.files for p in got), sum(p.lines for p in got)
        read = sum(p.bytes_read for p in got)
        click.echo(
            f"nccllog: wrote {written} part(s) to {clean(output_dir)} ({files} file(s), {lines} candidate"
            f" line(s), {_size(read)} read); next: nccllog analyze {clean(output_dir)}",
            err=True,
        )
