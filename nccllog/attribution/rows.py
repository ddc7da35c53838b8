"""The events table's columns as per-row lists, and the per-row readings every pass shares.

Attribution reads the table row by row (a few thousand rows: the lines that matched a
pattern), so the columns are turned into Python lists once, here.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import polars as pl

# No job has this many ranks (the largest have ~10^5): a rank, group size or world size beyond
# it is a garbled line, not evidence (and would make per-rank tables unbounded).
MAX_RANKS = 1 << 20

# A process: (host key, pid); the host key is None when no line names the host.
ProcessKey = tuple[str | None, int]

# Rank evidence that is the application's own word, weakest of all (see ``resolve``).
APP_KINDS = ("app", "text")
_LAUNCHER_SRC = (
    "torch/distributed/elastic/",
    "torch/distributed/run.py",
    "torch/distributed/launch",
    "torch/multiprocessing/",
    "deepspeed/launcher/",
)
_LAUNCHER_LOGGERS = ("torch.distributed.elastic", "torch.distributed.run", "torch.multiprocessing")


@functools.lru_cache(maxsize=1 << 16)
def is_ip(h: str) -> bool:
    """Whether a host string is an IPv4 or IPv6 address rather than a name."""
    parts = h.split(".")
    return (len(parts) == 4 and all(p.isdigit() for p in parts)) or (":" in h)


@functools.lru_cache(maxsize=1 << 16)
def host_key(h: str | None) -> str | None:
    """Host comparison key: IPs as they are, names lower-cased and cut at the first dot (as NCCL does)."""
    if not h:
        return None
    return h if is_ip(h) else h.split(".", 1)[0].lower()


def column(df: pl.DataFrame, name: str) -> list[Any]:
    """A column as a list, or all None when the table lacks it."""
    return df.get_column(name).to_list() if name in df.columns else [None] * df.height


def nonneg(values: list[Any], minimum: int = 0, maximum: int | None = MAX_RANKS) -> list[Any]:
    """Numbers below ``minimum`` (negative ranks, nranks 0 …) or above ``maximum`` are no evidence: None."""
    return [
        v if isinstance(v, int) and v >= minimum and (maximum is None or v <= maximum) else None
        for v in values
    ]


def nonneg_column(
    df: pl.DataFrame, name: str, minimum: int = 0, maximum: int | None = MAX_RANKS
) -> list[Any]:
    """``nonneg`` of a column, computed by polars where the column holds integers."""
    if name not in df.columns:
        return [None] * df.height
    col = pl.col(name)
    if not df.schema[name].is_integer():
        return nonneg(df.get_column(name).to_list(), minimum, maximum)
    within = col >= minimum if maximum is None else col.is_between(minimum, maximum)
    return df.select(pl.when(within).then(col)).to_series().to_list()


@dataclass(frozen=True)
class Rows:
    """The columns attribution reads, one list per column, one entry per event row."""

    n: int
    source: list[str]
    line: list[int]
    signal: list[Any]
    rank: list[Any]  # the line's own rank (prefix, NCCL [Rank G], or the text's own_rank)
    rank_kind: list[Any]
    local_rank: list[Any]
    host: list[Any]
    pid: list[Any]
    pg: list[Any]
    pg_desc: list[Any]
    pg_rank: list[Any]
    ip: list[Any]
    srun: list[Any]
    layers: list[tuple[str, ...]]
    src: list[Any]
    logger: list[Any]
    time: list[Any]
    year_known: list[Any]
    file_rank: list[Any]
    file_local: list[Any]
    file_host: list[Any]
    file_pid: list[Any]
    file_evidence: list[Any]
    file_year: list[Any]
    file_single: list[Any]
    file_attempt: list[Any]
    comm_rank: list[Any]
    nranks: list[Any]
    nnodes: list[Any]
    nproc_per_node: list[Any]
    field_ip: list[Any]
    master_addr: list[Any]
    node_rank: list[Any]
    target_rank: list[Any]
    target_local: list[Any]
    target_pid: list[Any]
    target_host: list[Any]
    world_size: list[Any]
    rank_map: list[Any]
    nccl_dev: list[Any]
    cuda_dev: list[Any]
    message: list[Any]
    # the unit of "one process's output": a file, or a torchrun worker folder attempt_N/<local>/
    unit: list[str]

    @classmethod
    def of(cls, ev: pl.DataFrame) -> Rows:
        """Read the columns of an events table that carries the internal columns."""

        def c(name: str) -> list[Any]:
            return column(ev, name)

        rank = nonneg_column(ev, "rank")
        rank_kind = c("_rank_kind")
        # A line that names its writer's rank in its text (`rank 2/16 …`, `… on rank 2...`) is
        # as weak as an application prefix: the application's word, not the launcher's.
        for i, r in enumerate(nonneg_column(ev, "own_rank")):
            if r is not None and rank[i] is None:
                rank[i] = r
                rank_kind[i] = "text"
        local = nonneg_column(ev, "local_rank")
        for i, lr in enumerate(nonneg_column(ev, "own_local_rank")):
            if lr is not None and local[i] is None:
                local[i] = lr
        source: list[str] = [s or "" for s in c("source")]
        file_local = nonneg_column(ev, "_file_local_rank")
        file_attempt = nonneg_column(ev, "_file_attempt")
        unit = [
            src.rsplit("/", 1)[0] + "/" if file_attempt[i] is not None and file_local[i] is not None else src
            for i, src in enumerate(source)
        ]
        return cls(
            n=ev.height,
            source=source,
            line=[x or 0 for x in c("line")],
            signal=c("signal"),
            rank=rank,
            rank_kind=rank_kind,
            local_rank=local,
            host=c("host"),
            pid=nonneg_column(ev, "pid", maximum=None),
            pg=c("pg"),
            pg_desc=c("_pg_desc"),
            pg_rank=nonneg_column(ev, "pg_rank"),
            ip=c("_ip"),
            srun=nonneg_column(ev, "_srun_task"),
            layers=[tuple(x.split(",")) if x else () for x in c("_layers")],
            src=c("_src"),
            logger=c("_logger"),
            time=c("time"),
            year_known=c("_year_known"),
            file_rank=nonneg_column(ev, "_file_rank"),
            file_local=file_local,
            file_host=c("_file_host"),
            file_pid=nonneg_column(ev, "_file_pid", maximum=None),
            file_evidence=c("_file_evidence"),
            file_year=c("_file_year"),
            file_single=c("_file_single"),
            file_attempt=file_attempt,
            comm_rank=nonneg_column(ev, "comm_rank"),
            nranks=nonneg_column(ev, "nranks", 1),
            nnodes=nonneg_column(ev, "nnodes", 1),
            nproc_per_node=nonneg_column(ev, "nproc_per_node", 1),
            field_ip=c("ip"),
            master_addr=c("master_addr"),
            node_rank=c("node_rank"),
            target_rank=nonneg_column(ev, "target_rank"),
            target_local=nonneg_column(ev, "target_local_rank"),
            target_pid=nonneg_column(ev, "target_pid", maximum=None),
            target_host=c("target_host"),
            world_size=nonneg_column(ev, "world_size", 1),
            rank_map=c("rank_map"),
            nccl_dev=nonneg_column(ev, "_nccl_dev"),
            cuda_dev=nonneg_column(ev, "cuda_dev"),
            message=c("message"),
            unit=unit,
        )

    def direct_text(self, i: int, key: ProcessKey | None = None) -> str:
        """How row i's own rank is stated, in words."""
        kind = self.rank_kind[i] or "prefix"
        r = self.rank[i]
        if kind == "nccl":
            return f"NCCL [Rank {r}] on the comm init line"
        if kind == "log_dist":
            return f"DeepSpeed log_dist [Rank {r}]"
        if kind == "app":
            return f"application prefix 'Rank {r}: '"
        if kind == "text":
            return f"the line names its writer: rank {r}"
        base = f"prefix [rank{r}]:"
        if key is not None:
            return f"{base} on a line of pid {key[1]}"
        return base

    def default_pg(self, i: int) -> bool:
        """Whether row i's process-group rank is in the default group (so a global rank)."""
        return self.pg[i] is not None and (self.pg[i] == "0" or self.pg_desc[i] == "default_pg")

    def line_rank(self, i: int) -> tuple[int | None, str]:
        """A global rank the line itself states (not the application prefix), with how."""
        if self.rank[i] is not None and (self.rank_kind[i] or "prefix") not in APP_KINDS:
            return self.rank[i], self.direct_text(i)
        if self.pg_rank[i] is not None and self.default_pg(i):
            return self.pg_rank[i], f"rank {self.pg_rank[i]} in the default process group ({self.pg[i]})"
        return None, ""

    def not_a_worker(self, i: int) -> bool:
        """Kernel, Ray system and launcher lines: written on a host, but by no rank."""
        lay = set(self.layers[i])
        if lay & {"syslog", "dmesg"}:
            return True
        if "ray" in lay and self.pid[i] is None:
            return True
        src_loc = self.src[i] or ""
        logger = self.logger[i] or ""
        return (
            any(s in src_loc for s in _LAUNCHER_SRC)
            or logger.startswith(_LAUNCHER_LOGGERS)
            or ("deepspeed" in lay and src_loc.startswith("launch.py"))
        )
