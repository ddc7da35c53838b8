"""Each rank's state in one vocabulary (``RankStatus``), and its culprit and outlier flags.

Runs on the finished Incident (after the verdict), so that a rank of a job that did not finish
never reads "ok": the words depend on how the job ended as well as on the rank's own lines.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from nccllog.correlate.timeline import wait_began
from nccllog.ingest.timestamps import parse_iso
from nccllog.model import Incident, RankInfo, RankStatus

# Verdicts under which a rank with no collective progress and no error of its own was stuck in
# setup (rendezvous, communicator init, transport setup), not in training.
_SETUP_CATEGORIES = frozenset(
    {
        "bootstrap_rendezvous",
        "init_failure",
        "network_socket",
        "network_ib",
        "p2p_topology",
        "version_mismatch",
    }
)
# diagnose's short words for a rank's own failure, by category.
_CRASH_WORDS = frozenset({"OOM", "CUDA error", "crashed", "Xid"})

LABELS: dict[RankStatus, str] = {
    RankStatus.TIMED_OUT: "timed out",
    RankStatus.NOT_IN_COLLECTIVE: "not in the collective",
    RankStatus.CRASHED: "crashed",
    RankStatus.EXITED: "exited",
    RankStatus.HUNG_IN_INIT: "hung in init",
    RankStatus.NO_ERROR_LOGGED: "no error logged",
    RankStatus.FINISHED: "finished",
    RankStatus.NO_LOG: "no log",
}

# One sentence per state, for the reports' legends.
MEANINGS: dict[RankStatus, str] = {
    RankStatus.TIMED_OUT: "its watchdog gave up waiting in that collective",
    RankStatus.NOT_IN_COLLECTIVE: "it never reached the collective the others waited in",
    RankStatus.CRASHED: "it logged a failure of its own",
    RankStatus.EXITED: "only its exit code is known",
    RankStatus.HUNG_IN_INIT: "the job never got past setup and this rank logged no error",
    RankStatus.NO_ERROR_LOGGED: "the job failed but this rank's lines show no error",
    RankStatus.FINISHED: "the job finished and so did this rank",
    RankStatus.NO_LOG: "other ranks name it; it left no line of its own",
}


def _no_progress(r: RankInfo) -> bool:
    return (
        r.last_enqueued is None
        and r.last_completed is None
        and r.timed_out_seq is None
        and r.last_step is None
    )


def state_of(r: RankInfo, incident: Incident) -> tuple[RankStatus, str]:
    """The rank's state and the words a report shows for it."""
    words = r.status
    if words == "no log":
        return RankStatus.NO_LOG, "no log"
    if words.startswith("timed out"):
        return RankStatus.TIMED_OUT, words
    if words == "silent":
        return RankStatus.NOT_IN_COLLECTIVE, "not in the collective"
    if words.startswith("exited"):
        return RankStatus.EXITED, words
    if words in _CRASH_WORDS:
        return RankStatus.CRASHED, "crashed" if words == "crashed" else f"crashed ({words})"
    if words and words != "ok":  # a failure of another category, e.g. "network ib"
        return RankStatus.CRASHED, f"failed ({words})"
    if incident.verdict.category == "no_failure" and incident.verdict.confidence != "low":
        return RankStatus.FINISHED, "finished"  # positive evidence the job ended normally
    stuck_in_setup = incident.verdict.category in _SETUP_CATEGORIES and not incident.collectives
    if stuck_in_setup and _no_progress(r):
        return RankStatus.HUNG_IN_INIT, "hung in init"
    return RankStatus.NO_ERROR_LOGGED, "no error logged"


def stuck_since(incident: Incident) -> dict[int, str]:
    """``rank -> ISO time`` at which each timed-out rank entered the collective it timed out in:
    its timeout line's time minus the elapsed time that line reports ("ran for N milliseconds")."""
    out: dict[int, str] = {}
    for f in incident.findings:
        ms = f.fields.get("elapsed_ms")
        if f.rank is None or f.rank in out or not f.time or not isinstance(ms, int):
            continue
        t = parse_iso(f.time)
        if t is not None and (began := wait_began(t, ms)) is not None:
            out[f.rank] = began.isoformat()
    return out


def _signature(r: RankInfo) -> tuple[object, ...]:
    return (r.state, r.status, r.last_enqueued, r.last_completed, r.timed_out_seq)


def classify(incident: Incident) -> Incident:
    """The Incident with every rank's ``status``/``state`` in the shared vocabulary, its
    ``stuck_since`` (timed-out ranks) and its ``culprit`` and ``outlier`` flags set (an outlier: its state or progress is shared by at most
    one rank in twenty, while most ranks agree)."""
    culprits = set(incident.verdict.culprit_ranks)
    since = stuck_since(incident)
    ranks = []
    for r in incident.ranks:
        state, words = state_of(r, incident)
        ranks.append(
            dataclasses.replace(
                r,
                state=state.value,
                status=words,
                culprit=r.rank in culprits,
                stuck_since=since.get(r.rank) if state is RankStatus.TIMED_OUT else None,
            )
        )
    counts = Counter(_signature(r) for r in ranks)
    crowd = max(counts.values(), default=0)
    small = max(1, len(ranks) // 20)
    if len(ranks) >= 3 and crowd * 2 > len(ranks):
        ranks = [
            dataclasses.replace(r, outlier=counts[_signature(r)] <= small and not r.culprit) for r in ranks
        ]
    return dataclasses.replace(incident, ranks=tuple(ranks))
