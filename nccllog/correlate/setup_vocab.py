"""The setup vocabulary (``setup_vocab.toml``) and what it says about interfaces and addresses.

Knowledge, not rules: which interface names are virtual or loopback, which networks cannot carry
traffic between nodes, which addresses cannot be a rendezvous host. ``setup`` uses it.
"""

from __future__ import annotations

import ipaddress
import tomllib
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from typing import Any

import regex

from nccllog.correlate import wording as w

_IFACE = regex.compile(r"(?:\[\d+\])?(?P<name>[^\s:\[\]<]+):(?P<addr>[^\s<]+)<\d+>")


@dataclass(frozen=True)
class Vocab:
    """The contents of setup_vocab.toml."""

    virtual_prefixes: tuple[str, ...]
    loopback_names: tuple[str, ...]
    unroutable: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]
    container_bridge: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]
    ib_unavailable: tuple[str, ...]
    ib_env_prefixes: tuple[str, ...]
    ib_disabled_env: tuple[str, ...]
    system_not_ready: tuple[str, ...]
    host_paths: tuple[str, ...]
    shm_prefix: str = "/dev/shm/"


@cache
def vocab() -> Vocab:
    """Load the vocabulary once."""
    text = resources.files("nccllog.correlate").joinpath("setup_vocab.toml").read_text(encoding="utf-8")
    data = tomllib.loads(text)
    nets = data["addresses"]
    return Vocab(
        virtual_prefixes=tuple(data["interfaces"]["virtual_prefixes"]),
        loopback_names=tuple(data["interfaces"]["loopback_names"]),
        unroutable=tuple(ipaddress.ip_network(n) for n in nets["unroutable"]),
        container_bridge=tuple(ipaddress.ip_network(n) for n in nets["container_bridge"]),
        ib_unavailable=tuple(data["ib"]["unavailable"]),
        ib_env_prefixes=tuple(data["ib"]["expected_env_prefixes"]),
        ib_disabled_env=tuple(data["ib"]["disabled_env"]),
        system_not_ready=tuple(data["cuda"]["system_not_ready"]),
        host_paths=tuple(data["topology"]["host_paths"]),
    )


def parse_ifaces(row: dict[str, Any]) -> list[tuple[str, str]]:
    """(interface, address) pairs a NET/Socket / Bootstrap / OOB line lists."""
    text = row.get("ifaces")
    if text:
        return [(m["name"], m["addr"]) for m in _IFACE.finditer(str(text))]
    if row.get("iface") and row.get("ip"):
        return [(str(row["iface"]), str(row["ip"]))]
    return []


@lru_cache(maxsize=65536)  # every rank of a host logs its address: parsed once per address
def ip_of(addr: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address in ``addr`` (``fe80::1%eth0``, ``[::1]`` and ``10.0.0.1`` forms), or None."""
    try:
        return ipaddress.ip_address(addr.split("%", 1)[0].strip("[]"))
    except ValueError:
        return None


def iface_problem(name: str, addr: str, shared: dict[str, set[str]]) -> str | None:
    """Why NCCL traffic between nodes cannot go over this interface/address, or None."""
    v = vocab()
    if name in v.loopback_names:
        return f"{name} is the loopback interface"
    if name.startswith(v.virtual_prefixes):
        return f"{name} is a virtual (container/bridge) interface"
    ip = ip_of(addr)
    if ip is None:
        return None
    if any(ip in n for n in v.unroutable if n.version == ip.version):
        kind = "link-local" if ip.is_link_local else "loopback" if ip.is_loopback else "unspecified"
        return f"{addr.split('%', 1)[0]} on {name} is a {kind} address"
    hosts = shared.get(str(ip), set())
    if len(hosts) > 1:
        bridge = any(ip in n for n in v.container_bridge if n.version == ip.version)
        return f"{ip} on {name} is the same address on {w.host_list(sorted(hosts))}" + (
            " (Docker's default bridge)" if bridge else ""
        )
    return None


def bad_master_addr(addr: str) -> str | None:
    """Why an address cannot be a rendezvous host: a netmask, a broadcast or the unspecified address."""
    ip = ip_of(addr)
    if ip is None:
        return None
    if ip.is_unspecified:
        return "the unspecified address"
    if isinstance(ip, ipaddress.IPv4Address):
        n = int(ip)
        if n == 0xFFFFFFFF:
            return "the broadcast address"
        inverted = ~n & 0xFFFFFFFF
        if n >> 24 == 0xFF and inverted & (inverted + 1) == 0:
            return "a netmask"
    return None
