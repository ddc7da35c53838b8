"""Start-up: store/rendezvous timeouts, version splits, and jobs stopped before their first collective."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import polars as pl
import regex

from nccllog.correlate import wording as w
from nccllog.correlate.ranks_state import HANG_SIGNALS
from nccllog.correlate.rules.base import (
    LOOPBACK_NAMES,
    Context,
    Draft,
    _first,
    _remediation,
    evidence,
    failure_lines,
)
from nccllog.correlate.rules.remedies import steps
from nccllog.correlate.rules.scores import S
from nccllog.correlate.rules.vocabulary import vocabulary
from nccllog.model import Evidence
from nccllog.vocab import Category, Severity, Signal


def rule(ctx: Context) -> list[Draft]:
    """Start-up: who the rendezvous waited for, version splits, a job stopped before its first collective."""
    return bootstrap(ctx) + versions(ctx) + startup_hang(ctx) + same_rank_twice(ctx)


def bootstrap(ctx: Context) -> list[Draft]:
    """Store/rendezvous timeouts: who was waited for."""
    rows = _retries_that_failed(
        ctx.ev.filter((pl.col("signal") == Signal.STORE_TIMEOUT) & (pl.col("_fw") > 0)), ctx.ev
    )
    if not rows:
        return []
    named: Counter[int] = Counter()
    for r in rows:
        if (t := _awaited_rank(r)) is not None:
            named[t] += 1
    d = Draft(category=Category.BOOTSTRAP_RENDEZVOUS, culprits=(), kind="bootstrap")
    d.evidence = [evidence(r) for r in _first(rows, 4)]
    d.remediation = _remediation(ctx.library, rows[:3])
    writers = sorted({r["rank"] for r in rows if r["rank"] is not None})
    if named:
        target = [r for r, _ in named.most_common() if named[r] == named.most_common(1)[0][1]]
        d.culprits = tuple(sorted(target))
        # What the waiters say points at the awaited rank, but its own log is what would prove it:
        # without a line of its own the verdict stays an inference (medium at most).
        d.score = S.bootstrap_awaited_own if _own_failure_seen(ctx, target) else S.bootstrap_awaited
        d.summary = (
            f"{w.ranks_phrase(writers, capital=True) if writers else 'The other ranks'} timed out in the store waiting for "
            f"{w.ranks_phrase(target)}, which had not published its part: {w.ranks_phrase(target)} was late."
        )
        d.rules_in.append(f"The store errors name {w.ranks_phrase(target)} as the rank they waited for.")
        return [d]
    joined = [
        (r["joined"], r["world_size"]) for r in rows if r.get("joined") is not None and r.get("world_size")
    ]
    absent = [r for r in ctx.world if not ctx.states[r].seen] if ctx.world else []
    if joined:
        j, n = joined[0]
        if absent and len(absent) == n - j:
            d.culprits = tuple(absent)
            d.score = S.bootstrap_absent
            d.summary = f"Only {j} of {n} ranks joined the rendezvous; {w.ranks_phrase(absent)} never did."
            d.rules_in.append(
                f"{n - j} rank(s) missing from the rendezvous and no log from {w.ranks_phrase(absent)}."
            )
        else:
            d.score = S.bootstrap_partial
            timed_out = any(r.get("severity") in (Severity.ERROR, Severity.CRITICAL) for r in rows)
            d.summary = f"Only {j} of {n} ranks joined the rendezvous " + (
                "before the store timed out." if timed_out else "while the others waited for them."
            )
            d.rules_in.append(f"The store counted {j}/{n} clients.")
        return [d]
    addrs = sorted({a for r in rows if (a := _store_address(r))})
    hosts = sorted({ctx.book.host_of(a) or a for a in addrs})
    reporters = {r["host"] for r in rows if r.get("host")}
    known = set(ctx.book.host_ranks) | {h for h in ctx.ev["host"].drop_nulls().unique().to_list()}
    quiet = sorted(known - reporters)
    if addrs and all(ctx.book.host_of(a) is None for a in addrs) and len(quiet) == 1 and len(reporters) >= 2:
        # The store's address maps to no host we know, but one host is the only one not trying to
        # reach it: that is where the store (rank 0's node) should have been listening.
        hosts = quiet
        d.rules_in.append(
            f"Every host but {quiet[0]} reports failing to reach {', '.join(addrs)}; {quiet[0]} is the one the store runs on."
        )
    d.hosts = tuple(hosts)
    d.score = S.bootstrap_unreachable
    d.summary = (
        f"{w.ranks_phrase(writers, capital=True) if writers else 'The ranks'} could not reach the rendezvous store"
        + (f" at {', '.join(addrs)}" if addrs else "")
        + (f" on {w.host_list(hosts)}" if hosts and hosts != addrs else "")
        + ": the node that hosts it was not up (or not listening) in time."
    )
    d.rules_in.append("Store connect/wait timeouts before any collective ran.")
    return [d]


def _retries_that_failed(rows: pl.DataFrame, ev: pl.DataFrame) -> list[dict[str, Any]]:
    """The store lines that are failures: errors, and warnings (connect retries) that no line of a
    formed process group follows in the same log. A retry before the group formed succeeded."""
    if not rows.height:
        return []
    done = ev.filter(pl.col("pattern").is_in(list(vocabulary().rendezvous_done_patterns)))
    last_done = dict(done.group_by("source").agg(pl.col("_i").max()).iter_rows())
    return [
        r
        for r in rows.to_dicts()
        if r["severity"] != Severity.WARNING or r["_i"] > last_done.get(r["source"], -1)
    ]


def _awaited_rank(r: dict[str, Any]) -> int | None:
    """The global rank a store waiter waits for, where the line lets us know it.

    ``waits_for`` is a rank of the waiter's group; it is a global rank only when the group is the
    world, which shows as the waiter's group rank (``target_rank``) equal to its global rank (or
    the global rank unknown, as in a bare paste).
    """
    t = r.get("waits_for")
    if t is None:
        return None
    own_group_rank, own_rank = r.get("target_rank"), r.get("rank")
    if own_rank is not None and own_group_rank is not None and own_rank != own_group_rank:
        return None
    return None if t == own_rank else int(t)


def _own_failure_seen(ctx: Context, ranks: list[int]) -> bool:
    """Whether every one of ``ranks`` has a failure line of its own (one it wrote or is about)."""
    own = set(failure_lines(ctx.ev)["subject"].drop_nulls().to_list())
    return all(r in own for r in ranks)


_STORE_ADDR = regex.compile(r"\(([\w.\-:]+), \d+\)|(?:to|host) \[?([\w.\-]+?)\]?:\d+\b")


def _store_address(r: dict[str, Any]) -> str | None:
    """The store address a rendezvous error names (its field, or ``(host, port)`` / ``host:port`` in the text)."""
    for key in ("target_host", "peer_addr"):  # the store's address as the pattern read it
        if r.get(key):
            return str(r[key])
    for text in (r.get("error"), r.get("message")):
        m = _STORE_ADDR.search(text or "")
        if m:
            return m.group(1) or m.group(2)
    return None


def versions(ctx: Context) -> list[Draft]:
    """Ranks that run a different NCCL/torch version than the rest."""
    drafts = []
    for fld, name in (("nccl_version", "NCCL"), ("torch_version", "PyTorch")):
        rows = ctx.ev.filter(pl.col(fld).is_not_null() & pl.col("rank").is_not_null())
        if rows.height == 0:
            continue
        per = rows.group_by("rank").agg(pl.col(fld).first())
        by_v: dict[str, list[int]] = defaultdict(list)
        for rank, v in per.iter_rows():
            by_v[v].append(rank)
        if len(by_v) < 2:
            continue
        groups = sorted(by_v.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        odd = sorted(r for _, rs in groups[1:] for r in rs)
        d = Draft(
            category=Category.VERSION_MISMATCH,
            culprits=tuple(odd) if len(odd) < len(groups[0][1]) else (),
            kind="version",
        )
        d.score = S.version_split
        parts = "; ".join(f"{w.ranks_phrase(rs)}: {v}" for v, rs in groups)
        d.summary = f"The ranks run different {name} versions ({parts})."
        d.rules_in.append(f"{name} versions differ across ranks: {parts}.")
        d.evidence = [evidence(r) for r in rows.filter(pl.col("rank").is_in(odd)).head(3).to_dicts()]
        drafts.append(d)
    drafts.extend(_system_version(ctx))
    return drafts


def _system_version(ctx: Context) -> list[Draft]:
    """A host service that refused to start because its version does not match the driver (the
    fabric manager of an NVSwitch node): the GPUs of that host cannot carry collectives, so every
    rank there waits in the first one. A cause, not a rank fault."""
    rows = ctx.ev.filter(
        (pl.col("signal") == Signal.VERSION)
        & (pl.col("category") == Category.VERSION_MISMATCH)
        & pl.col("severity").is_in([Severity.ERROR, Severity.CRITICAL])
    )
    if rows.height == 0:
        return []
    first = _first(rows.to_dicts(), 3)
    hosts = sorted({r["host"] for r in rows.to_dicts() if r.get("host")})
    lead = first[0]
    d = Draft(category=Category.VERSION_MISMATCH, culprits=(), hosts=tuple(hosts), kind="system_version")
    # Above the generic failure reading of the same line: this one says what the service is for.
    d.score = S.version_system
    where = f" on {', '.join(hosts)}" if hosts else ""
    versions_text = (
        f" ({lead['local_version']} against driver {lead['remote_version']})"
        if lead.get("local_version") and lead.get("remote_version")
        else ""
    )
    d.summary = (
        f"A GPU system service{where} did not start because its version does not match the loaded "
        f"driver{versions_text}: the GPUs there cannot carry collectives, so the ranks wait in them. "
        "This is a node setup problem, not a rank problem."
    )
    d.rules_in.append(f"{lead['pattern']}: {lead['message'].strip()[:200]}")
    d.rules_out.append(
        "An init or first-collective hang on every rank, with no rank failing first, is what a "
        "node whose GPU fabric was never set up produces; no rank is to blame."
    )
    d.evidence = [evidence(r) for r in first]
    d.remediation = _remediation(ctx.library, first)
    return [d]


STOP_WORDS = vocabulary().stop_words  # an exit from outside: cancelled, not failed


def stop_lines(ev: pl.DataFrame) -> pl.DataFrame:
    """Process exits whose words say the job was stopped from outside, less a launcher's stop of
    the siblings of a child that had ended (``reaction_stop_patterns``)."""
    words = pl.concat_str(pl.col("signal_name").fill_null(""), pl.lit(" "), pl.col("message").fill_null(""))
    return ev.filter(
        (pl.col("signal") == Signal.PROCESS_EXIT)
        & words.str.contains_any(list(STOP_WORDS))
        & ~pl.col("pattern").is_in(list(vocabulary().reaction_stop_patterns))
    )


VIRTUAL_IFACE = vocabulary().virtual_iface  # container, bridge, overlay and loopback interfaces


def same_rank_twice(ctx: Context) -> list[Draft]:
    """Start-up banners (each process prints one) claim some ranks twice while other ranks of the
    printed world never appear: processes were started as the same ranks (on several nodes, the
    node rank did not reach them), and the rendezvous waits for ranks nobody runs."""
    if not ctx.library.banner_patterns or "own_rank" not in ctx.ev.columns:
        return []
    banners = ctx.ev.filter(
        pl.col("pattern").is_in(list(ctx.library.banner_patterns)) & pl.col("own_rank").is_not_null()
    )
    if not banners.height or ctx.ev.filter(pl.col("signal") == Signal.PROGRESS).height:
        return []
    world = int(banners["world_size"].fill_null(0).max() or 0)  # type: ignore[arg-type]
    claims = banners.group_by("own_rank").len()
    twice = sorted(int(r) for r, n in claims.iter_rows() if n >= 2)
    never = [r for r in range(world) if r not in set(claims["own_rank"].to_list())]
    if not twice or not never or len(never) > S.startup_same_rank_max_never:
        return []
    d = Draft(category=Category.BOOTSTRAP_RENDEZVOUS, culprits=(), kind="startup")
    d.score = S.startup_same_rank
    d.summary = (
        f"{w.ranks_phrase(twice, capital=True)} started twice and {w.ranks_phrase(never)} never, in a world of "
        f"{world}: processes were started as the same ranks (on several nodes, the node rank did not reach them), "
        "so the rendezvous waited for ranks nobody ran."
    )
    d.rules_in.append(
        f"The start-up line each process prints once appears twice for {w.ranks_phrase(twice)} and never for "
        f"{w.ranks_phrase(never)}."
    )
    d.rules_out.append("No training progress after it: the job never got past start-up.")
    d.evidence = [evidence(r) for r in banners.sort("_i").head(4).to_dicts()]
    d.remediation = steps("rendezvous", ctx.versions)
    return [d]


def _failed_on_its_own(ev: pl.DataFrame) -> bool:
    """Some worker exited with a positive code: it failed of itself (an uncaught error, a
    sys.exit(1)), where a stop from outside leaves a signal (negative code or 128+N)."""
    codes = ev.filter(pl.col("signal").is_in([Signal.PROCESS_EXIT, Signal.ROOT_CAUSE]))["exitcode"]
    return bool(codes.is_between(1, 127).any())


def startup_hang(ctx: Context) -> list[Draft]:
    """The job was stopped from outside (cancelled, interrupted, killed by a time limit) with no
    watchdog timeout and no rank failure: how far did the ranks get before they stopped moving?

    Never reached NCCL -> the rendezvous did not complete; NCCL set up but no communicator
    finished init -> communicator init hung (often interface selection); every communicator ready
    and nothing after -> the first collective hung (often the P2P path)."""
    if ctx.main is not None:
        return []
    if any(st.failure is not None and st.failure.weight >= S.weight_cause for st in ctx.states.values()):
        return []
    if any(f.weight >= S.weight_cause for f in ctx.unattributed):
        return []
    ev = ctx.ev
    stopped = stop_lines(ev).to_dicts()
    if _failed_on_its_own(ev):
        # the launcher's closing signals to the siblings of a worker that failed of itself (a
        # positive exit code) are its reaction to that failure, not a stop from outside
        stopped = [r for r in stopped if "closing signal" not in (r.get("message") or "")]
    stalls = ev.filter(pl.col("signal") == Signal.STALL).to_dicts()
    if not stopped and not stalls:
        return []
    if ev.filter(
        (pl.col("signal") == Signal.PROGRESS)
        & (pl.col("op_count").is_not_null() | pl.col("step").is_not_null())
    ).height:
        return []
    if ev.filter(pl.col("signal").is_in(list(HANG_SIGNALS))).height:
        return []  # a watchdog of running work fired: the job was past start-up, and hung later
    init = ev.filter(pl.col("signal") == Signal.INIT)
    boot = ev.filter(pl.col("signal") == Signal.BOOTSTRAP)
    complete = init.filter(
        pl.col("phase").fill_null("").str.contains("COMPLETE")
        | pl.col("message").str.contains("Init COMPLETE")
    )
    stop_ev = [evidence(r) for r in _first(stopped or stalls, 2)]
    if init.height == 0 and boot.height == 0:
        return [_before_nccl(ctx, stop_ev)]
    ranks_init = {r for r in init["rank"].to_list() if r is not None}
    ranks_done = {r for r in complete["rank"].to_list() if r is not None}
    if complete.height == 0 or (ranks_init and not ranks_init <= ranks_done):
        virtual = boot.filter(
            pl.col("message").map_elements(
                lambda m: bool(VIRTUAL_IFACE.search(m or "")), return_dtype=pl.Boolean
            )
        )
        socket = boot.filter(pl.col("message").str.contains("Socket")).height > 0 or bool(
            boot.filter(pl.col("net") == "Socket").height
        )
        if virtual.height:
            names = sorted(
                {
                    m.group(1) or "link-local IPv6"
                    for t in virtual["message"].to_list()
                    if (m := VIRTUAL_IFACE.search(t))
                }
            )
            d = Draft(category=Category.NETWORK_SOCKET, culprits=(), kind="startup")
            d.score = S.startup_virtual_iface
            d.summary = (
                f"NCCL's communicator setup hung on every rank after it picked up the virtual interface(s) "
                f"{', '.join(names)} alongside the real one; the socket connections over them never completed."
            )
            d.rules_in.append(
                f"The NET/Socket lines list {', '.join(names)} (container/bridge or link-local) among the interfaces NCCL uses."
            )
            d.rules_in.append(
                "No communicator finished init, and the job was stopped from outside without any error."
            )
            d.evidence = [evidence(r) for r in virtual.head(2).to_dicts()] + stop_ev
            d.remediation = steps("virtual_iface", ctx.versions)
            return [d]
        d = Draft(
            category=Category.NETWORK_SOCKET if socket else Category.INIT_FAILURE, culprits=(), kind="startup"
        )
        d.score = S.startup_init_hang
        d.summary = "NCCL communicator init never completed on any rank; the job was stopped while the ranks waited in it."
        d.rules_in.append("NCCL bootstrap lines but no 'Init COMPLETE', no error, and an external stop.")
        d.evidence = stop_ev
        d.collect.extend(steps("collect_logs", ctx.versions))
        return [d]
    p2p = init.filter(pl.col("message").str.contains("via P2P")).height > 0
    d = Draft(category=Category.P2P_TOPOLOGY if p2p else Category.STRAGGLER_HANG, culprits=(), kind="startup")
    d.score = S.startup_p2p if p2p else S.startup_idle
    d.summary = (
        "Every communicator finished init over P2P and then nothing moved until the job was stopped: the first "
        "collective hung on the GPU peer-to-peer path."
        if p2p
        else "Every communicator finished init and then nothing moved until the job was stopped."
    )
    d.rules_in.append("Init COMPLETE on every rank, no collective progress and no error afterwards.")
    d.evidence = [evidence(r) for r in complete.head(2).to_dicts()] + stop_ev
    if p2p:
        d.evidence[:0] = [
            evidence(r) for r in init.filter(pl.col("message").str.contains("via P2P")).head(1).to_dicts()
        ]
        # GPU peer traffic through PCIe switches (PIX/PXB), or P2P settings in play: the PCIe
        # peer path (ACS, IOMMU) is the usual reason P2P connects and then never moves data.
        switch = init.filter(pl.col("path_type").fill_null("").str.contains(r"\bPIX\b|\bPXB\b"))
        p2p_env = ev.filter(
            (pl.col("signal") == Signal.ENV_SETTING)
            & pl.col("env_var").fill_null("").str.starts_with("NCCL_P2P")
        )
        if switch.height:
            d.score += S.startup_pcie_switch
            d.rules_in.append(
                f"NCCL's topology search routes GPU peer traffic through PCIe switches (type {switch['path_type'][0]}): "
                "with ACS or an IOMMU (VT-d) active, switch-local peer transfers are redirected or dropped."
            )
            d.evidence.insert(1, evidence(switch.head(1).to_dicts()[0]))
        if p2p_env.height:
            d.rules_in.append(
                "P2P settings were in play: "
                + ", ".join(sorted({f"{r['env_var']}={r['env_value']}" for r in p2p_env.to_dicts()}))[:200]
                + "."
            )
        d.remediation = steps("p2p_path", ctx.versions)
    return [d]


def _before_nccl(ctx: Context, stop_ev: list[Evidence]) -> Draft:
    """A stop with no NCCL line from any rank: the rendezvous never completed, unless NCCL's lines
    were simply not logged and the stop's tracebacks show the processes inside a collective."""
    ev = ctx.ev
    env = _rendezvous_env(ctx)
    # Without NCCL's INFO lines and with no set-up frame, where the ranks waited shows only in the
    # tracebacks the stop printed (`unseen`).
    unseen = not _nccl_debug_on(ev) and not ev.filter(pl.col("signal") == Signal.SETUP_FRAME).height
    waited = ev.filter(pl.col("signal") == Signal.COLLECTIVE_FRAME)
    if unseen and waited.height:
        return _stopped_in_collective(ctx, waited, stop_ev)
    d = Draft(category=Category.BOOTSTRAP_RENDEZVOUS, culprits=(), kind="startup")
    d.score = S.startup_rendezvous_unlogged if unseen else S.startup_rendezvous
    d.summary = (
        "The job was stopped before any rank set up NCCL: the ranks never got through the rendezvous "
        "(init_process_group)" + (f"; {env[0]}" if env else "") + "."
    )
    d.rules_in.append(
        "No NCCL line from any rank, no collective, and the job ended by being stopped from outside."
    )
    if unseen:
        d.rules_out.append(
            "NCCL's own lines were not logged (NCCL_DEBUG was not INFO), so their absence does not show "
            "that no rank reached NCCL."
        )
        d.collect.extend(steps("collect_logs", ctx.versions))
    if env:
        d.score += S.startup_rendezvous_env
        d.rules_in.extend(env)
    d.rules_out.append(
        "No rank crashed or reported an error, so nothing but the rendezvous explains the wait."
    )
    d.evidence = stop_ev
    d.remediation = steps("rendezvous", ctx.versions)
    return d


def _nccl_debug_on(ev: pl.DataFrame) -> bool:
    """Whether NCCL's INFO lines were being logged: only then does their absence mean that no rank
    reached NCCL (NCCL_DEBUG=INFO prints the version and bootstrap lines of every communicator)."""
    text = pl.col("text").fill_null("")
    # the setting on a command line, an export or a settings echo; torch's errors advise to "run
    # with NCCL_DEBUG=INFO", which sets nothing
    setting = text.str.contains(r"NCCL_DEBUG=['\"]?(?:INFO|TRACE)\b") & ~text.str.contains(
        "with NCCL_DEBUG", literal=True
    )
    return ev.filter(text.str.contains("NCCL INFO", literal=True) | setting).height > 0


def _stopped_in_collective(ctx: Context, frames: pl.DataFrame, stop_ev: list[Evidence]) -> Draft:
    """The job was stopped while its processes' tracebacks show them inside a collective call, and
    NCCL's own lines were not logged: the rendezvous was done and the collective never completed."""
    funcs = sorted({f for f in frames["func"].to_list() if f})
    calls = ", ".join(f"{f}()" for f in funcs[:3])
    d = Draft(category=Category.STRAGGLER_HANG, culprits=(), kind="startup")
    d.score = S.startup_idle
    d.summary = (
        f"The job was stopped while its processes waited inside {calls}: the rendezvous had completed and "
        "the collective never did. NCCL's own lines were not logged, so the path it hung on is not shown."
    )
    d.rules_in.append(
        f"The tracebacks printed at the stop pass through torch.distributed's {calls}, with no error before them."
    )
    d.rules_out.append(
        "Not the rendezvous: a process inside a collective has its process group already (no set-up frame in the "
        "tracebacks)."
    )
    d.evidence = [evidence(frames.sort("_i").row(0, named=True)), *stop_ev]
    d.remediation = steps("first_collective", ctx.versions)
    d.collect.extend(steps("collect_logs", ctx.versions))
    return d


def _rendezvous_env(ctx: Context) -> list[str]:
    """What the MASTER_ADDR / MASTER_PORT settings the ranks printed say about the rendezvous."""
    rows = ctx.ev.filter(
        pl.col("env_var").is_in(["MASTER_ADDR", "MASTER_PORT"]) & pl.col("env_value").is_not_null()
    )
    if rows.height == 0:
        return []
    out = []
    addrs = sorted(set(rows.filter(pl.col("env_var") == "MASTER_ADDR")["env_value"].to_list()))
    ports = sorted(set(rows.filter(pl.col("env_var") == "MASTER_PORT")["env_value"].to_list()))
    hosts = {h for h in ctx.ev["host"].drop_nulls().unique().to_list()} | set(ctx.book.host_ranks)
    if any(a in LOOPBACK_NAMES for a in addrs) and len(hosts) > 1:
        out.append(
            f"MASTER_ADDR is {', '.join(a for a in addrs if a in LOOPBACK_NAMES)} on a job spanning {len(hosts)} hosts"
        )
    if len(addrs) > 1:
        out.append(f"the ranks were given {len(addrs)} different MASTER_ADDR values")
    if len(ports) > 1:
        out.append(f"the ranks were given {len(ports)} different MASTER_PORT values")
    return out
