"""What the logs say about the software: frameworks, launcher, versions (exact and inferred)."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

import polars as pl
import regex

from nccllog.advice.variables import Version, parse_version, vstr
from nccllog.match.library import Library

# Module paths or names in a matched line that identify a framework (tracebacks, Ray task reprs,
# launcher command lines).
_MODULES = regex.compile(
    r"(?<![\w.-])(verl|openrlhf|deepspeed|accelerate|megatron|lightning|pytorch_lightning|trl|vllm|sglang)[./]"
)
_ALIASES = {"pytorch_lightning": "lightning"}
_TORCH_FSDP = regex.compile(r"torch[/\\]distributed[/\\]fsdp[/\\]")
_VERL_TEXT = regex.compile(r"\(WorkerDict pid=|\bmain_ppo\.TaskRunner\b")
# OpenRLHF's Ray actor classes (openrlhf/trainer/ray), as Ray prefixes or actor names.
_OPENRLHF_TEXT = regex.compile(r"\b(?:ActorModel|ReferenceModel|CriticModel|RewardModel)RayActor\b")
_DEEPSPEED_ARG = regex.compile(r"'--deepspeed'")
# Ops that only parameter-sharding data parallelism issues in a plain torchrun job.
_SHARDED_OPS = (
    "_ALLGATHER_BASE",
    "_REDUCE_SCATTER_BASE",
    "ALLGATHER_INTO_TENSOR_COALESCED",
    "REDUCE_SCATTER_TENSOR_COALESCED",
)
# Literal text that every match of the regexes above contains: the lines without any (nearly all
# of a large job's) are not searched, one pass in polars instead of five regexes per line.
_TEXT_WORDS = (
    "WorkerDict pid=",
    "main_ppo.TaskRunner",
    "RayActor",
    "'--deepspeed'",
    *("verl", "openrlhf", "deepspeed", "accelerate", "megatron", "lightning", "trl", "vllm", "sglang"),
    "fsdp",
)
_TORCH_RANGE = regex.compile(r"^torch (\d+\.(?:\d+|x))(?:-(\d+\.\d+))?(?:\s|$)")
_ENGINES = {"vllm": "vllm", "sglang": "sglang", "sglang-diffusion": "sglang"}

ORDER = (
    "verl",
    "openrlhf",
    "deepspeed",
    "megatron",
    "accelerate",
    "lightning",
    "trl",
    "fsdp",
    "ddp",
    "vllm",
    "sglang",
)


@dataclass
class Detected:
    """Frameworks with the evidence for each, the launcher, and versions."""

    frameworks: dict[str, list[str]] = field(default_factory=dict)  # name -> why
    launcher: str | None = None
    versions: dict[str, tuple[str, ...]] = field(default_factory=dict)
    torch_range: tuple[Version, Version] | None = None  # inferred from line formats
    nccl: Version | None = None
    torch: Version | None = None  # exact, or the lower bound of the inferred range
    torch_max: Version | None = None  # exact, or the upper bound of the inferred range

    def add(self, name: str, why: str) -> None:
        reasons = self.frameworks.setdefault(name, [])
        if why not in reasons:
            reasons.append(why)

    def ordered(self) -> tuple[str, ...]:
        return tuple(sorted(self.frameworks, key=lambda f: ORDER.index(f) if f in ORDER else len(ORDER)))


def _col(ev: pl.DataFrame, name: str) -> pl.Expr:
    return pl.col(name) if name in ev.columns else pl.lit(None)


def detect(events: pl.DataFrame, library: Library | None = None) -> Detected:
    """Read frameworks, launcher and versions off the events table."""
    d = Detected()
    if events.height == 0:
        return d
    pats = events["pattern"].fill_null("")
    producers = Counter(p.split(".", 1)[0] for p in pats.to_list() if p)
    _frameworks(events, d, library)
    d.launcher = _launcher(events, producers)
    _versions(events, d, library)
    return d


def _frameworks(ev: pl.DataFrame, d: Detected, library: Library | None) -> None:
    # Patterns of lines a framework's own code prints name it (their `framework` key).
    if library is not None:
        for pid in ev["pattern"].drop_nulls().unique().sort().to_list():
            pat = library.get(pid)
            if pat is not None and pat.framework:
                d.add(pat.framework, f"{pat.framework} log lines ({pid.split('.', 1)[0]}.* patterns)")
    if "framework" in ev.columns:
        for fw in ev["framework"].drop_nulls().unique().sort().to_list():
            key = _ENGINES.get(str(fw).lower(), str(fw).lower())
            d.add(key, f"a line printed by {fw}")
    texts = (
        ev.select("pattern", "text")
        .unique(subset="text", maintain_order=True)
        .filter(pl.col("text").str.contains_any(list(_TEXT_WORDS)))
        .iter_rows()
    )
    for pat, text in texts:
        if _VERL_TEXT.search(text):
            d.add("verl", "verl's Ray actors (WorkerDict / main_ppo.TaskRunner)")
        if _OPENRLHF_TEXT.search(text):
            d.add("openrlhf", "OpenRLHF's Ray actors (ActorModelRayActor, ...)")
        if (pat or "").startswith("deepspeed.") and _DEEPSPEED_ARG.search(text):
            d.add("deepspeed", "the DeepSpeed launcher started the script with --deepspeed")
        for m in _MODULES.finditer(text):
            name = _ALIASES.get(m.group(1), m.group(1))
            d.add(name, f"module path {m.group(0)!r} in a log line")
        if _TORCH_FSDP.search(text):
            d.add("fsdp", "a traceback through torch.distributed.fsdp")
    if "op" in ev.columns and not ({"deepspeed", "megatron"} & d.frameworks.keys()):
        ops = set(ev.filter(pl.col("signal") == "collective_timeout")["op"].drop_nulls().to_list())
        sharded = sorted(ops & set(_SHARDED_OPS))
        if sharded:
            d.add(
                "fsdp", f"sharded-parameter collectives ({', '.join(sharded)}) without DeepSpeed or Megatron"
            )


def _launcher(ev: pl.DataFrame, producers: Counter[str]) -> str | None:
    inner = None
    if producers.get("deepspeed") or producers.get("pdsh"):
        inner = "deepspeed"
    elif producers.get("torchrun"):
        inner = "torchrun"
    elif ev.filter(pl.col("pattern").fill_null("").str.starts_with("torch.mp_spawn")).height:
        inner = "mp-spawn"
    # Only Ray's own lines count: vLLM's multiprocessing workers print a look-alike `(Name pid=N)` prefix.
    ray = (
        producers.get("ray")
        or ev.filter(pl.col("text").fill_null("").str.contains(r"^\(raylet[,)]|^\(WorkerDict pid=")).height
    )
    outer = "ray" if ray else ("slurm" if producers.get("slurm") else None)
    if inner and outer:
        return f"{inner} under {outer}"
    return inner or outer


def _versions(ev: pl.DataFrame, d: Detected, library: Library | None) -> None:
    nccl_main: list[str] = []
    engine: dict[str, list[str]] = defaultdict(list)
    rows = ev.filter(_col(ev, "nccl_version").is_not_null()).select(
        _col(ev, "nccl_version").alias("v"), _col(ev, "framework").alias("fw")
    )
    for v, fw in rows.iter_rows():
        (engine[f"nccl ({fw})"] if fw else nccl_main).append(v)
    if nccl_main:
        d.versions["nccl"] = tuple(dict.fromkeys(sorted(nccl_main, key=lambda s: parse_version(s) or ())))
        d.nccl = parse_version(d.versions["nccl"][0])
    for k, vs in engine.items():
        d.versions[k] = tuple(dict.fromkeys(vs))
    if d.nccl is None and engine:
        d.nccl = parse_version(next(iter(engine.values()))[0])
    cuda = ev["cuda_version"].drop_nulls().unique().sort().to_list() if "cuda_version" in ev.columns else []
    if cuda:
        d.versions["cuda (NCCL built with)"] = tuple(cuda)
    if "cuda_driver" in ev.columns:
        drv = sorted(set(ev["cuda_driver"].drop_nulls().to_list()))
        if drv:
            d.versions["cuda driver"] = tuple(driver_text(v) for v in drv)
    torch_seen = (
        ev["torch_version"].drop_nulls().unique().sort().to_list() if "torch_version" in ev.columns else []
    )
    if torch_seen:
        d.versions["torch"] = tuple(sorted(torch_seen))
        d.torch = parse_version(d.versions["torch"][0])
        d.torch_max = parse_version(d.versions["torch"][-1])
    elif library is not None:
        rng = torch_range(ev, library)
        if rng:
            d.torch_range = rng
            lo, hi = rng
            span = vstr(lo) if lo == hi else f"{vstr(lo)}-{vstr(hi)}"
            d.versions["torch"] = (f"{span} (from the log formats)",)
            # The lower bound decides which variables exist: a variable read from ``lo`` on is read.
            d.torch, d.torch_max = lo, hi


def driver_text(v: int) -> str:
    """cudaDriverVersion 12040 -> '12.4'."""
    return f"{v // 1000}.{(v % 1000) // 10}"


def torch_range(ev: pl.DataFrame, library: Library) -> tuple[Version, Version] | None:
    """Intersect the torch version ranges of the PyTorch patterns that matched (None if they disagree)."""
    lo: Version = (0,)
    hi: Version = (99,)
    seen = False
    for pid in ev["pattern"].drop_nulls().unique().sort().to_list():
        pat = library.get(pid)
        m = _TORCH_RANGE.match(pat.versions) if pat else None
        if not m:
            continue
        a = parse_version(m.group(1).replace(".x", ".0")) or (0,)
        b = parse_version(m.group(2)) if m.group(2) else (a if not m.group(1).endswith(".x") else (a[0], 99))
        if b is None:
            continue
        seen = True
        lo, hi = max(lo, a), min(hi, b)
    # A lower bound below the oldest torch inspected (1.7) says nothing.
    if not seen or lo > hi or lo < (1, 7):
        return None
    return lo, hi
