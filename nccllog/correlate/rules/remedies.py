"""The rules' remediation steps, as data (``[remedy.*]`` of ``advice/remediation.toml``), chosen
by the versions the logs show.

A step is ``{text, vars, torch, nccl, when}``; ``torch``/``nccl`` gate it (``">=2.2"``, ``"<2.7"``,
``">=2.7,<2.8"``, or ``"unknown"``: only where the logs show no version). A gate on a version the
logs do not show holds, unless the step is ``only_known``: then it is given only where the logs
show a version it applies to. ``when`` lists flags the caller must pass (``"!flag"``: must not),
e.g. the launcher the advice detected.
"""

from __future__ import annotations

import operator
import tomllib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources

import polars as pl
import regex

Version = tuple[int, ...]
_GATE = regex.compile(r"\s*(>=|<=|<|>|==)\s*(\d+(?:\.\d+)*)\s*")
_OPS: dict[str, Callable[[Version, Version], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "<": operator.lt,
    ">": operator.gt,
    "==": operator.eq,
}


@dataclass(frozen=True)
class Step:
    """One remediation step and the versions it is written for."""

    text: str
    vars: tuple[str, ...] = ()
    torch: str | None = None
    nccl: str | None = None
    only_known: bool = False
    when: tuple[str, ...] = ()

    def applies(self, versions: Mapping[str, Version | None], flags: Collection[str] = ()) -> bool:
        """Whether the step holds for the versions shown (None: not shown) and the caller's flags."""
        for flag in self.when:
            if (flag[1:] in flags) if flag.startswith("!") else (flag not in flags):
                return False
        for product, gate in (("torch", self.torch), ("nccl", self.nccl)):
            if gate is None:
                continue
            v = versions.get(product)
            if gate == "unknown" or v is None:
                if v is not None or self.only_known:
                    return False
                continue
            if not _holds(v, gate):
                return False
        return True


def _holds(v: Version, gate: str) -> bool:
    """``v`` within every comma-separated bound of ``gate``."""
    for part in gate.split(","):
        m = _GATE.fullmatch(part)
        if m is None:
            raise ValueError(f"remediation.toml: gate {gate!r} is not like '>=2.2' or '>=2.7,<2.8'")
        bound = tuple(int(p) for p in m.group(2).split("."))
        if not _OPS[m.group(1)](v[: len(bound)], bound):  # torch 2.7.1 is within "<2.8" and ">=2.7"
            return False
    return True


@cache
def table() -> dict[str, tuple[Step, ...]]:
    """Every remedy of the table, its steps in order."""
    text = resources.files("nccllog").joinpath("advice", "remediation.toml").read_text("utf-8")
    raw = tomllib.loads(text).get("remedy", {})
    out = {}
    for name, steps in raw.items():
        out[name] = tuple(
            Step(
                text=s["text"],
                vars=tuple(s.get("vars", ())),
                torch=s.get("torch"),
                nccl=s.get("nccl"),
                only_known=bool(s.get("only_known", False)),
                when=tuple(s.get("when", ())),
            )
            for s in steps
        )
        for s in out[name]:
            s.applies({})  # a malformed gate fails here, at load
            s.applies({"torch": (0,), "nccl": (0,)})
    return out


def steps(
    name: str, versions: Mapping[str, Version | None], flags: Collection[str] = (), **values: str
) -> list[str]:
    """The texts of remedy ``name`` that hold for ``versions`` and ``flags``, ``{placeholders}`` filled in."""
    return [
        s.text.format(**values) if values else s.text for s in table()[name] if s.applies(versions, flags)
    ]


def step_of(text: str) -> Step | None:
    """The table's step whose text (placeholders filled in) is ``text``, or None."""
    return _by_text().get(text) or next((s for rx, s in _templates() if rx.fullmatch(text)), None)


@cache
def _by_text() -> dict[str, Step]:
    return {s.text: s for ss in table().values() for s in ss if "{" not in s.text}


@cache
def _templates() -> tuple[tuple[regex.Pattern[str], Step], ...]:
    out = []
    for ss in table().values():
        for s in ss:
            if "{" in s.text:
                parts = regex.split(r"\{\w+\}", s.text)
                out.append((regex.compile(".+?".join(regex.escape(p) for p in parts), regex.S), s))
    return tuple(out)


def _parse(text: str) -> Version | None:
    m = regex.match(r"\s*(\d+(?:\.\d+)*)", text)
    return tuple(int(p) for p in m.group(1).split(".")) if m else None


def shown_versions(ev: pl.DataFrame) -> dict[str, Version | None]:
    """The lowest torch and NCCL version the job's own processes print (an inference server's
    NCCL, marked by ``framework``, is not the job's); None where none is printed."""
    out: dict[str, Version | None] = {}
    own = ev.filter(pl.col("framework").is_null()) if "framework" in ev.columns else ev
    for product, col in (("torch", "torch_version"), ("nccl", "nccl_version")):
        seen = own[col].drop_nulls().unique().to_list() if col in own.columns else []
        parsed = [v for s in seen if (v := _parse(str(s))) is not None]
        out[product] = min(parsed) if parsed else None
    return out
