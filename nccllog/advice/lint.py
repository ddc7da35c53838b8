"""The settings lint: every environment setting seen in the logs against the variables the
detected NCCL / PyTorch versions read."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import polars as pl
import regex

from nccllog.advice.detect import Detected
from nccllog.advice.variables import Variable, is_covered, table, vstr
from nccllog.model import SettingFinding

# `KEY: value` pairs of PyTorch's ProcessGroupNCCL environment dump (torch.pg_environments).
_DUMP_PAIR = regex.compile(r"\b((?:TORCH|NCCL)_[A-Z0-9_]+): ([^,\s]+)")
_DEPRECATED_NEW = regex.compile(r"is deprecated; use (TORCH_[A-Z0-9_]+) instead")
# NCCL logs plugin loading; these say it fell back to its internal network.
_INTERNAL_NET = regex.compile(r"No plugin found|Using internal|Could not find")
_LOADED_NET = regex.compile(r"Loaded (?:net|collnet) plugin|Plugin name set by env")


@dataclass
class Seen:
    """One variable as the logs show it."""

    name: str
    values: list[str] = field(default_factory=list)
    origins: set[str] = field(default_factory=set)  # nccl | torch_warning | nccl_unused | torch_dump | env
    sources: list[str] = field(default_factory=list)
    replacement_hint: str = ""

    def add(self, value: str | None, origin: str, where: str) -> None:
        if value is not None and value not in self.values:
            self.values.append(value)
        self.origins.add(origin)
        if len(self.sources) < 3 and where not in self.sources:
            self.sources.append(where)


@cache
def performance_rules() -> tuple[dict[str, Any], ...]:
    data = tomllib.loads(resources.files("nccllog.advice").joinpath("remediation.toml").read_text("utf-8"))
    return tuple(data.get("performance", ()))


def collect(events: pl.DataFrame) -> dict[str, Seen]:
    """Every setting the events show: NCCL's echo, PyTorch's deprecation warning and env dump, and
    any env_setting line with env_var/env_value (user patterns for `export` lines, env dumps)."""
    out: dict[str, Seen] = {}
    if events.height == 0 or "env_var" not in events.columns:
        return out
    value_col = pl.col("env_value") if "env_value" in events.columns else pl.lit(None, pl.String)
    rows = events.filter(
        (pl.col("signal") == "env_setting") | (pl.col("pattern") == "torch.pg_environments")
    ).select("pattern", "source", "line", "message", "env_var", value_col.alias("env_value"))
    for pat, src, line, msg, var, value in rows.sort("source", "line").iter_rows():
        where = f"{src}:{line}"
        if pat == "torch.pg_environments":
            for k, v in _DUMP_PAIR.findall(msg or ""):
                out.setdefault(k, Seen(k)).add(v, "torch_dump", where)
            continue
        if not var:
            continue
        origin = {
            "nccl.env_setting": "nccl",
            "torch.env_deprecated": "torch_warning",
            "nccl.env_unused": "nccl_unused",
        }
        seen = out.setdefault(var, Seen(var))
        seen.add(value, origin.get(pat or "", "env"), where)
        m = _DEPRECATED_NEW.search(msg or "")
        if m:
            seen.replacement_hint = m.group(1)
    return out


def ib_present(events: pl.DataFrame) -> bool:
    """Whether NCCL found or used InfiniBand/RoCE adapters anywhere in the job."""
    if events.height == 0:
        return False
    pats = set(events["pattern"].drop_nulls().unique().to_list())
    if pats & {"nccl.net_ib_devices"} or any(p.startswith("nccl.ib_") for p in pats):
        return True
    if "net" in events.columns:
        nets = {str(n) for n in events["net"].drop_nulls().unique().to_list()}
        return any(n.startswith("IB") for n in nets)
    return False


def plugin_state(events: pl.DataFrame) -> str | None:
    """'internal' when NCCL logged that it fell back to its own network, 'loaded' for a plugin."""
    rows = events.filter(pl.col("pattern") == "nccl.net_plugin")["message"].drop_nulls().to_list()
    if any(_LOADED_NET.search(m) for m in rows):
        return "loaded"
    if any(_INTERNAL_NET.search(m) for m in rows):
        return "internal"
    return None


def lint(
    seen: dict[str, Seen], det: Detected, *, ib: bool = False, plugin: str | None = None
) -> list[SettingFinding]:
    """A finding for every setting that is unknown, deprecated, misplaced or hurts performance."""
    out: list[SettingFinding] = []
    for name in sorted(seen):
        s = seen[name]
        if s.origins == {"torch_dump"}:
            continue  # PyTorch's own effective values, not user settings
        value = s.values[0] if s.values else ""
        f = _status(s, det, plugin)
        if f is not None:
            out.append(
                SettingFinding(
                    name=name,
                    value=value,
                    status=f[0],
                    message=f[1],
                    replacement=f[2],
                    sources=tuple(s.sources),
                )
            )
        for rule in performance_rules():
            if rule["name"] == name and value.upper() in rule["values"] and (rule.get("needs") != "ib" or ib):
                out.append(
                    SettingFinding(
                        name=name,
                        value=value,
                        status="performance",
                        message=rule["message"],
                        replacement=rule.get("replacement"),
                        sources=tuple(s.sources),
                    )
                )
    return out


def _status(s: Seen, det: Detected, plugin: str | None) -> tuple[str, str, str | None] | None:
    var = table().get(s.name)
    if "nccl_unused" in s.origins:
        return (
            "unknown",
            f"NCCL itself reports {s.name} as unused or deprecated in this version.",
            var.replacement or None if var else None,
        )
    if var is None:
        if "nccl" in s.origins or "torch_warning" in s.origins or not is_covered(s.name):
            return None  # NCCL (or PyTorch) logged that it read it: it exists in this version
        return (
            "unknown",
            f"{s.name} is not a variable nccllog knows for NCCL 2.3.5-2.30.7 or PyTorch 1.7-2.15; NCCL ignores "
            "NCCL_* names it does not read, so check the spelling against your version's documentation.",
            None,
        )
    if var.status == "folk":
        return ("unknown", var.note, var.replacement or None)
    if var.status == "plugin":
        if plugin == "internal":
            return (
                "unknown",
                f"{var.note} This job's NCCL logged that it loaded no network plugin, so the setting had no effect.",
                var.replacement,
            )
        return ("misplaced", var.note, var.replacement)
    if var.owner == "torch" and s.name.startswith("NCCL_"):
        return _torch_alias(s, var, det)
    return _versioned(s, var, det)


def _torch_alias(s: Seen, var: Variable, det: Detected) -> tuple[str, str, str | None] | None:
    replacement = s.replacement_hint or var.replacement
    if "torch_warning" in s.origins or var.deprecated_at(det.torch):
        where = f"torch {vstr(det.torch)}" if det.torch else "this torch (it printed the deprecation warning)"
        return ("deprecated", f"{var.note} In {where} use {replacement}.", replacement)
    if det.torch is not None and var.deprecated_since and det.torch < var.deprecated_since:
        return None  # the right name before torch 2.2
    return ("misplaced", f"{var.note} Use {replacement} on torch 2.2 and later.", replacement)


def _versioned(s: Seen, var: Variable, det: Detected) -> tuple[str, str, str | None] | None:
    # A variable is "not read" only if even the newest version the logs allow does not read it.
    version = det.nccl if var.owner == "nccl" else det.torch_max
    logged = "nccl" in s.origins
    if var.deprecated_at(det.nccl if var.owner == "nccl" else det.torch):
        return (
            "deprecated",
            var.note or f"{s.name} is superseded by {var.replacement}.",
            var.replacement or None,
        )
    reads = var.reads(version)
    if reads is False and not logged and version is not None:
        span = var.versions_text()
        if var.until is not None and version > var.until:
            return (
                "deprecated",
                f"{var.product} {vstr(version)} no longer reads {s.name} (read by {span}). {var.note}".strip(),
                var.replacement or None,
            )
        return (
            "unknown",
            f"{var.product} {vstr(version)} does not read {s.name} yet (read by {span}).",
            None,
        )
    return None
