"""Hypothesis runs derandomized in CI (the same examples every run, so CI is never flaky); locally it
explores new examples each run. HYPOTHESIS_PROFILE=random forces exploration anywhere."""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("random")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "random"))
