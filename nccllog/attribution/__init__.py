"""Attribution: which rank, host, process and time each line belongs to.

Per line, ``layers`` reads the prefix layers launchers and loggers put in front of a message
(declared in ``layers.toml``), ``paths`` reads what a file's path says; the matcher hands both
to ``resolve`` in the internal columns of ``columns``. ``resolve`` then weighs all the evidence
of the data set in pure passes (hosts, world, processes, units, nodes, assign, years).
"""

from nccllog.attribution.columns import INTERNAL_SCHEMA, internal_values
from nccllog.attribution.resolve import Topology, resolve
from nccllog.attribution.rows import MAX_RANKS

__all__ = ["INTERNAL_SCHEMA", "MAX_RANKS", "Topology", "internal_values", "resolve"]
