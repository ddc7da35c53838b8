"""Places: which host an address belongs to, which ranks a host runs, which rank owns a GPU.

NCCL names peers by their out-of-band address (``10.0.0.21<40917>``) or, for closed sockets since
2.12.10, by hostname (``gpu-node-12.cluster<56033>``). The bootstrap/NET lines of every process
(``Bootstrap : Using eth0:10.0.0.17<0>``, ``NET/IB : Using … ; OOB eth0:10.0.0.17<0>``) tie an
address to the host that printed it; Ray prefixes (``ip=``) do the same through the topology.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import polars as pl
import regex

from nccllog.attribution import Topology


@dataclass(frozen=True)
class AddressBook:
    """Address -> host, host -> ranks, (host, PCI bus) -> rank."""

    ip_host: dict[str, str] = field(default_factory=dict)
    host_ranks: dict[str, tuple[int, ...]] = field(default_factory=dict)
    rank_host: dict[int, str] = field(default_factory=dict)
    bus_rank: dict[tuple[str | None, int], int] = field(default_factory=dict)
    dev_rank: dict[tuple[str | None, int], int] = field(default_factory=dict)

    def host_of(self, addr: str | None) -> str | None:
        """The host an address or host name belongs to (None when nothing ties it to one)."""
        if not addr:
            return None
        a = strip_port(addr)
        if a in self.ip_host:
            return self.ip_host[a]
        if a.startswith("::ffff:") and a[7:] in self.ip_host:
            return self.ip_host[a[7:]]
        if a in self.host_ranks:
            return a
        short = a.split(".")[0]
        for h in self.host_ranks:
            if h.split(".")[0] == short and not short.isdigit():
                return h
        return None

    def ranks_on(self, host: str | None) -> tuple[int, ...]:
        """Ranks known to run on a host."""
        if host is None:
            return ()
        return self.host_ranks.get(host, ())

    def rank_of_pci(self, host: str | None, pci: str | None) -> int | None:
        """The rank whose GPU sits on this PCI bus (``0000:3b:00`` ~ NCCL busId ``3b000``)."""
        bus = pci_bus(pci)
        if bus is None:
            return None
        if host is not None and host not in self.host_ranks:
            host = None  # a host name no rank runs on says nothing
        if (host, bus) in self.bus_rank:
            return self.bus_rank[(host, bus)]
        hosts = {h for h, b in self.bus_rank if b == bus}
        if host is None and len(hosts) == 1:
            return self.bus_rank[(hosts.pop(), bus)]
        return None

    def rank_of_gpu(self, host: str | None, gpu: int | None) -> int | None:
        """The rank using CUDA device ``gpu`` on ``host`` (any host when only one could be meant)."""
        if gpu is None:
            return None
        if (host, gpu) in self.dev_rank:
            return self.dev_rank[(host, gpu)]
        if host is None:
            cands = {r for (h, d), r in self.dev_rank.items() if d == gpu}
            if len(cands) == 1 and len({h for h, _ in self.dev_rank}) == 1:
                return cands.pop()
        return None


# What users type in place of an address they redact before posting: `NODE2_IP`, `MASTER_ADDR`,
# `<master-ip>`, `x.x.x.x`, `***`. Host names have no underscores (RFC 1123) and no brackets.
_PLACEHOLDER = regex.compile(
    r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|<[^<>]{1,40}>|\{[^{}]{1,40}\}|(?:[xX*#?]{1,4}[.:]){1,7}[xX*#?]{1,4}|[xX*#?]{3,}"
)


def placeholder(addr: str) -> bool:
    """Whether an address is a stand-in a user typed when redacting a log, not a machine's."""
    return _PLACEHOLDER.fullmatch(addr.strip()) is not None


def strip_port(addr: str) -> str:
    """``10.0.0.21<40917>`` -> ``10.0.0.21``; ``[fe80::1]:29500`` -> ``fe80::1``."""
    a = addr.strip()
    if "<" in a:
        a = a.split("<", 1)[0]
    if a.startswith("[") and "]" in a:
        a = a[1 : a.index("]")]
    elif a.count(":") == 1:
        a = a.split(":", 1)[0]
    return a


def pci_bus(text: str | None) -> int | None:
    """The PCI bus number of ``0000:3b:00``, ``0000:3b:00.0``, ``3b000`` (NCCL busId) or ``3b``."""
    if not text:
        return None
    t = text.strip().lower()
    try:
        if ":" in t:
            parts = t.split(":")
            return int(parts[1], 16) if len(parts) >= 3 else int(parts[0], 16)
        if len(t) >= 4:  # NCCL busId: bus << 12 | device << 3 | function
            return int(t, 16) >> 12
        return int(t, 16)
    except ValueError:
        return None


def build(ev: pl.DataFrame, topology: Topology, world: tuple[int, ...]) -> AddressBook:
    """Collect every address/host/rank tie the events and the topology show."""
    ip_host: dict[str, str] = dict(topology.ip_host)
    for ip, host in (
        ev.filter(pl.col("ip").is_not_null() & pl.col("host").is_not_null())
        .select("ip", "host")
        .unique(maintain_order=True)
        .iter_rows()
    ):
        ip_host.setdefault(strip_port(ip), host)
    host_ranks: dict[str, set[int]] = defaultdict(set)
    for h, rs in topology.host_ranks.items():
        host_ranks[h].update(rs)
    rank_host: dict[int, str] = dict(topology.rank_host)
    pairs = (
        ev.filter(pl.col("rank").is_not_null() & pl.col("host").is_not_null())
        .group_by("rank", "host")
        .len()
        .sort("len", descending=True)
    )
    for rank, host, _n in pairs.iter_rows():
        rank_host.setdefault(rank, host)
    for rank, host in rank_host.items():
        host_ranks[host].add(rank)
    # The addresses hosts print are often IPs while the hosts are names; when the host column
    # itself is an IP (pdsh, Ray) that IP belongs to itself.
    for h in list(host_ranks):
        ip_host.setdefault(h, h)
    bus_rank: dict[tuple[str | None, int], int] = {}
    dev_rank: dict[tuple[str | None, int], int] = {}
    world_n = len(world) if world else None
    inits = ev.filter(pl.col("signal") == "init").filter(pl.col("rank").is_not_null())
    if world_n:
        inits = inits.filter(pl.col("nranks").is_null() | (pl.col("nranks") == world_n))
    for rank, host, bus, dev in inits.select("rank", "host", "bus_id", "cuda_dev").iter_rows():
        b = pci_bus(bus)
        if b is not None:
            bus_rank.setdefault((host, b), rank)
        if dev is not None:
            dev_rank.setdefault((host, dev), rank)
    return AddressBook(
        ip_host=ip_host,
        host_ranks={h: tuple(sorted(rs)) for h, rs in host_ranks.items()},
        rank_host=rank_host,
        bus_rank=bus_rank,
        dev_rank=dev_rank,
    )
