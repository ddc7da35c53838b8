"""The exceptions nccllog raises on purpose: one base class, ``nccllog.Error``, so a caller needs
one ``except``; the command line prints any of them as one line and exits 2.

Messages are safe to print: names taken from the input (file names, paths) are shown with
control and reordering characters escaped (nccllog.text_safety), and cut in the middle when long.
"""

from __future__ import annotations

from collections.abc import Sequence

from nccllog.model import Skipped
from nccllog.text_safety import clean, middle_cut

NAME_LIMIT = 120  # characters of one file name in a message; longer names are cut in the middle
MAX_LISTED = 5  # skipped inputs named in one message; the rest are counted


class Error(Exception):
    """Base class of every error nccllog raises on purpose (input, pattern library, usage)."""


class InputError(Error):
    """Nothing analysable was given: every input is missing, unreadable, binary or empty.

    ``skipped`` lists each input that was skipped, with its reason (raw names, for programs)."""

    def __init__(self, message: str, skipped: Sequence[Skipped] = ()) -> None:
        super().__init__(message)
        self.skipped = tuple(skipped)

    @classmethod
    def nothing(cls, skipped: Sequence[Skipped]) -> InputError:
        """``nothing to analyse (<name>: <reason>; …)``: every name cut, never a reason."""
        parts = [f"{shown_name(s.source)}: {s.reason}" for s in skipped[:MAX_LISTED]]
        if len(skipped) > MAX_LISTED:
            parts.append(f"and {len(skipped) - MAX_LISTED} more")
        return cls(f"nothing to analyse ({'; '.join(parts) or 'no input given'})", skipped)


class PatternLibraryError(Error):
    """The pattern library (built-in or ``patterns=`` directories) has problems; ``problems``
    lists every one, each with its file."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__(f"{len(problems)} problem(s) in the pattern library:\n" + "\n".join(problems))
        self.problems = list(problems)


class UsageError(Error, ValueError):
    """An argument nccllog cannot use: an unknown output format, an input of the wrong type.
    Also a ``ValueError``, which ``render`` raised for an unknown format before."""


def shown_name(name: str) -> str:
    """A file name for a message: control and reordering characters escaped, cut in the middle."""
    return middle_cut(clean(name), NAME_LIMIT)
