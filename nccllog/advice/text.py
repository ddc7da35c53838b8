"""Check advice text: does it name a variable the detected versions do not read?"""

from __future__ import annotations

from dataclasses import dataclass

import regex

from nccllog.advice.detect import Detected
from nccllog.advice.variables import VAR_NAME, Version, at_least, is_covered, parse_version, table

_V = r"(\d+\.\d+(?:\.\d+)?)"
# A version condition written right after a variable: "(torch >= 2.2)", "before 2.2", "(2.30.3+)", "in torch >= 2.8".
_BEFORE = regex.compile(
    rf"^[^.;]{{0,40}}?\b(?:before|until|up to|older than|<=?)\s*(?:torch|PyTorch|NCCL)?\s*{_V}"
)
_SINCE = regex.compile(
    rf"^[^.;]{{0,40}}?(?:>=\s*|\bfrom\s+|\bsince\s+|\(\s*)(?:torch|PyTorch|NCCL)?\s*{_V}(\+|\b)"
)
_AFTER_NEG = regex.compile(
    r"^[^.;]{0,40}?(?:read by neither|not read|nothing reads|no component|is not an?\b|not an NCCL|no-op|->|is deprecated)"
)
_BEFORE_NEG = regex.compile(r"(?:unset|remove|rename|instead of|not)\s+(?:the\s+)?(?:variable\s+)?$", regex.I)


@dataclass(frozen=True)
class Violation:
    name: str
    why: str
    text: str


def _product(name: str) -> str:
    var = table().get(name)
    return var.owner if var else ("nccl" if name.startswith("NCCL_") else "torch")


def _condition_fails(after: str, name: str, det: Detected) -> bool:
    """True when a version condition follows the name and the detected versions do not meet it."""
    owner = _product(name)
    lo, hi = (det.nccl, det.nccl) if owner == "nccl" else (det.torch, det.torch_max)
    if "torch" in after[:50] or "PyTorch" in after[:50]:
        lo, hi = det.torch, det.torch_max
    elif "NCCL " in after[:50] and owner != "nccl":
        lo, hi = det.nccl, det.nccl
    m = _BEFORE.match(after)
    if m:
        bound = parse_version(m.group(1)) or ()
        return lo is None or at_least(lo, bound)  # written for other (or possibly other) versions
    m = _SINCE.match(after)
    if m and (m.group(2) == "+" or "(" not in m.group(0) or ">=" in m.group(0) or "from" in m.group(0)):
        bound = parse_version(m.group(1)) or ()
        return hi is None or not at_least(hi, bound)
    return False


def violations(text: str, det: Detected) -> list[Violation]:
    """Variables named by ``text`` (outside a version condition or a debunking) that are unknown,
    never read, or not read / superseded at the detected versions."""
    out = []
    for m in VAR_NAME.finditer(text):
        name = m.group(0)
        after = text[m.end() :]
        after = regex.sub(r"^=\S*", "", after)
        if _AFTER_NEG.match(after) or _BEFORE_NEG.search(text[max(0, m.start() - 30) : m.start()]):
            continue
        if _condition_fails(after, name, det):
            continue
        why = problem(name, det)
        if why:
            out.append(Violation(name, why, text))
    return out


def problem(name: str, det: Detected) -> str | None:
    """Why advising ``name`` is wrong for the detected versions, or None."""
    var = table().get(name)
    if var is None:
        return f"{name} is not in the known-variable table" if is_covered(name) else None
    if var.status == "folk":
        return f"{name} is read by nothing"
    if var.status == "plugin":
        return f"{name} is read only by a network plugin"
    if var.status == "removed" and det.nccl is None and var.owner == "nccl":
        return f"{name} is read only by {var.versions_text()}"
    low: Version | None = det.nccl if var.owner == "nccl" else det.torch
    high: Version | None = det.nccl if var.owner == "nccl" else det.torch_max
    if var.owner == "torch" and name.startswith("NCCL_") and (low is None or var.deprecated_at(low)):
        return f"{name} is PyTorch's pre-2.2 name of {var.replacement}"
    if var.deprecated_at(low):
        return f"{name} is superseded by {var.replacement}"
    if var.reads(high) is False:
        return f"{name} is not read by {var.product} at the detected version"
    return None
