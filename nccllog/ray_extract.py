"""Extraction on a Ray cluster: one task pinned to each alive node reads that node's logs where
they are and sends its part (Parquet bytes) back to the driver; ``nccllog analyze`` merges them.

Ray is an optional extra (``pip install 'nccllog[ray]'``) and is imported only when this runs.
What a node reads: the paths given (the same paths on every node: node-local disks), the paths
in the node's ``NCCLLOG_LOGS`` environment variable (``os.pathsep``-separated, set where the
node's ``ray start`` runs), the paths ``node_paths`` maps its node id to, Ray's own worker logs
of the current session (``<temp dir>/session_latest/logs/worker-*.out|err``), and Flight Recorder
dumps (files naming a rank under ``~/.cache/torch``, or at the ``TORCH_FR_DUMP_TEMP_FILE`` /
``TORCH_NCCL_DEBUG_INFO_TEMP_FILE`` prefix). File names are prefixed with the node's host name,
so nodes that write the same local paths stay apart. nccllog (and any ``patterns`` directories)
must be installed (readable) on every node.
"""

from __future__ import annotations

import glob
import os
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nccllog.errors import UsageError

INSTALL_HINT = "ray-extract needs Ray: pip install 'nccllog[ray]'"
ENV_LOGS = "NCCLLOG_LOGS"
_DUMP_ENV = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")


@dataclass(frozen=True)
class NodePart:
    """One node's part, or why it has none."""

    node_id: str
    host: str
    data: bytes | None  # the part (Parquet); None when the node's task failed
    files: int = 0
    lines: int = 0
    bytes_read: int = 0
    inputs: tuple[str, ...] = ()  # what the node was asked to read (after its defaults were added)
    error: str | None = None


@dataclass(frozen=True)
class _Plan:
    paths: tuple[str, ...]
    ray_logs: bool
    torch_dumps: bool
    patterns: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()  # this node's own paths (``node_paths``)


def require_ray() -> Any:
    """The ``ray`` module, or a UsageError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise UsageError(INSTALL_HINT) from None
    return ray


def ray_extract(
    paths: Sequence[str] = (),
    *,
    node_paths: Mapping[str, Sequence[str]] | None = None,
    ray_logs: bool = True,
    torch_dumps: bool = True,
    patterns: Sequence[str] = (),
    address: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[NodePart]:
    """Run ``nccllog extract`` on every alive node of the Ray cluster (one task per node, pinned
    with node-affinity scheduling) and return each node's part, sorted by host and node id.

    Connects to ``address`` (default: the running cluster, ``ray.init(address="auto")``) unless
    Ray is initialised already. ``progress(done, total)`` is called as nodes finish. A node whose
    task fails gives a NodePart with ``error`` set; the others are still returned.
    """
    ray = require_ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    started = not ray.is_initialized()
    if started:
        ray.init(address=address or "auto", logging_level="ERROR", log_to_driver=False)
    try:
        return _run(
            ray, NodeAffinitySchedulingStrategy, paths, node_paths, ray_logs, torch_dumps, patterns, progress
        )
    finally:
        if started:  # connected here: leave the cluster as it was found
            ray.shutdown()


def _run(
    ray: Any,
    affinity: Any,
    paths: Sequence[str],
    node_paths: Mapping[str, Sequence[str]] | None,
    ray_logs: bool,
    torch_dumps: bool,
    patterns: Sequence[str],
    progress: Callable[[int, int], None] | None,
) -> list[NodePart]:
    nodes = sorted((n for n in ray.nodes() if n.get("Alive")), key=lambda n: n["NodeID"])
    task = ray.remote(num_cpus=0, max_retries=0)(extract_here)
    pending: dict[Any, str] = {}
    for node in nodes:
        plan = _Plan(
            paths=tuple(paths),
            ray_logs=ray_logs,
            torch_dumps=torch_dumps,
            patterns=tuple(str(p) for p in patterns),
            extra=tuple((node_paths or {}).get(node["NodeID"], ())),
        )
        strategy = affinity(node_id=node["NodeID"], soft=False)
        pending[task.options(scheduling_strategy=strategy).remote(plan)] = node["NodeID"]
    out: list[NodePart] = []
    if progress is not None:
        progress(0, len(pending))
    waiting = list(pending)
    while waiting:
        done, waiting = ray.wait(waiting, num_returns=1)
        for ref in done:
            try:
                out.append(ray.get(ref))
            except Exception as exc:  # a node died or its task failed: say so, keep the others
                first = str(exc).strip().splitlines()[-1][:300] if str(exc).strip() else type(exc).__name__
                out.append(NodePart(node_id=pending[ref], host="?", data=None, error=first))
        if progress is not None:
            progress(len(out), len(pending))
    return sorted(out, key=lambda p: (p.host, p.node_id))


def extract_here(plan: _Plan) -> NodePart:
    """The task on one node: extract what this node holds into a part."""
    import ray

    from nccllog import parts

    node_id = ray.get_runtime_context().get_node_id()
    host = socket.gethostname().split(".")[0] or node_id[:12]
    inputs = node_inputs(plan, _session_dir())
    got = parts.extract(inputs, patterns=plan.patterns, prefix=host)  # no inputs: an empty part
    return NodePart(
        node_id=node_id,
        host=host,
        data=parts.to_bytes(got),
        files=len(got.read.stats),
        lines=got.read.lines.height,
        bytes_read=sum(st.bytes for st in got.read.stats),
        inputs=tuple(inputs),
    )


def node_inputs(plan: _Plan, session_dir: str | None) -> list[str]:
    """The paths to read on this node: those given, this node's own (``NCCLLOG_LOGS``, the
    mapping), Ray's worker logs and Flight Recorder dumps, each that exists, once."""
    wanted = [*plan.paths, *plan.extra]
    env = os.environ.get(ENV_LOGS, "")
    wanted += [p for p in env.split(os.pathsep) if p]
    if plan.ray_logs and session_dir:
        logs = Path(session_dir) / "logs"
        wanted += sorted(glob.glob(str(logs / "worker-*.out")) + glob.glob(str(logs / "worker-*.err")))
    if plan.torch_dumps:
        cache = Path.home() / ".cache" / "torch"
        wanted += sorted(str(p) for p in cache.glob("*rank*") if p.is_file())
        for var in _DUMP_ENV:
            prefix = os.environ.get(var)
            if prefix:
                wanted += sorted(glob.glob(glob.escape(prefix) + "*"))
    seen: set[str] = set()
    out = []
    for p in wanted:
        if p not in seen and (os.path.lexists(p) or glob.has_magic(p)):
            seen.add(p)
            out.append(p)
    return out


def _session_dir() -> str | None:
    """This node's Ray session folder (its ``logs/`` holds the workers' stdout and stderr)."""
    try:
        import ray

        node = ray._private.worker.global_worker.node  # no public API names it
        return str(node.get_session_dir_path())
    except Exception:
        latest = os.path.join(os.environ.get("RAY_TMPDIR", "/tmp/ray"), "session_latest")
        return latest if os.path.isdir(latest) else None
