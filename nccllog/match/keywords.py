"""Which lines the reader keeps, chosen from the pattern library: the keywords it always keeps, the
high-volume ones it samples per writer, and how many of those it keeps."""

from __future__ import annotations

from nccllog.match.library import Library

# Words that make an unmatched line worth reporting as an unknown template. They are also
# prefilter keywords, so such lines reach the matcher.
ALERT_WORDS: tuple[str, ...] = (
    "NCCL WARN",
    "ERROR",
    "Error",
    "error:",
    "FATAL",
    "Fatal",
    "Traceback",
    "Exception",
    "failed",
    "Failed",
    "[E",
    "[F",
    "[W",
    "Killed",
    "Segmentation fault",
    "Aborted",
)


def prefilter_keywords(library: Library) -> list[str]:
    """The keywords whose lines the reader always keeps: the library's plus the alert words.

    Keywords that only high-volume patterns use are left out; see ``sampled_keywords``.
    """
    sampled = set(sampled_keywords(library))
    return sorted((set(library.keywords) - sampled) | set(ALERT_WORDS))


def sampled_keywords(library: Library) -> list[str]:
    """Keywords used only by high-volume patterns: the reader keeps the last such lines per file."""
    normal = {k for p in library.patterns if not p.high_volume for k in p.keywords}
    return sorted(
        {k for p in library.patterns if p.high_volume for k in p.keywords} - normal - set(ALERT_WORDS)
    )


def sampled_keep(library: Library) -> dict[str, int]:
    """High-volume keywords whose patterns ask the reader to keep more (or fewer) last lines per writer
    than its default (``keep_last``); the largest ask wins."""
    sampled = set(sampled_keywords(library))
    out: dict[str, int] = {}
    for p in library.patterns:
        if p.high_volume and p.keep_last is not None:
            for k in p.keywords:
                if k in sampled:
                    out[k] = max(out.get(k, 0), p.keep_last)
    return dict(sorted(out.items()))


def sampled_first(library: Library) -> list[str]:
    """High-volume keywords whose patterns ask the reader to keep each writer's first lines as well
    as its last (``keep_first``: where an NCCL error trace starts is where the failure did)."""
    sampled = set(sampled_keywords(library))
    return sorted(
        {k for p in library.patterns if p.high_volume and p.keep_first for k in p.keywords} & sampled
    )
