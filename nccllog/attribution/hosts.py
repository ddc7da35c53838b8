"""Pass 1, hosts: how each host is shown, which host an address is, and each row's process.

A host is compared by its key (``rows.host_key``); it is shown the way NCCL's header spells it
when any NCCL line names it, else as first seen. An address maps to a host only when one host
uses it (NCCL bootstrap and interface lines; a node-rank-0 launch script printing MASTER_ADDR).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from nccllog.attribution.rows import ProcessKey, Rows, host_key, is_ip


class DisplayNames:
    """Host key -> display name, learned while reading (the first NCCL-header spelling wins)."""

    def __init__(self, names: Mapping[str, str] | None = None, strong: frozenset[str] = frozenset()) -> None:
        self.names: dict[str, str] = dict(names or {})
        self.strong: set[str] = set(strong)

    def learn(self, h: str | None, strong: bool) -> str | None:
        """Register how a host is shown; return its key."""
        k = host_key(h)
        if k is None or h is None:
            return k
        if k not in self.names or (strong and k not in self.strong):
            self.names[k] = h if is_ip(h) else h.split(".", 1)[0]
            if strong:
                self.strong.add(k)
        return k

    def show(self, key: str | None) -> str | None:
        """How the host of a key is shown."""
        return None if key is None else self.names.get(key, key)

    def copy(self) -> DisplayNames:
        """An independent copy, for a later pass that learns more names."""
        return DisplayNames(self.names, frozenset(self.strong))


@dataclass(frozen=True)
class HostFacts:
    """What the data set says about hosts, and each row's host key and process key."""

    display: DisplayNames
    ip_host: dict[str, str]  # address -> host key, when one host uses it
    row_host: list[str | None]  # each row's host key
    row_process: list[ProcessKey | None]  # each row's (host, pid)
    notes: tuple[str, ...]

    def show(self, key: str | None) -> str | None:
        """How the host of a key is shown."""
        return self.display.show(key)

    def host_of(self, h: str | None) -> str | None:
        """The host key of a name or address (an address maps to its host when known)."""
        k = host_key(h)
        if k is not None and is_ip(k):
            return self.ip_host.get(k, k)
        return k


def resolve_hosts(rows: Rows) -> HostFacts:
    """Learn host display names and the address map, then each row's host and process keys."""
    display = DisplayNames()
    ip_host, notes = _address_map(rows, display)
    facts = HostFacts(display, ip_host, [], [], notes)
    row_host, row_process = _row_keys(rows, facts)
    return HostFacts(display, ip_host, row_host, row_process, notes)


def _address_map(rows: Rows, display: DisplayNames) -> tuple[dict[str, str], tuple[str, ...]]:
    seen: dict[str, set[str]] = defaultdict(set)
    for i in range(rows.n):
        h = rows.host[i] or rows.file_host[i]
        k = display.learn(h, "nccl" in rows.layers[i])
        if k is None or is_ip(k):
            continue
        if rows.signal[i] == "bootstrap" and rows.field_ip[i]:
            seen[rows.field_ip[i]].add(k)
        if rows.ip[i] and "nccl" in rows.layers[i]:
            seen[rows.ip[i]].add(k)
    # A launch script on node rank 0 printing MASTER_ADDR says which host that address is.
    for i in range(rows.n):
        master = rows.master_addr[i]
        if master and is_ip(master) and rows.node_rank[i] == 0:
            h = rows.target_host[i] or rows.host[i] or rows.file_host[i]
            k = display.learn(h, False)
            if k is not None and not is_ip(k):
                seen[master].add(k)
    ip_host: dict[str, str] = {}
    notes: list[str] = []
    for ip, hosts in sorted(seen.items()):
        if len(hosts) == 1:
            ip_host[ip] = next(iter(hosts))
        else:
            notes.append(
                f"address {ip} is used by several hosts ({', '.join(sorted(hosts))}); not used to identify hosts"
            )
    return ip_host, tuple(notes)


def _row_keys(rows: Rows, facts: HostFacts) -> tuple[list[str | None], list[ProcessKey | None]]:
    """Each row's host key and process key (host, pid)."""
    hk: list[str | None] = []
    keys: list[ProcessKey | None] = []
    for i in range(rows.n):
        h = facts.host_of(rows.host[i])
        if h is None and rows.ip[i]:
            h = facts.host_of(rows.ip[i])
        if h is None:
            h = facts.host_of(rows.file_host[i])
        p = rows.pid[i]
        if p is None and rows.file_pid[i] is not None:
            p = rows.file_pid[i]
            if h is None:
                h = facts.host_of(rows.file_host[i])
        hk.append(h)
        keys.append((h, p) if p is not None else None)
    # a pid seen without its host (Python logger, Ray on the driver's node) joins the one
    # process with that pid on a named host, when there is exactly one
    named: dict[int, set[str]] = defaultdict(set)
    for k in keys:
        if k is not None and k[0] is not None and not is_ip(k[0]):
            named[k[1]].add(k[0])
    for i, k in enumerate(keys):
        if k is not None and (k[0] is None or is_ip(k[0])) and len(named.get(k[1], ())) == 1:
            h = next(iter(named[k[1]]))
            keys[i] = (h, k[1])
            if hk[i] is None or is_ip(hk[i] or ""):
                hk[i] = h
    return hk, keys
