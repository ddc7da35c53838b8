"""The known-variable table (variables.toml): which NCCL / PyTorch versions read which variable."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources

import regex

Version = tuple[int, ...]

VAR_NAME = regex.compile(r"\b(?:NCCL|TORCH)_[A-Z0-9_]*[A-Z0-9]\b")
# Prefixes whose every name the table is meant to cover; other TORCH_* names are only checked
# when the table lists them.
COVERED_PREFIXES = ("NCCL_", "TORCH_NCCL_", "TORCH_FR_")


def parse_version(text: str | None) -> Version | None:
    """'2.21.5' -> (2, 21, 5); '2.4.1+cu121' -> (2, 4, 1); None when no leading number."""
    if not text:
        return None
    m = regex.match(r"\s*(\d+(?:\.\d+)*)", text)
    return tuple(int(p) for p in m.group(1).split(".")) if m else None


def vstr(v: Version) -> str:
    return ".".join(str(p) for p in v)


def _cmp(a: Version, b: Version) -> int:
    """Compare at the precision of the shorter tuple (torch '2.2' covers 2.2.x)."""
    n = min(len(a), len(b))
    return (a[:n] > b[:n]) - (a[:n] < b[:n])


def at_least(v: Version, bound: Version) -> bool:
    return _cmp(v, bound) >= 0


def at_most(v: Version, bound: Version) -> bool:
    return _cmp(v, bound) <= 0


@dataclass(frozen=True)
class Variable:
    """One row of the table."""

    name: str
    owner: str  # nccl | torch | plugin | none
    status: str = "current"  # current | legacy | deprecated | removed | folk | plugin
    since: Version | None = None
    until: Version | None = None
    deprecated_since: Version | None = None
    replacement: str = ""
    replacement_since: Version | None = None
    pinned: bool = True
    note: str = ""

    @property
    def product(self) -> str:
        return {"nccl": "NCCL", "torch": "PyTorch"}.get(self.owner, "")

    def versions_text(self) -> str:
        """'NCCL 2.5.6+', 'PyTorch 2.2+', 'NCCL 2.3.5-2.3.7', '' when not read or not pinned."""
        if self.since is None or self.owner not in ("nccl", "torch"):
            return ""
        if self.until is not None:
            return f"{self.product} {vstr(self.since)}-{vstr(self.until)}"
        return f"{self.product} {vstr(self.since)}+"

    def reads(self, version: Version | None) -> bool | None:
        """Whether its owner at ``version`` reads it (None: version unknown or not pinned)."""
        if self.owner in ("none",):
            return False
        if self.owner == "plugin" or not self.pinned or self.since is None:
            return None
        if version is None:
            return None
        if not at_least(version, self.since):
            return False
        return not (self.until is not None and not at_most(version, self.until))

    def deprecated_at(self, version: Version | None) -> bool:
        """Still read but superseded at ``version`` (unknown version: only when always superseded)."""
        if self.status == "legacy":
            return (
                version is None or self.replacement_since is None or at_least(version, self.replacement_since)
            )
        if self.status == "deprecated" and self.deprecated_since is not None:
            return version is not None and at_least(version, self.deprecated_since)
        return False


@dataclass(frozen=True)
class Table:
    variables: dict[str, Variable]
    newest: dict[str, Version]

    def get(self, name: str) -> Variable | None:
        return self.variables.get(name)


@cache
def table() -> Table:
    """The packaged table, loaded once."""
    data = tomllib.loads(resources.files("nccllog.advice").joinpath("variables.toml").read_text("utf-8"))
    out: dict[str, Variable] = {}
    for row in data["variable"]:
        out[row["name"]] = Variable(
            name=row["name"],
            owner=row["owner"],
            status=row.get("status", "current"),
            since=parse_version(row.get("since")),
            until=parse_version(row.get("until")),
            deprecated_since=parse_version(row.get("deprecated_since")),
            replacement=row.get("replacement", ""),
            replacement_since=parse_version(row.get("replacement_since")),
            pinned=row.get("pinned", True),
            note=row.get("note", ""),
        )
    newest = {
        "nccl": parse_version(data["newest_nccl"]) or (),
        "torch": parse_version(data["newest_torch"]) or (),
    }
    return Table(out, newest)


def owner_version(var: Variable, versions: dict[str, Version | None]) -> Version | None:
    """The detected version of the product that reads ``var`` ('nccl' or 'torch'), if known."""
    return versions.get(var.owner) if var.owner in ("nccl", "torch") else None


def is_covered(name: str) -> bool:
    """Whether the table claims to know every variable of this name's family."""
    return name.startswith(COVERED_PREFIXES)
