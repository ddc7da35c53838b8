"""Network: IB/socket errors placed on hosts, edges between hosts, and intra-node traffic."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import polars as pl

from nccllog.correlate import wording as w
from nccllog.correlate.network import placeholder, strip_port
from nccllog.correlate.ranks_state import failure_order
from nccllog.correlate.rules.base import (
    Context,
    Draft,
    _first,
    _hosts_seen,
    _remediation,
    evidence,
    writer_hosts,
)
from nccllog.correlate.rules.failstop import FAILSTOP_EXCLUDE
from nccllog.correlate.rules.remedies import steps
from nccllog.correlate.rules.scores import S
from nccllog.correlate.rules.vocabulary import vocabulary
from nccllog.correlate.rules.wording import _bare, _failure_text, _net_detail
from nccllog.vocab import Category, Signal


def network(ctx: Context) -> list[Draft]:
    """IB/socket errors placed on hosts.

    - Errors a host reports about its own adapter (async port events, completions without a
      peer) implicate that host's port or link: the hosts are named, not their ranks.
    - Errors naming a peer address are edges (reporter host, peer host); the host at one end of
      most edges (of all of them, ideally) is the suspect, with the ranks it runs.
    - Errors between processes of one host are not the network's: intra-node traffic should not
      use it at all (P2P/SHM disabled or broken), which is a topology/config problem.
    """
    rows = ctx.ev.filter(
        pl.col("signal").is_in([Signal.NETWORK_IB, Signal.NETWORK_SOCKET]) & (pl.col("_fw") > 0)
    ).to_dicts()
    if not rows:
        return []
    ib = any(r["signal"] == Signal.NETWORK_IB for r in rows)
    category = Category.NETWORK_IB if ib else Category.NETWORK_SOCKET
    edges: list[tuple[str | None, str, dict[str, Any]]] = []
    intra: list[dict[str, Any]] = []
    local: dict[str, list[dict[str, Any]]] = defaultdict(list)
    unplaced: list[dict[str, Any]] = []
    for r in rows:
        me = r["host"] or (ctx.book.rank_host.get(r["rank"]) if r["rank"] is not None else None)
        addr = r["peer_addr"] or r["peer"]
        if addr and placeholder(strip_port(addr)):
            unplaced.append(r)  # a peer the user redacted (`NODE2_IP`, `<master-ip>`): no machine named
            continue
        if addr:
            peer = ctx.book.host_of(addr) or _bare(addr)
            if me is not None and peer == me:
                intra.append(r)
            else:
                edges.append((me, peer, r))
        elif me is not None and _adapter_fault(r):
            local[me].append(r)
        else:
            unplaced.append(r)
    drafts: list[Draft] = []
    if unplaced and not (edges or intra or local):
        drafts.append(_own_socket(ctx, unplaced, category))
    if intra and len(intra) >= len(edges):
        drafts.append(_intra_node(ctx, intra))
    if local:
        drafts.append(_local_fault(ctx, local, category, ib))
    elif edges:
        if not ib and all(_peer_closed(r) for _me, _peer, r in edges):
            d = _peer_gone(ctx, edges)
        else:
            d = _peer_fault(ctx, edges, category, ib)
        if d is not None:
            drafts.append(d)
    return drafts


PEER_CLOSED = "nccl.socket_closed_by_peer"


def _peer_closed(r: dict[str, Any]) -> bool:
    """A socket the peer closed: its process exited (or its network dropped), a fact about the peer."""
    return r.get("pattern") == PEER_CLOSED


def _peer_gone(ctx: Context, edges: list[tuple[str | None, str, dict[str, Any]]]) -> Draft | None:
    """Only "closed by the remote peer", nothing that failed to connect, was reset or timed out: the
    peers' processes most likely went away. Why is in their own logs; without them the cause is
    unknown, and the peer that closed the most connections is where to look."""
    closers = Counter(peer for _me, peer, _r in edges)
    (top, n), *rest = closers.most_common()
    if rest and rest[0][1] == n:
        return None
    rows = [r for _me, peer, r in edges if peer == top]
    ranks = ctx.book.ranks_on(top)
    if any((st := ctx.states.get(rk)) and st.failure and st.failure.weight >= S.weight_cause for rk in ranks):
        return None  # its own failure is in the logs: the fail-stop reading explains the closed sockets
    wrote = top in writer_hosts(ctx)
    g = Draft(
        category=Category.UNKNOWN, culprits=tuple(ctx.book.ranks_on(top)), hosts=(top,), kind="peer_gone"
    )
    g.score = S.network_peer_gone
    g.summary = (
        f"The peer on {top} closed {w.plural(n, 'connection')}: its process most likely exited (killed, crashed "
        f"or stopped), which {'its log here does not explain' if wrote else 'only its own log, not given, can explain'}."
    )
    g.rules_in.append(
        "Every failing connection was closed by the other end; none failed to connect, timed out or was "
        "reset, which a network fault would show."
    )
    if not wrote:
        g.rules_out.append(
            f"No log from {top} was given: whether its process crashed, was killed or ran out of memory is not shown."
        )
    g.evidence = [evidence(r) for r in _first(rows, 4)]
    g.remediation = [
        f"Read the log of the processes on {top} (and the kernel log there: OOM killer, Xid) around this time."
    ]
    return g


def _own_socket(ctx: Context, rows: list[dict[str, Any]], category: str) -> Draft:
    """Network errors a rank reports about its own connections without naming the peer (a foreign
    client's wrong handshake, a closed socket): the reporting ranks are where it shows, at low
    confidence, since the log does not say what is on the other end."""
    ranks = sorted({int(r["rank"]) for r in rows if r.get("rank") is not None})
    named = ranks if ranks and set(ranks) < set(ctx.seen) else []
    d = Draft(category=category, culprits=tuple(named), kind="network", score=S.network_own_socket)
    what = _net_detail(rows) or str(rows[0].get("message") or "")
    who = w.ranks_phrase(ranks, capital=True) if ranks else "A process"
    d.summary = f"{who} reported a network error on its own connections: {w.excerpt(what)}."
    d.rules_in.append(f"{len(rows)} network error line(s) that name no peer.")
    d.rules_out.append("The log does not say what is on the other end of the connection.")
    d.evidence = [evidence(r) for r in _first(rows, 4)]
    d.remediation = _remediation(ctx.library, rows[:3])
    return d


def _adapter_fault(r: dict[str, Any]) -> bool:
    """A line about the reporter's own adapter that is a fault (not ``port active``/GID changes)."""
    if r.get("ib_status") is not None:
        return True
    text = f"{r.get('error') or ''} {r.get('message') or ''}".lower()
    return any(x in text for x in ("error", "catastrophic", "fatal", "down", "fail"))


def _local_fault(ctx: Context, local: dict[str, list[dict[str, Any]]], category: str, ib: bool) -> Draft:
    hosts = sorted(local, key=lambda h: (-len(local[h]), h))
    every = [r for h in hosts for r in local[h]]
    # On every host seen alike, the fault is in what they share (the switch, the fabric's
    # settings), not in one machine: no host is named, as for a fail-stop on every machine.
    everywhere = len(hosts) >= 2 and set(hosts) >= _hosts_seen(ctx)
    d = Draft(
        category=category, culprits=(), hosts=() if everywhere else tuple(sorted(hosts)), kind="network_local"
    )
    d.score = S.network_local
    detail = _net_detail(every)
    counts = ", ".join(f"{h} ({len(local[h])})" for h in hosts[:5])
    adapters = f"The {'InfiniBand' if ib else 'network'} adapter{'s' if len(hosts) > 1 else ''}"
    d.summary = (
        f"{adapters} of every host seen ({w.host_list(hosts)}) reported faults on their own ports"
        f"{': ' + detail if detail else ''}; a fault on every host points at what they share (the switch, the "
        "fabric's settings such as the GID index, PFC or MTU) more than at one NIC."
        if everywhere
        else f"{adapters} of {w.host_list(hosts)} reported faults on {'their' if len(hosts) > 1 else 'its'} own "
        f"port{': ' + detail if detail else ''}; the link or NIC of {'those hosts' if len(hosts) > 1 else 'that host'} "
        "is the suspect."
    )
    d.rules_in.append(
        f"Adapter errors reported by the host itself, lines per host: {counts}. A port that goes down and up "
        "(port error / port active) is a flapping link or a failing NIC or cable."
    )
    others = sorted({r["rank"] for r in every if r.get("rank") is not None})
    if others:
        d.rules_in.append(f"Reported by {w.ranks_phrase(others)}, i.e. by every process using that adapter.")
    d.rules_out.append(
        "Errors about one's own port do not come from a peer process dying; no crash is needed to explain them."
    )
    d.evidence = [evidence(r) for h in hosts for r in _first(local[h], 2)][:8]
    d.remediation = _remediation(ctx.library, every[:3])
    return d


def _peer_fault(
    ctx: Context, edges: list[tuple[str | None, str, dict[str, Any]]], category: str, ib: bool
) -> Draft | None:
    touch: Counter[str] = Counter()
    reporters_of: dict[str, set[tuple[Any, Any]]] = defaultdict(set)
    for me, peer, r in edges:
        for h in {me, peer} - {None}:
            assert h is not None
            touch[h] += 1
        reporters_of[peer].add((me, r["rank"]))
    ranked = sorted(touch.items(), key=lambda kv: (-kv[1], -len(reporters_of.get(kv[0], ())), kv[0]))
    top, n_top = ranked[0]
    if len(ranked) > 1 and ranked[1][1] == n_top and len(edges) > 1:
        return None
    everywhere = n_top == len(edges)
    rows = [r for me, peer, r in edges if top in (me, peer)]
    reps = reporters_of.get(top, set())
    # "No route to host" / "Network is unreachable": the reporters have no path to that address
    # (interface selection, routing), which says nothing against the processes behind it.
    unroutable = all(_unroutable(r) for r in rows)
    ranks = [] if unroutable else ctx.book.ranks_on(top)
    d = Draft(category=category, culprits=tuple(ranks), hosts=(top,), kind="network")
    d.score = (S.network_peer_ib if ib else S.network_peer_socket) + (
        S.network_everywhere if everywhere and len(edges) > 1 else 0.0
    )
    detail = _net_detail(rows)
    on = f" (ranks {w.rank_list(ranks)})" if ranks else ""
    rep_hosts = {h for h, _ in reps if h}
    d.summary = (
        f"{w.plural(len(reps) or len(rows), 'rank').capitalize()} on {w.plural(len(rep_hosts) or 1, 'host')} lost "
        f"{'InfiniBand' if ib else 'socket'} connections to {top}{on}{': ' + detail if detail else ''}; "
        f"every failing connection has {top} at one end, so its link or NIC is the suspect."
        if everywhere
        else f"{w.plural(len(rows), 'failing connection').capitalize()} involve {top}{on}"
        f"{': ' + detail if detail else ''}; its link or NIC is the suspect."
    )
    d.rules_in.append(
        f"{n_top} of the {len(edges)} failing connections have {top} at one end"
        + (
            " (all of them)."
            if everywhere
            else f"; the next host is at {ranked[1][1]}."
            if len(ranked) > 1
            else "."
        )
    )
    addrs = sorted({(r["peer_addr"] or r["peer"] or "") for me, peer, r in edges if peer == top})
    if addrs:
        d.rules_in.append(f"Peer address(es) {', '.join(a for a in addrs[:4] if a)} belong to {top}.")
    died = [
        st.failure
        for rk in ranks
        if (st := ctx.states.get(rk))
        and st.failure
        and st.failure.signal not in FAILSTOP_EXCLUDE
        and st.failure.weight >= S.weight_cause
    ]
    t_net = min((r["ctime"] for r in rows if r["ctime"] is not None), default=None)
    if died:
        f = sorted(died, key=failure_order)[0]
        if f.time is None or t_net is None or f.time <= t_net:
            d.score *= S.network_died_factor
            d.after = True
            d.rules_out.append(
                f"Rank {f.rank} on {top} failed itself ({_failure_text(f)}) before the network errors: "
                "its peers lost it because it died."
            )
    else:
        d.rules_out.append(
            f"No process on {top} logged a crash, OOM or exception before the errors: the connection failed, "
            "not the peer process."
        )
    statuses = {r["ib_status"] for r in rows if r.get("ib_status") is not None}
    if statuses and statuses <= {5}:
        d.score -= S.network_flush_only
        d.rules_out.append(
            "Only status 5 (WR_FLUSH_ERR) was seen: the queue pair was already in error, a secondary symptom."
        )
    if unroutable:
        d.summary = (
            f"{w.plural(len(reps) or len(rows), 'rank').capitalize()} on {w.plural(len(rep_hosts) or 1, 'host')} "
            f"found no route to {top}'s address ({', '.join(a for a in addrs[:4] if a) or top}): the interface "
            "NCCL chose for that address is not reachable from the other nodes."
        )
        d.rules_in.append(
            "Every failure is 'no route' / 'unreachable': a routing or interface-selection problem "
            "(NCCL_SOCKET_IFNAME), not a process or NIC that failed."
        )
    d.evidence = [evidence(r) for r in _first(rows, 6)]
    d.remediation = _remediation(ctx.library, rows[:3])
    return d


def _unroutable(r: dict[str, Any]) -> bool:
    text = f"{r.get('error') or ''} {r.get('message') or ''}".lower()
    return "no route to host" in text or "network is unreachable" in text


RESTRICTIVE_ENV = vocabulary().restrictive_settings  # settings that forbid intra-node transports


def _intra_node(ctx: Context, intra: list[dict[str, Any]]) -> Draft:
    hosts = sorted({r["host"] for r in intra if r.get("host")})
    d = Draft(category=Category.P2P_TOPOLOGY, culprits=(), kind="p2p")
    d.score = S.network_intra_node
    env = ctx.ev.filter(pl.col("env_var").is_in(list(RESTRICTIVE_ENV)))
    bad = sorted(
        {
            f"{v}={val}"
            for v, val in env.select("env_var", "env_value").iter_rows()
            if val is not None and str(val).strip().rstrip(".").upper() in RESTRICTIVE_ENV.get(v, ())
        }
    )
    d.summary = (
        f"Processes on the same host ({w.host_list(hosts)}) failed talking to each other over the network transport"
        + (f" because {', '.join(bad)} turned off the intra-node paths" if bad else "")
        + "; the GPU peer-to-peer / shared-memory setup is the problem, not the network."
    )
    d.rules_in.append(
        f"{len(intra)} connection error(s) have both ends on the same host: intra-node traffic went through sockets/IB."
    )
    if bad:
        d.score += S.network_restrictive_env
        d.rules_in.append(f"The environment sets {', '.join(bad)}, which forbids P2P/SHM between local GPUs.")
        d.evidence.extend(evidence(r) for r in env.head(3).to_dicts())
    d.rules_out.append("No remote host is involved, so neither a remote peer nor the fabric can be at fault.")
    d.evidence = [evidence(r) for r in _first(intra, 4)] + d.evidence
    d.remediation = steps("intra_node", ctx.versions)
    return d
