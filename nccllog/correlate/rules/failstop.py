"""Fail-stop: a rank's own failure (OOM, CUDA error, crash, exception, Xid) and the cascade after it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import polars as pl

from nccllog.correlate import wording as w
from nccllog.correlate.ranks_state import Failure, failure_order
from nccllog.correlate.rules.base import (
    Context,
    Draft,
    _host,
    _hosts_seen,
    _remediation,
    evidence,
)
from nccllog.correlate.rules.scores import S
from nccllog.correlate.rules.wording import _cascade, _failure_clause, _failure_text
from nccllog.correlate.taxonomy import reports_sigkill
from nccllog.model import Evidence
from nccllog.vocab import ENV_CAUSES, Category, Signal

NETWORK_SIGNALS = (Signal.NETWORK_IB, Signal.NETWORK_SOCKET)
FAILSTOP_EXCLUDE = (*NETWORK_SIGNALS, Signal.STORE_TIMEOUT)
# lines of a process setting itself up (devices, transports, versions, settings), not running
SETUP_SIGNALS = (Signal.INIT, Signal.BOOTSTRAP, Signal.ENV_SETTING, Signal.VERSION)


def failstop(ctx: Context) -> list[Draft]:
    """A rank's own failure (OOM, CUDA error, crash, exception, Xid…) and the cascade after it."""
    fails: list[Failure] = [
        st.failure
        for st in ctx.states.values()
        if st.failure is not None
        and st.failure.weight >= S.weight_cause
        and st.failure.signal not in FAILSTOP_EXCLUDE
    ]
    fails += [f for f in ctx.unattributed if f.weight >= S.weight_cause and f.signal not in FAILSTOP_EXCLUDE]
    known = [st.failure for st in ctx.states.values() if st.failure is not None] + list(ctx.unattributed)
    fails = [f for f in fails if not _wraps_a_specific_failure(f, known)]
    fails = _without_explained_deaths(ctx, fails)
    fails = _before_own_network_fault(ctx, fails)
    if not fails:
        return []
    groups: dict[str, list[Failure]] = defaultdict(list)
    for f in fails:
        groups[f.category].append(f)
    main = ctx.main
    first_timeout = main.first_time if main else None
    earliest_any = min((f.time for f in fails if f.time is not None), default=None)
    drafts = []
    for cat, fs in groups.items():
        fs.sort(key=failure_order)
        lead = fs[0]
        ranks = sorted({f.rank for f in fs if f.rank is not None})
        hosts = sorted({f.host for f in fs if f.rank is None and f.host})
        named = _named_ranks(ctx, fs)
        culprits, everyone, witnessed = _culprits(ctx, fs, named, ranks)
        killed = cat == Category.OOM and all(_killed(f) for f in fs)
        if (cat in ENV_CAUSES or all(f.signal in SETUP_SIGNALS for f in fs) or killed) and not named:
            culprits, hosts = (), _machines(ctx, fs)
        d = Draft(category=cat, culprits=culprits, hosts=tuple(hosts), kind="failstop")
        d.score = max(f.weight for f in fs)
        if killed and not named:
            d.rules_in.append(KILLED_NOTE)
        what = _failure_text(lead)
        who = _who(named, ranks, hosts)
        when = f" at {w.clock(lead.time)}" if lead.time else ""
        if everyone:
            _every_rank_alike(ctx, d, lead, ranks, what, when)
        elif witnessed:
            d.summary = f"{who} reported '{what}'{when}: the line tells where the fault was noticed, not which rank caused it"
        elif killed and not named:
            d.summary = f"{_failure_clause(lead, who)}{when}: killed by SIGKILL, as a host that runs out of memory does"
        else:
            d.summary = f"{_failure_clause(lead, who)}{when}"
        d.rules_in.append(f"{who} logged '{what}'{when} ({lead.row['source']}:{lead.row['line']}).")
        cascade = _cascade(ctx, culprits or tuple(ranks), lead)
        if main is not None:
            if lead.time is not None and first_timeout is not None:
                if lead.time <= first_timeout:
                    lag = (first_timeout - lead.time).total_seconds()
                    d.rules_in.append(
                        f"It came {w.seconds(lag * 1000)} before the first watchdog timeout ({w.collective(main.op, main.seq)}, "
                        f"{w.clock(first_timeout)}): the timeouts are the cascade."
                    )
                    d.score += S.failstop_before_timeouts
                else:
                    d.score *= S.failstop_after_factor
                    d.after = True
                    d.rules_out.append(
                        f"It was logged after the first watchdog timeout ({w.clock(first_timeout)}), so it may be a consequence."
                    )
            elif set(culprits) & set(main.silent):
                d.rules_in.append(
                    f"{w.ranks_phrase(set(culprits) & set(main.silent), capital=True)} is also the rank the others waited for at "
                    f"{w.collective(main.op, main.seq)}."
                )
                d.score += S.failstop_awaited
            elif set(ranks) and set(ranks) <= set(main.reporters):
                d.score -= S.failstop_also_timed_out
                d.rules_out.append(
                    f"{w.ranks_phrase(ranks, capital=True)} also timed out in {w.collective(main.op, main.seq)} like the others; "
                    "without timestamps the order of the two is not known."
                )
        if (
            earliest_any is not None
            and lead.time is not None
            and (lead.time - earliest_any).total_seconds() > S.failstop_earlier_other_s
        ):
            d.score -= S.failstop_earlier_other
            d.rules_out.append(f"Another failure came earlier ({w.clock(earliest_any)}).")
        d.summary = d.summary.rstrip(".") + (f"; {cascade}." if cascade else ".")
        d.evidence = [evidence(f.row) for f in fs[:4]] + _cascade_evidence(ctx, culprits or tuple(ranks))
        d.remediation = _remediation(ctx.library, [f.row for f in fs[:3]])
        drafts.append(d)
    return drafts


def _every_rank_alike(ctx: Context, d: Draft, lead: Failure, ranks: list[int], what: str, when: str) -> None:
    """Word a failure every rank logged alike; while some ranks left no log, "all" is not shown."""
    d.summary = (
        f"{_failure_clause(lead, 'Every rank')}{when}: the fault is common to all ranks, not one rank's"
    )
    d.rules_in.append(f"{w.ranks_phrase(ranks, capital=True)} all logged {what}.")
    if absent := sorted(set(ctx.missing) - set(ranks)):
        d.ceiling_why = (
            f"every rank whose log is here failed alike, but {w.ranks_phrase(absent)} left no log: "
            "whether the fault is common to all is not shown"
        )


# Exit codes of a process killed by SIGKILL: -9 from torchrun and Python, 137 from a shell/container.
KILLED_EXITCODES = (-9, 137)
KILLED_NOTE = (
    "A SIGKILL with no out-of-memory message of the process's own is what the kernel's OOM killer (or a "
    "container's memory limit) sends: the machine ran out of host memory, and the rank it killed is its "
    "choice of victim, not necessarily the rank that used the most."
)


def _killed(f: Failure) -> bool:
    """Another process's report that this one died of SIGKILL, with nothing of the process's own: a
    launcher's exit code or signal, or the words of the taxonomy's ``killed`` classes."""
    if f.signal in (Signal.PROCESS_EXIT, Signal.ROOT_CAUSE) and (
        f.row.get("exitcode") in KILLED_EXITCODES or f.row.get("signal_name") == "SIGKILL"
    ):
        return True
    return reports_sigkill(str(f.row.get("text") or ""))


def _without_explained_deaths(ctx: Context, fails: list[Failure]) -> list[Failure]:
    """``fails`` less the reports of a sudden death that another failure or a watchdog timeout in
    the logs explains (the taxonomy's ``alone`` classes: Ray's lost worker is also what an abort
    looks like)."""
    deaths = [reports_sigkill(str(f.row.get("text") or ""), alone=True) for f in fails]
    if not any(deaths):
        return fails
    hung = any(st.timeouts or st.hang_time is not None for st in ctx.states.values())
    if hung or not all(deaths):
        return [f for f, death in zip(fails, deaths, strict=True) if not death]
    return fails


def _before_own_network_fault(ctx: Context, fails: list[Failure]) -> list[Failure]:
    """``fails`` less those a process logged after its own transport failed earlier in the same
    file (an IB completion error, a lost socket: the network rule's lines). NCCL aborts the
    communicator on such an error, and what the process hits next (an illegal memory access of a
    kernel left half done, an aborted collective) follows from it."""
    net = (
        ctx.ev.filter(
            pl.col("signal").is_in(NETWORK_SIGNALS) & (pl.col("_fw") > 0) & pl.col("pid").is_not_null()
        )
        .group_by("source", "pid")
        .agg(pl.col("line").min())
    )
    if net.height == 0:
        return fails
    first = {(src, pid): line for src, pid, line in net.iter_rows()}
    return [
        f
        for f in fails
        if (line := first.get((f.row.get("source"), f.row.get("pid")))) is None or line >= f.row["line"]
    ]


def _culprits(
    ctx: Context, fs: list[Failure], named: list[int], ranks: list[int]
) -> tuple[tuple[int, ...], bool, bool]:
    """The ranks a group of failures blames; whether every rank failed alike; whether its lines are
    a witness's (a rank that saw the fault, not one that caused it)."""
    everyone = not named and len(ranks) >= 2 and set(ranks) >= set(ctx.seen)
    culprits: tuple[int, ...] = tuple(named or ([] if everyone else ranks))
    witnessed = all(f.row.get("pattern") in ctx.library.witness_patterns for f in fs)
    if witnessed:
        # The reporters saw the fault; the lines alone do not say whose call diverged. A reporter
        # that is also the rank the others waited for in a hang is out of step by both counts.
        culprits = tuple(sorted(set(ranks) & set(ctx.main.silent))) if ctx.main is not None else ()
    return culprits, everyone, witnessed


def _machines(ctx: Context, fs: list[Failure]) -> list[str]:
    """Where a fault of the machine lies, not of the process that reported it (a setup cause, a
    cause found while setting up, a kill by the host's OOM killer): the machines, named when they
    are not every machine seen."""
    places = {h for f in fs if (h := _place(ctx, f))}
    return sorted(places) if places < _hosts_seen(ctx) else []


def _place(ctx: Context, f: Failure) -> str | None:
    """The machine of the rank a failure is about. A line one process writes about another rank
    (NCCL's bootstrap root on a rank that checked in twice) carries the writer's host, not its
    subject's; a launcher's line about a worker carries the worker's."""
    about_other = f.row.get("target_rank") is not None and f.row.get("rank") != f.rank
    if about_other and f.signal not in (Signal.PROCESS_EXIT, Signal.ROOT_CAUSE):
        return _host(ctx, f.rank) if f.rank is not None else None
    return f.host or (_host(ctx, f.rank) if f.rank is not None else None)


def _who(named: list[int], ranks: list[int], hosts: list[str]) -> str:
    """The subject of a failure sentence: the ranks named, else the failing ranks, else the place."""
    if named or ranks:
        return w.ranks_phrase(named or ranks, capital=True)
    return f"A process on {w.host_list(hosts)}" if hosts else "A process"


WRAPPER_WINDOW = 40  # lines: torch prints NCCL's generic error, then its "Last error:", near the WARN


def _wraps_a_specific_failure(f: Failure, known: list[Failure]) -> bool:
    """A generic NCCL error (``NCCL error in: …, invalid usage``, ``ncclInvalidUsage: This usually
    reflects …``) that the same log explains with a specific failure close by (the NCCL WARN it
    wraps, repeated under ``Last error:``): the specific one is the cause, the wrapper its carrier."""
    if f.signal != Signal.NCCL_ERROR:
        return False
    src, line = f.row["source"], f.row["line"]
    return any(
        g.signal != Signal.NCCL_ERROR
        and g.weight >= S.weight_cause
        and g.row["source"] == src
        and abs(line - g.row["line"]) <= WRAPPER_WINDOW
        for g in known
    )


def _named_ranks(ctx: Context, fs: list[Failure]) -> list[int]:
    """Ranks a failure line names explicitly (``Duplicate GPU detected : rank 1 and rank 9``)."""
    out: set[int] = set()
    for f in fs:
        if f.signal == Signal.DUPLICATE_GPU:
            for k in ("target_rank", "other_rank"):
                v = f.row.get(k)
                if v is not None:
                    out.add(int(v))
    population = set(ctx.world) | set(ctx.seen) | out
    if out and 2 * len(out) >= len(population) and len(population) > 1:
        # Half the job or more on one device: the launch did not give each process its own GPU
        # (no LOCAL_RANK binding). That is the job's setup, not a fault of the ranks named.
        return []
    return sorted(out)


def _cascade_evidence(ctx: Context, culprits: Sequence[int]) -> list[Evidence]:
    main = ctx.main
    if main is None:
        return []
    return [evidence(t.row, "cascade") for t in main.reports[:3] if t.rank not in culprits]
