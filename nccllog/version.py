"""The installed package's version, from its metadata (one place: pyproject.toml)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("nccllog")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"
