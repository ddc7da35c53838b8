"""Setup evidence: what a job's start-up lines say about a failure at or right after init.

NCCL and the launcher print how the job was set up before anything can fail: the interfaces the
socket transport and the bootstrap use, whether the IB transport found devices, the /dev/shm
segments of the SHM transport, NVLS availability, the GPU connection matrix (`nvidia-smi topo -m`),
the rendezvous address. On their own these lines are not failures; a clean run prints them too.
When the job fails at or right after init (a hang in the first collective, a communicator init that
never completes, socket/bootstrap or store errors), the setup line that names the reason is the
best evidence there is. This rule proposes those readings, never a failure where none happened.

The vocabulary (virtual interface prefixes, unroutable networks, the setup phrases) is data:
``setup_vocab.toml`` next to this module, read by ``setup_vocab``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from nccllog.correlate import wording as w
from nccllog.correlate.rules.base import Context, Draft, _first, _reporters_text, _timeout_rows, evidence
from nccllog.correlate.rules.startup import _store_address, startup_hang, stop_lines
from nccllog.correlate.rules.wording import _bare
from nccllog.correlate.setup_vocab import bad_master_addr, iface_problem, ip_of, parse_ifaces, vocab

HANG_EARLY_SEQ = 3  # a watchdog collective at or below this seq, with nothing completed, is "at init"


# --------------------------------------------------------------------------- the failure's shape


@dataclass
class Shape:
    """What failed, and whether it happened at or right after init."""

    failed: bool
    early: bool
    hang: bool
    errors: list[dict[str, Any]] = field(default_factory=list)
    socket: list[dict[str, Any]] = field(default_factory=list)
    store: list[dict[str, Any]] = field(default_factory=list)
    what: str = ""


def failure_shape(ctx: Context) -> Shape:
    """Did the job fail, and before any real work (no step, no completed collective)?"""
    ev = ctx.ev
    errors = ev.filter(pl.col("severity").is_in(["error", "critical"]) & (pl.col("_fw") >= 0.3)).to_dicts()
    stopped = stop_lines(ev)
    stalls = ev.filter(pl.col("signal") == "stall").height
    main = ctx.main
    hang = main is not None or stopped.height > 0 or stalls > 0
    stepped = any(st.last_step is not None for st in ctx.states.values())
    completed = any(c >= 1 for st in ctx.states.values() for c in st.last_completed.values())
    late_seq = main is not None and main.seq is not None and main.seq > HANG_EARLY_SEQ
    early = not stepped and not completed and not late_seq
    socket = [r for r in errors if r["signal"] == "network_socket" or r["signal"] == "bootstrap"]
    store = [r for r in errors if r["signal"] == "store_timeout"]
    if main is not None:
        what = f"every rank waited in {w.collective(main.op, main.seq)} until the watchdog fired"
    elif stopped.height or stalls:
        what = "the job stopped moving and was ended from outside"
    elif errors:
        what = "the job failed with errors"
    else:
        what = ""
    return Shape(
        failed=hang or bool(errors),
        early=early,
        hang=hang,
        errors=errors,
        socket=socket,
        store=store,
        what=what,
    )


# --------------------------------------------------------------------------- the rule


def setup_evidence(ctx: Context) -> list[Draft]:
    """Setup lines that name the cause of a failure at or right after init."""
    shape = failure_shape(ctx)
    if not shape.failed:
        return []
    drafts = []
    for rule in (_interfaces, _ib, _shm, _fabric, _topology, _master_addr):
        d = rule(ctx, shape)
        if d is not None:
            d.kind = "setup"
            drafts.append(d)
    return drafts


# --------------------------------------------------------------------------- interfaces


def _interfaces(ctx: Context, shape: Shape) -> Draft | None:
    rows = ctx.ev.filter(
        (pl.col("signal") == "bootstrap") & (pl.col("ifaces").is_not_null() | pl.col("iface").is_not_null())
    ).to_dicts()
    if not rows:
        return None
    hosts = {r["host"] for r in rows if r.get("host")} | set(ctx.book.host_ranks)
    nnodes = ctx.ev["nnodes"].max()
    if len(hosts) < 2 and not (isinstance(nnodes, int) and nnodes > 1):
        return None  # one node: bootstrap and sockets stay on the host, any interface works
    shared: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        for _, addr in parse_ifaces(r):
            ip = ip_of(addr)
            if ip is not None and r.get("host"):
                shared[str(ip)].add(r["host"])
    bad_rows: list[dict[str, Any]] = []
    only_bad: set[str] = set()
    bad_hosts: set[str] = set()
    reasons: dict[str, str] = {}
    bad_addrs: set[str] = set()
    for r in rows:
        pairs = parse_ifaces(r)
        probs = [(n, a, p) for n, a in pairs if (p := iface_problem(n, a, shared))]
        if not probs:
            continue
        bad_rows.append(r)
        host = r.get("host") or "?"
        bad_hosts.add(host)
        if len(probs) == len(pairs):
            only_bad.add(host)
        for n, a, p in probs:
            reasons.setdefault(n, p)
            bad_addrs.add(str(ip_of(a) or a))
    if not bad_rows:
        return None
    hit = [
        r
        for r in shape.socket
        if (peer := r.get("peer_addr") or r.get("peer")) and str(ip_of(_bare(str(peer))) or "") in bad_addrs
    ]
    if not ((shape.early and shape.failed) or hit):
        return None
    if any(d.category == "network_socket" for d in startup_hang(ctx)):
        return None  # the stopped-during-init reading already names the virtual interfaces
    d = Draft(category="network_socket", culprits=())
    all_hosts = bad_hosts >= hosts
    if not all_hosts:
        d.hosts = tuple(sorted(h for h in bad_hosts if h != "?"))
    d.score = 0.66 if only_bad else 0.55
    where = "every host" if all_hosts else w.host_list(sorted(bad_hosts))
    names = sorted(reasons)
    d.summary = (
        f"NCCL on {where} {'uses only' if only_bad else 'also uses'} interfaces other nodes cannot reach "
        f"({', '.join(names[:4])}); {shape.what or 'the job failed'}, with no work completed: the connections "
        "between nodes went over those interfaces and never came up."
    )
    d.rules_in.extend(f"{p}." for p in list(dict.fromkeys(reasons.values()))[:4])
    if only_bad:
        d.rules_in.append(
            f"On {w.host_list(sorted(only_bad))} every interface NCCL listed is one of these: no routable path was chosen."
        )
    else:
        d.rules_in.append(
            "NCCL listed a routable interface too; connections spread over the others can still hang."
        )
    if hit:
        d.score += 0.06
        d.rules_in.append(f"{w.plural(len(hit), 'socket error')} name one of these addresses as the peer.")
    d.rules_in.append(f"The failure fits a transport that never connected: {shape.what or 'errors at init'}.")
    d.rules_out.append(
        "On a clean run the same interface list is harmless only when traffic stays on one node; "
        "this job spans several hosts."
    )
    d.evidence = [evidence(r, "interfaces NCCL chose") for r in _first(bad_rows, 3)]
    d.evidence += [evidence(r) for r in _first(hit or shape.socket or shape.errors, 2)]
    d.remediation = [
        "Pin NCCL to the routable interface on every node: NCCL_SOCKET_IFNAME=eth0 (a prefix that exists on all "
        "nodes), or exclude the others with NCCL_SOCKET_IFNAME=^docker,veth,lo,virbr.",
        "In containers, run with --network=host (or give the pods a routable interface) so NCCL sees the node's NIC.",
    ]
    return d


# --------------------------------------------------------------------------- InfiniBand


def _ib(ctx: Context, shape: Shape) -> Draft | None:
    v = vocab()
    ev = ctx.ev
    missing = ev.filter(
        (pl.col("signal") == "bootstrap")
        & pl.col("message").fill_null("").str.contains_any(list(v.ib_unavailable))
    ).to_dicts()
    if not missing or not (shape.failed and (shape.early or shape.socket)):
        return None
    env = ev.filter((pl.col("signal") == "env_setting") & pl.col("env_var").is_not_null()).to_dicts()
    if any(
        r["env_var"] in v.ib_disabled_env and str(r.get("env_value") or "").strip().rstrip(".") == "1"
        for r in env
    ):
        return None  # IB was switched off on purpose
    ib_env = [
        r for r in env if r["env_var"].startswith(v.ib_env_prefixes) and r["env_var"] not in v.ib_disabled_env
    ]
    with_ib = ev.filter(
        (pl.col("signal") == "bootstrap")
        & (pl.col("hca").is_not_null() | pl.col("net").is_in(["IB", "RoCE"]))
        & pl.col("host").is_not_null()
    )
    hosts_ib = set(with_ib["host"].to_list())
    hosts_no = {r["host"] for r in missing if r.get("host")} - hosts_ib
    hosts = {h for h in ev["host"].drop_nulls().unique().to_list()} | set(ctx.book.host_ranks)
    if len(hosts) < 2:
        return None  # one node: no inter-node transport to miss
    if not hosts_ib and not ib_env:
        return None  # nothing says IB was expected: an Ethernet cluster
    d = Draft(category="network_ib", culprits=())
    if hosts_ib and hosts_no:
        d.hosts = tuple(sorted(hosts_no))
        d.score = 0.66
        d.summary = (
            f"{w.host_list(sorted(hosts_no))} found no usable InfiniBand device while {w.host_list(sorted(hosts_ib))} "
            "did: the nodes run different inter-node transports, and the job failed at init."
        )
        d.rules_in.append(
            f"IB devices listed on {w.host_list(sorted(hosts_ib))}; 'no device' / missing libibverbs on "
            f"{w.host_list(sorted(hosts_no))}."
        )
        d.evidence = [evidence(r) for r in _first(missing, 2)] + [
            evidence(r) for r in with_ib.head(1).to_dicts()
        ]
    else:
        d.score = 0.58
        d.summary = (
            "The job is configured for InfiniBand but NCCL found no usable IB device (or no libibverbs) and fell "
            "back to sockets; the job then failed at init."
        )
        d.rules_in.append(
            "NCCL_IB_* settings show IB was expected: "
            + ", ".join(sorted({f"{r['env_var']}={r['env_value']}" for r in ib_env}))[:160]
            + "."
        )
        d.evidence = [evidence(r) for r in _first(missing, 2)] + [evidence(r) for r in ib_env[:1]]
    d.rules_in.append(f"The failure came before any work completed: {shape.what or 'errors at init'}.")
    d.rules_out.append(
        "`NET/Plugin: Could not find …` lines are benign (no external plugin installed) and are not read as evidence."
    )
    d.evidence += [evidence(r) for r in _first(shape.socket or shape.errors, 2)]
    d.remediation = [
        "Expose the IB devices to the job (/dev/infiniband in the container, the rdma/hca device plugin on Kubernetes) "
        "and install libibverbs (rdma-core) in the image; `ibv_devices` must list the HCAs.",
        "Check NCCL_IB_HCA against the devices each node really has; expect `Using network IB` on every rank.",
    ]
    return d


# --------------------------------------------------------------------------- /dev/shm


def _shm(ctx: Context, shape: Shape) -> Draft | None:
    v = vocab()
    rows = ctx.ev.filter(
        pl.col("severity").is_in(["error", "critical"])
        & (pl.col("path").fill_null("").str.starts_with(v.shm_prefix))
    ).to_dicts()
    if not rows:
        return None
    hosts = sorted({r["host"] for r in rows if r.get("host")})
    ranks = sorted({r["rank"] for r in rows if r.get("rank") is not None})
    d = Draft(category="init_failure", culprits=(), hosts=tuple(hosts))
    d.score = 0.7
    first = _first(rows, 3)
    sizes = sorted({str(r["size"]) for r in rows if r.get("size")})
    err = next((str(r["error"]) for r in first if r.get("error")), "")
    d.summary = (
        f"NCCL could not create its shared-memory segments in /dev/shm{' on ' + w.host_list(hosts) if hosts else ''}"
        + (f" ({err})" if err else "")
        + ": /dev/shm is too small or full (Docker's default is 64 MB), so the communicator's SHM transport "
        "could not be set up."
    )
    d.rules_in.append(
        f"{w.plural(len(rows), 'shared-memory error')}"
        + (f" from {w.ranks_phrase(ranks)}" if ranks else "")
        + (f", segments of {', '.join(sizes[:3])} bytes" if sizes else "")
        + "."
    )
    system = [
        r
        for r in shape.errors
        if r["signal"] == "nccl_error" and "system" in str(r.get("message") or "").lower()
    ]
    if system:
        d.rules_in.append(
            "The NCCL error surfaced to PyTorch is a system error, which is what a failed shm call returns."
        )
    d.rules_out.append("A rank's own fault would not show as a failure to allocate /dev/shm on the node.")
    d.evidence = [evidence(r) for r in first] + [evidence(r) for r in _first(system, 1)]
    d.remediation = [
        "Give the container a large /dev/shm: `docker run --shm-size=16g …` or `--ipc=host` (Docker's default is 64 MB); "
        "on Kubernetes mount an emptyDir with medium: Memory at /dev/shm.",
        "Check `df -h /dev/shm` on each node and remove stale /dev/shm/nccl-* segments.",
        "Stopgap: NCCL_SHM_DISABLE=1 (intra-node traffic then goes over P2P or the network, slower).",
    ]
    return d


# --------------------------------------------------------------------------- fabric manager / NVLS


def _fabric(ctx: Context, shape: Shape) -> Draft | None:
    v = vocab()
    ev = ctx.ev
    text = pl.concat_str(pl.col("error").fill_null(""), pl.lit(" "), pl.col("message").fill_null(""))
    not_ready = ev.filter(
        (pl.col("signal") == "cuda_error") & text.str.contains_any(list(v.system_not_ready))
    )
    fm_version = ev.filter(
        (pl.col("signal") == "version")
        & (pl.col("category") == "version_mismatch")
        & pl.col("severity").is_in(["error", "critical"])
    )
    fm_down = ev.filter(
        pl.col("severity").is_in(["error", "critical"])
        & pl.col("message").fill_null("").str.contains("(?i)fabric manager")
        & (pl.col("signal") != "version")
    )
    nvls_off = ev.filter(pl.col("nvls").fill_null("") == "not available")
    if not_ready.height:
        rows = not_ready.to_dicts()
        cat = "version_mismatch" if fm_version.height else "init_failure"
        score = 0.88
    elif fm_down.height and fm_version.height == 0 and shape.hang and shape.early:
        rows = fm_down.to_dicts()
        cat = "init_failure"
        score = 0.64
    else:
        return None  # a fabric manager version line alone is _system_version's
    fm_rows = fm_version.to_dicts() + fm_down.to_dicts()
    hosts = sorted({r["host"] for r in rows + fm_rows if r.get("host")})
    d = Draft(category=cat, culprits=(), hosts=tuple(hosts))
    d.score = score
    where = f" on {w.host_list(hosts)}" if hosts else ""
    d.summary = (
        f"The NVSwitch fabric{where} was not set up: "
        + (
            "CUDA reports 'system not yet initialized' (error 802), which means the NVIDIA fabric manager is not running"
            if not_ready.height
            else "the NVIDIA fabric manager service did not start, and the first collective hung on every rank"
        )
        + (" because its version does not match the driver" if fm_version.height else "")
        + ". This is a node setup problem, not a rank problem."
    )
    if not_ready.height:
        d.rules_in.append(
            "CUDA error 802 (cudaErrorSystemNotReady) is returned until the fabric manager has configured the "
            "NVSwitches: the CUDA error is the symptom, the node's fabric setup the cause."
        )
    if fm_rows:
        d.rules_in.append(f"Fabric manager lines: {str(_first(fm_rows, 1)[0]['message']).strip()[:160]}")
    if nvls_off.height:
        d.rules_in.append(
            "NCCL found NVLS multicast not available, as on a node whose fabric is not configured."
        )
    if shape.what:
        d.rules_in.append(f"The failure fits: {shape.what}.")
    d.rules_out.append("Every rank of the node is affected alike; no rank is to blame.")
    d.evidence = (
        [evidence(r) for r in _first(rows, 2)]
        + [evidence(r) for r in _first(fm_rows, 2)]
        + [evidence(r) for r in nvls_off.head(1).to_dicts()]
    )
    d.remediation = [
        "Start the fabric manager and check it: `systemctl status nvidia-fabricmanager`, "
        "`nvidia-smi -q | grep -A2 Fabric` (State Completed, Status Success).",
        "Install the nvidia-fabricmanager package of exactly the loaded driver version and hold both together.",
    ]
    return d


# --------------------------------------------------------------------------- topology


def topo_pairs(ctx: Context) -> dict[str, list[tuple[str, str, str]]]:
    """GPU pairs whose `nvidia-smi topo -m` link goes through the CPU (PHB/NODE/SYS), per host ("" if unknown)."""
    v = vocab()
    rows = ctx.ev.filter(pl.col("topo_dev").is_not_null() & pl.col("topo_links").is_not_null()).sort("_i")
    out: dict[str, list[tuple[str, str, str]]] = {}
    for (_src, host), sub in rows.group_by("source", "host", maintain_order=True):
        matrix: dict[str, list[str]] = {}
        for dev, links in sub.select("topo_dev", "topo_links").iter_rows():
            matrix.setdefault(str(dev), str(links).split())
        devs = list(matrix)
        pairs = []
        for i, a in enumerate(devs):
            cells = matrix[a]
            if len(cells) != len(devs) or not a.startswith("GPU"):
                continue
            for j in range(i + 1, len(devs)):
                if devs[j].startswith("GPU") and cells[j] in v.host_paths:
                    pairs.append((a, devs[j], cells[j]))
        if pairs:
            out.setdefault(str(host or ""), []).extend(
                p for p in pairs if p not in out.get(str(host or ""), [])
            )
    return out


def _topology(ctx: Context, shape: Shape) -> Draft | None:
    main = ctx.main
    if main is None or not shape.early:
        return None  # a hang stopped from outside after init is startup_hang's P2P reading
    pairs = topo_pairs(ctx)
    if not pairs:
        return None
    env = ctx.ev.filter(pl.col("env_var").is_not_null()).to_dicts()
    if any(r["env_var"] == "NCCL_P2P_DISABLE" and str(r.get("env_value") or "").startswith("1") for r in env):
        return None  # P2P off: the topology's peer paths are not in use
    if main.silent and not main.hidden:
        return None  # a rank that never arrived is a straggler question, not a path question
    d = Draft(category="p2p_topology", culprits=())
    d.score = 0.62
    where = sorted(h for h in pairs if h)
    listed = "; ".join(
        (f"{h}: " if h else "")
        + ", ".join(f"{a}-{b} {t}" for a, b, t in ps[:4])
        + (" …" if len(ps) > 4 else "")
        for h, ps in sorted(pairs.items())[:3]
    )
    d.summary = (
        f"Every rank hung in the first collective ({w.collective(main.op, main.seq)}) and the GPU matrix shows "
        f"peer paths through the CPU ({listed}): GPU peer-to-peer traffic over a PCIe host bridge or the "
        "inter-socket link is the suspect."
    )
    d.rules_in.append(
        "nvidia-smi topo -m lists GPU pairs on PHB/NODE/SYS: no direct peer path, so P2P goes through the root "
        "complex, where ACS or an IOMMU stalls it."
    )
    p2p = ctx.ev.filter(pl.col("transport").fill_null("").str.starts_with("P2P"))
    level = [r for r in env if r["env_var"] == "NCCL_P2P_LEVEL"]
    if p2p.height:
        d.score += 0.05
        d.rules_in.append("NCCL connected the local GPUs over P2P (channel lines `via P2P/…`).")
    if level:
        d.rules_in.append(f"NCCL_P2P_LEVEL={level[0]['env_value']} was set.")
    d.rules_in.append(
        f"{_reporters_text(ctx, main).capitalize()} timed out with nothing completed before it."
    )
    d.rules_out.append(
        "No rank was missing from the timeout and none failed first: the path, not a rank, stalled."
    )
    topo_rows = ctx.ev.filter(pl.col("topo_dev").is_not_null()).sort("_i").head(4).to_dicts()
    d.evidence = [evidence(r, "GPU connection matrix") for r in topo_rows]
    d.evidence += [evidence(r) for r in p2p.head(1).to_dicts()]
    d.evidence += [evidence(r) for r in _timeout_rows(main, 2)]
    d.remediation = [
        "Test with NCCL_P2P_DISABLE=1 (or NCCL_P2P_LEVEL=PXB so only switch-local pairs use P2P): if it then runs, "
        "the host-bridge peer path is broken.",
        "Disable ACS on the PCIe switches / root ports and set the IOMMU to passthrough (iommu=pt), or turn VT-d/AMD-Vi off.",
    ]
    if where:
        d.hosts = tuple(h for h in where if h in ctx.book.host_ranks)
    return d


# --------------------------------------------------------------------------- rendezvous address


def _master_addr(ctx: Context, shape: Shape) -> Draft | None:
    ev = ctx.ev
    named = ev.filter(pl.col("master_addr").is_not_null()).to_dicts()
    named += ev.filter((pl.col("env_var") == "MASTER_ADDR") & pl.col("env_value").is_not_null()).to_dicts()
    found: list[tuple[dict[str, Any], str, str]] = []
    for r in named:
        addr = str(r.get("master_addr") or r.get("env_value") or "")
        if why := bad_master_addr(addr):
            found.append((r, addr, why))
    for r in shape.store:
        store = _store_address(r)
        if store and (why := bad_master_addr(store)):
            found.append((r, store, why))
    if not found:
        return None
    nccl_up = ev.filter(pl.col("signal").is_in(["init", "bootstrap"])).height > 0
    if not (shape.store or (shape.failed and not nccl_up)):
        return None
    addr, why = found[0][1], found[0][2]
    d = Draft(category="bootstrap_rendezvous", culprits=())
    d.score = 0.72
    d.summary = (
        f"The rendezvous address (MASTER_ADDR) is {addr}, {why}, not a host: no node listens there, so the ranks "
        "could not reach the store."
    )
    d.rules_in.append(f"MASTER_ADDR / the store address is {addr}: {why}.")
    if shape.store:
        d.rules_in.append(f"{w.plural(len(shape.store), 'store error')} show the ranks failing to reach it.")
    else:
        d.rules_in.append("No rank reached NCCL: the job ended in the rendezvous.")
    d.rules_out.append(
        "A late or crashed store host would still have a routable address; this one is not a host at all."
    )
    d.evidence = [evidence(r, "rendezvous address") for r, _, _ in found[:2]]
    d.evidence += [evidence(r) for r in _first(shape.store, 2)]
    d.remediation = [
        "Set MASTER_ADDR to the routable IP or host name of the node with node rank 0; when a script derives it from "
        "`ip`/`ifconfig` output, check it takes the address field, not the netmask or broadcast.",
    ]
    return d
