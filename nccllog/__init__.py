"""nccllog: name the culprit rank and cause of a crashed NCCL / torch.distributed job from its logs."""

from __future__ import annotations

from nccllog.model import Incident
from nccllog.pipeline import InputError, analyze, analyze_text
from nccllog.render import render

__version__ = "0.1.0"
__all__ = ["Incident", "InputError", "__version__", "analyze", "analyze_text", "render"]
