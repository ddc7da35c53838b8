"""Bytes to UTF-8 text before line splitting: a leading hole of NULs, and UTF-16 decided per block.

A file that a process kept writing while logrotate's ``copytruncate`` (or a crash) truncated it
starts with a hole: a run of NUL bytes, then text. The hole is skipped (and reported), the rest read.

Encodings are decided per block and, inside a block that holds NUL bytes, per run: UTF-16 text
(ASCII in UTF-16 is a NUL in every other byte) is found as runs of such pairs and transcoded to
UTF-8, whatever comes before or after it, so a UTF-16 part followed by a UTF-8 part (PowerShell
appending to a log, a Windows tool's output inside a Linux log) loses neither. A block without
NUL bytes, the usual case, passes through untouched.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

MIN_HOLE = 16  # a shorter leading NUL run is left alone (UTF-16-BE text starts with one NUL)
_MERGE_GAP = 8  # UTF-16 runs split by a few non-Latin-1 characters are one run (a longer gap
# may be a UTF-8 line between two UTF-16 parts)
# A BOM only counts right before a run; the BE branch with its BOM comes first so that
# `\xfe\xff\x00a…` is not read as little-endian from the `\xff`.
_RUNS = re.compile(
    rb"\xfe\xff(?P<bbe>(?:\x00[^\x00])+)|\xff\xfe(?P<ble>(?:[^\x00]\x00)+)"
    rb"|(?P<le>(?:[^\x00]\x00){4,})|(?P<be>(?:\x00[^\x00]){4,})"
)


@dataclass
class Decoded:
    """What decoding one source found: the hole skipped and the encodings seen."""

    hole: int = 0  # leading NUL bytes skipped
    only_nuls: bool = False  # the source held nothing but NUL bytes
    utf16: set[str] = field(default_factory=set)  # "utf-16" (after a BOM), "utf-16-le", "utf-16-be"
    utf8_bytes: int = 0  # bytes outside UTF-16 runs in blocks that had some
    replacements: int = 0  # characters UTF-16 decoding replaced

    @property
    def encoding(self) -> str:
        """How the source was decoded, in words ("utf-8", "utf-16-le", "utf-16-le and utf-8")."""
        if not self.utf16:
            return "utf-8"
        names = " and ".join(sorted(self.utf16))
        return f"{names} and utf-8" if self.utf8_bytes > 16 else names


def normalise(blocks: Iterator[bytes], dec: Decoded) -> Iterator[bytes]:
    """``blocks`` with the leading NUL hole removed and UTF-16 runs transcoded to UTF-8."""
    started = False
    lead = 0  # leading NUL bytes seen so far
    for block in blocks:
        if not started:
            stripped = block.lstrip(b"\x00")
            lead += len(block) - len(stripped)
            if not stripped:
                continue
            started = True
            if lead >= MIN_HOLE:
                dec.hole, block = lead, stripped
            elif lead:
                block = b"\x00" * lead + stripped
        if b"\x00" in block:
            block = _transcode(block, dec)
        yield block
    if not started and lead:
        dec.hole, dec.only_nuls = lead, True


def _transcode(block: bytes, dec: Decoded) -> bytes:
    """The UTF-16 runs of ``block`` as UTF-8; everything else as it is."""
    runs: list[tuple[int, int, str]] = []  # (start, end, codec) of the UTF-16 bytes, BOM excluded
    for m in _RUNS.finditer(block):
        kind = next(k for k in ("bbe", "ble", "le", "be") if m.group(k) is not None)
        codec = "utf-16-be" if kind in ("bbe", "be") else "utf-16-le"
        start, end = m.start(kind), m.end(kind)
        gap = m.start() - runs[-1][1] if runs else -1
        if runs and runs[-1][2] == codec and gap % 2 == 0 and gap <= _MERGE_GAP:
            runs[-1] = (runs[-1][0], end, codec)
            continue
        runs.append((start, end, codec))
    codecs = {c for _, _, c in runs}
    if len(codecs) == 1 and sum(e - b for b, e, _ in runs) >= len(block) * 9 // 10:
        runs = [(runs[0][0], len(block), runs[0][2])]  # UTF-16 throughout, non-Latin-1 text included
    whole = _whole(block) if not runs else None
    if whole is not None:  # a short UTF-16 text, too short for runs of pairs
        runs.append((2 if block[:2] in (b"\xff\xfe", b"\xfe\xff") else 0, len(block), whole))
    if not runs:
        return block
    out: list[bytes] = []
    pos = 0
    for start, end, codec in runs:
        bom = 2 if start >= 2 and block[start - 2 : start] in (b"\xff\xfe", b"\xfe\xff") else 0
        out.append(block[pos : start - bom])
        dec.utf8_bytes += len(block[pos : start - bom].strip())
        text = block[start:end].decode(codec, "replace")
        dec.replacements += text.count("\ufffd")
        out.append(text.encode("utf-8", "surrogatepass"))
        dec.utf16.add("utf-16" if bom else codec)
        pos = end
    out.append(block[pos:])
    dec.utf8_bytes += len(block[pos:].strip())
    return b"".join(out)


def _whole(block: bytes) -> str | None:
    """The UTF-16 flavour of a block that is UTF-16 throughout (a NUL in every other byte, and
    only there; or a BOM then mostly such pairs), else None."""
    n = len(block)
    if n < 4:
        return None
    odd, even = block[1::2].count(b"\x00"), block[0::2].count(b"\x00")
    if block[:2] == b"\xff\xfe" and odd > n // 4:
        return "utf-16-le"
    if block[:2] == b"\xfe\xff" and even > n // 4:
        return "utf-16-be"
    if odd > n // 3 and even < n // 8:
        return "utf-16-le"
    if even > n // 3 and odd < n // 8:
        return "utf-16-be"
    return None
