"""Flight Recorder dumps across ranks: where they diverge, who diverged, and from which call site.

Per process group, the collective everyone is stuck in is the oldest one some rank has not
completed: ``S = min(last completed) + 1``. Then, in order:

1. a rank that never enqueued ``S`` (its last enqueued collective is behind) is the one the others
   wait for ("missing");
2. otherwise the earliest sequence number up to ``S`` where one rank's call differs from the
   others' (operation, sizes, dtypes) names that rank ("mismatch"): a rank that issued an extra
   collective diverges there, and it is the one blamed, not the healthy ranks that did not follow it
   (PyTorch's fr_trace reports those as "missing");
3. otherwise a rank whose entry at ``S`` is still ``scheduled`` while the others have started it
   has not reached it on its GPU ("not started").

Dumps join the events table as rows of their own (signal ``flight_recorder``: each rank's process
group status and its recent entries; ``flight_divergence``: the facts above), so that every
report shows them next to the text lines; ``rule`` turns the facts into hypotheses.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from nccllog.correlate import wording as w
from nccllog.correlate.rules.base import Context, Draft, evidence
from nccllog.ingest.flight import Dump, Entry
from nccllog.model import EVENT_BASE_COLUMNS

RECENT = 4  # completed entries kept per rank and group before the oldest pending one
ATTRIBUTION = "flight recorder dump"
COLLECT = (
    "TORCH_FR_DUMP_TEMP_FILE=<shared dir>/fr_rank_ (torch >= 2.8; TORCH_NCCL_DEBUG_INFO_TEMP_FILE before): "
    "every rank's dump lands where it can be collected",
)


@dataclass(frozen=True)
class Divergence:
    """Where one process group's ranks part ways."""

    kind: str  # missing | mismatch | not_started
    pg: str
    pg_desc: str
    seq: int
    culprits: tuple[int, ...]
    ranks: tuple[int, ...]  # the group's ranks that left a dump
    expected: int  # how many ranks the group has
    op: str  # what the others called at seq
    culprit_op: str | None  # what the culprit called there (None when it never got there)
    waiting_site: str | None
    culprit_site: str | None
    culprit_last: str | None  # the culprit's last enqueued collective, "nccl:x seq N"

    @property
    def category(self) -> str:
        """The verdict category this divergence points to."""
        return "collective_mismatch" if self.kind == "mismatch" else "straggler_hang"

    def sentence(self) -> str:
        """One sentence for reports."""
        who = w.ranks_phrase(self.culprits, capital=True)
        group = f"process group {self.pg}" + (f" ({self.pg_desc})" if self.pg_desc else "")
        at = f" at {self.culprit_site}" if self.culprit_site else ""
        waiting = f" (the others wait at {self.waiting_site})" if self.waiting_site else ""
        if self.kind == "missing":
            last = f"; its last collective was {self.culprit_last}{at}" if self.culprit_last else ""
            return f"{who} never called {self.op} #{self.seq} of {group}{waiting}{last}."
        if self.kind == "mismatch":
            return (
                f"{who} called {self.culprit_op}{at} as #{self.seq} of {group} where the others called "
                f"{self.op}{waiting}."
            )
        return (
            f"{who} had not started {self.op} #{self.seq} of {group} on its GPU when the others had{waiting}."
        )


def assign_ranks(dumps: Sequence[Dump], events: pl.DataFrame) -> list[Dump]:
    """Give each dump its rank: from its file name, else from the log line that says it wrote that
    file (``Finished writing … debug info to <path>``), else from its process groups (the one rank
    in all of them). A source its process groups rule out is not used; disagreements are noted."""
    by_name: dict[str, list[tuple[int, str]]] = {}
    if events.height and "path" in events.columns:
        rows = events.filter(
            (pl.col("signal") == "dump") & pl.col("path").is_not_null() & pl.col("rank").is_not_null()
        )
        for path, rank, src, line in rows.select("path", "rank", "source", "line").iter_rows():
            by_name.setdefault(os.path.basename(str(path)), []).append((int(rank), f"{src}:{line}"))
    out: list[Dump] = []
    for d in sorted(dumps, key=lambda d: d.source):
        allowed = d.allowed_ranks()
        claims: list[tuple[int, str]] = []
        if d.rank is not None:
            claims.append((d.rank, "its file name"))
        for rank, where in by_name.get(os.path.basename(d.source), [])[:4]:
            claims.append((rank, f"the log line that says it wrote the file ({where})"))
        if allowed is not None and len(allowed) == 1:
            claims.append((next(iter(allowed)), "its process groups (the one rank in all of them)"))
        fits = [(r, why) for r, why in claims if allowed is None or r in allowed]
        rank = fits[0][0] if fits else None
        notes = []
        if len({r for r, _why in claims}) > 1 or len(fits) < len(claims):
            said = "; ".join(f"{why} says rank {r}" for r, why in claims)
            groups = "" if allowed is None else f"; its process groups allow {w.ranks_phrase(allowed)}"
            used = f"rank {rank}" if rank is not None else "no rank"
            notes.append(f"{d.source}: Flight Recorder dump rank conflict: {said}{groups}; using {used}")
        out.append(dataclasses.replace(d, rank=rank, notes=tuple(notes)))
    return _one_per_rank(out)


def _one_per_rank(dumps: list[Dump]) -> list[Dump]:
    """Of several dumps of one rank, the first (by file name) keeps the rank; the others are noted."""
    first: dict[int, str] = {}
    out = []
    for d in dumps:
        if d.rank is not None and d.rank in first:
            note = (
                f"{d.source}: Flight Recorder dump of rank {d.rank} again (also {first[d.rank]}); "
                f"only {first[d.rank]} is used"
            )
            d = dataclasses.replace(d, rank=None, notes=(*d.notes, note))
        elif d.rank is not None:
            first[d.rank] = d.source
        out.append(d)
    return out


def divergences(dumps: Sequence[Dump]) -> list[Divergence]:
    """The divergence of every process group the dumps show, where there is one."""
    ranked = {d.rank: d for d in sorted(dumps, key=lambda d: d.source) if d.rank is not None}
    groups: dict[str, dict[int, list[Entry]]] = {}
    desc: dict[str, str] = {}
    members: dict[str, set[int]] = {}
    for rank, d in ranked.items():
        for name, ranks in d.pg_ranks.items():
            members.setdefault(name, set()).update(ranks)
            desc.setdefault(name, d.pg_desc.get(name, ""))
        for e in d.entries:
            if not e.is_p2p:
                groups.setdefault(e.pg_name, {}).setdefault(rank, []).append(e)
                desc.setdefault(e.pg_name, e.pg_desc)
    out = []
    for pg in sorted(groups):
        per_rank = groups[pg]
        expected = members.get(pg) or set(per_rank)
        # A rank of the group that left a dump but has no entry of it at all never called it.
        present = {r: per_rank.get(r, []) for r in sorted(expected) if r in ranked}
        div = _diverge(pg, desc.get(pg, ""), present, ranked, len(expected))
        if div is not None:
            out.append(div)
    return out


def _diverge(
    pg: str, pg_desc: str, present: dict[int, list[Entry]], dumps: dict[int, Dump], expected: int
) -> Divergence | None:
    if len(present) < 2:
        return None
    by_seq = {r: _by_seq(es) for r, es in present.items()}
    enq = {r: _status(dumps[r], pg, es, "enqueued") for r, es in present.items()}
    done = {r: _status(dumps[r], pg, es, "completed") for r, es in present.items()}
    if all(done[r] >= enq[r] for r in present):
        return None  # nothing pending anywhere in this group
    stuck = min(done.values()) + 1
    ranks = tuple(present)
    missing = tuple(r for r in ranks if enq[r] < stuck)
    waiting = [r for r in ranks if r not in missing]

    def make(kind: str, culprits: tuple[int, ...], seq: int, others: list[int]) -> Divergence:
        ref = next((by_seq[r][seq] for r in others if seq in by_seq[r]), None)
        mine = next((by_seq[r].get(seq) for r in culprits if seq in by_seq[r]), None)
        last = max(by_seq[culprits[0]].items(), default=None)
        site = mine.call_site() if mine else (last[1].call_site() if last else None)
        return Divergence(
            kind=kind,
            pg=pg,
            pg_desc=pg_desc,
            seq=seq,
            culprits=culprits,
            ranks=ranks,
            expected=expected,
            op=ref.profiling_name if ref else "collective",
            culprit_op=mine.profiling_name if mine else None,
            waiting_site=ref.call_site() if ref else None,
            culprit_site=site,
            culprit_last=f"{last[1].profiling_name} #{last[0]}" if last else None,
        )

    if missing and waiting:
        return make("missing", missing, stuck, waiting)
    for seq in sorted({s for r in ranks for s in by_seq[r] if s <= stuck}):
        sigs = {r: by_seq[r][seq].signature() for r in ranks if seq in by_seq[r]}
        if len(sigs) < len(ranks):
            continue  # the ring buffer of some rank no longer holds it
        minority = _minority(sigs)
        if minority:
            return make("mismatch", minority, seq, [r for r in ranks if r not in minority])
    states = {r: by_seq[r][stuck].state for r in ranks if stuck in by_seq[r]}
    late = tuple(r for r, s in states.items() if s == "scheduled")
    if late and len(late) < len(states) and all(s in ("scheduled", "started") for s in states.values()):
        return make("not_started", late, stuck, [r for r in ranks if r not in late])
    return None


def _minority(sigs: dict[int, tuple[Any, ...]]) -> tuple[int, ...]:
    """The ranks outside the one signature more than half of the ranks share, if there is one."""
    counts = Counter(sigs.values())
    top, n = counts.most_common(1)[0]
    if len(counts) < 2 or n * 2 <= len(sigs):
        return ()
    return tuple(sorted(r for r, s in sigs.items() if s != top))


def _by_seq(entries: list[Entry]) -> dict[int, Entry]:
    """One entry per sequence number: the first op of a coalesced group stands for it."""
    out: dict[int, Entry] = {}
    for e in sorted(entries, key=lambda e: (e.collective_seq_id, e.op_id, e.record_id)):
        out.setdefault(e.collective_seq_id, e)
    return out


def _status(dump: Dump, pg: str, entries: list[Entry], what: str) -> int:
    """last enqueued/completed from pg_status (keyed by the group's local id), else from the entries."""
    pg_ids = {e.pg_id for e in entries}
    st = next((dump.pg_status[i] for i in sorted(pg_ids) if i in dump.pg_status), None)
    value = (st.last_enqueued if what == "enqueued" else st.last_completed) if st else None
    if value is not None:
        return value
    seqs = [e.collective_seq_id for e in entries if what == "enqueued" or e.state == "completed"]
    return max(seqs, default=0)


# --------------------------------------------------------------------------- events rows


def rows(dumps: Sequence[Dump], divs: Sequence[Divergence], columns: Sequence[str]) -> pl.DataFrame:
    """The dumps as events rows: per rank and group its status and recent entries, then the facts."""
    out: list[dict[str, Any]] = []
    for d in sorted(dumps, key=lambda d: d.source):
        out.extend(_dump_rows(d))
    sources = {d.rank: d.source for d in dumps if d.rank is not None}
    for div in divs:
        for r in div.culprits:
            out.append(
                _row(
                    source=sources.get(r, ""),
                    line=0,
                    text=div.sentence(),
                    pattern="flight.divergence",
                    signal="flight_divergence",
                    category=div.category,
                    severity="warning",
                    rank=r,
                    pg=div.pg,
                    seq=div.seq,
                    op=div.culprit_op or div.op,
                    target_rank=r,
                    joined=len(div.ranks),
                    nranks=div.expected,
                )
            )
    schema = {k: v for k, v in EVENT_BASE_COLUMNS.items()}
    frame = pl.DataFrame(out, schema_overrides=schema, infer_schema_length=None) if out else pl.DataFrame()
    return frame.select([c for c in frame.columns if c in columns])


def _dump_rows(d: Dump) -> list[dict[str, Any]]:
    out = []
    by_pg: dict[str, list[tuple[int, Entry]]] = {}
    for i, e in enumerate(d.entries):
        by_pg.setdefault(e.pg_id, []).append((i, e))
    for pg_id, st in sorted(d.pg_status.items()):
        out.append(
            _row(
                source=d.source,
                line=0,
                text=(
                    f"[flight recorder {d.version}] process group {pg_id}: last enqueued collective "
                    f"{st.last_enqueued}, last started {st.last_started}, last completed {st.last_completed}"
                ),
                pattern="flight.pg_status",
                rank=d.rank,
                last_enqueued=st.last_enqueued,
                last_completed=st.last_completed,
                # the default group's members are the whole job: its size is the world size
                world_size=(len(d.pg_ranks.get(pg_id, ())) or None)
                if d.pg_desc.get(pg_id) == "default_pg"
                else None,
                nccl_version=d.nccl_version,
            )
        )
    for _pg_id, items in sorted(by_pg.items()):
        pending = [n for n, (_i, e) in enumerate(items) if e.state != "completed"]
        start = max(0, (pending[0] if pending else len(items)) - RECENT)
        for i, e in items[start:]:
            out.append(
                _row(
                    source=d.source,
                    line=i + 1,
                    text=_entry_text(e),
                    pattern="flight.entry",
                    rank=d.rank,
                    pg=e.pg_name,
                    seq=e.collective_seq_id,
                    op=e.profiling_name,
                    shape=str([list(s) for s in e.input_sizes]),
                    timeout_ms=e.timeout_ms,
                )
            )
    return out


def _entry_text(e: Entry) -> str:
    kind = f"p2p #{e.p2p_seq_id}" if e.is_p2p else f"#{e.collective_seq_id}"
    sizes = ", ".join(f"{list(s)} {t}" for s, t in zip(e.input_sizes, e.input_dtypes, strict=False))
    site = e.call_site()
    return (
        f"[flight recorder] process group {e.pg_name} {kind} {e.profiling_name}({sizes}): {e.state}"
        + (" (retired)" if e.retired and e.state != "completed" else "")
        + (f" called at {site}" if site else "")
    )


def _row(
    *, source: str, line: int, text: str, pattern: str, rank: int | None, **fields: Any
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "source": source,
        "line": line,
        "text": text,
        "message": text,
        "pattern": pattern,
        "signal": fields.pop("signal", "flight_recorder"),
        "category": fields.pop("category", None),
        "severity": fields.pop("severity", "info"),
        "rank": rank,
        "pg": fields.pop("pg", None),
        "repeat": 1,
        "attribution": ATTRIBUTION if rank is not None else "flight recorder dump without a rank in its name",
    }
    row.update(fields)
    return row


def join(events: pl.DataFrame, dumps: Sequence[Dump]) -> tuple[pl.DataFrame, list[str]]:
    """Events with the dumps' rows added, and notes for the coverage (dumps without a rank)."""
    notes = [n for d in dumps for n in d.notes]
    notes += [
        f"{d.source}: Flight Recorder dump without a rank (not in its name, no log line says it wrote it, "
        "and its process groups do not single one out)"
        for d in dumps
        if d.rank is None and not d.notes
    ]
    notes.extend(unreported(events, dumps))
    if not dumps:
        return events, notes
    extra = rows(dumps, divergences(dumps), events.columns)
    if not extra.height:
        return events, notes
    merged = pl.concat([events, extra], how="diagonal_relaxed") if events.width else extra
    return merged.select([c for c in events.columns] or merged.columns), notes


def unreported(events: pl.DataFrame, dumps: Sequence[Dump]) -> list[str]:
    """A note when the logs say dumps were written that were not given: the paths per host, and how
    to collect them."""
    if not events.height or "path" not in events.columns:
        return []
    given = {os.path.basename(d.source) for d in dumps}
    rows = events.filter((pl.col("signal") == "dump") & pl.col("path").is_not_null())
    by_host: dict[str, set[str]] = {}
    for path, host in rows.select("path", "host").iter_rows():
        if os.path.basename(str(path)) not in given:
            by_host.setdefault(str(host) if host else "?", set()).add(str(path))
    if not by_host:
        return []
    where = "; ".join(
        f"{h}: {', '.join(sorted(p)[:8])}{' ...' if len(p) > 8 else ''}" for h, p in sorted(by_host.items())
    )
    paths = sorted({p for ps in by_host.values() for p in ps})
    pattern = os.path.join(os.path.dirname(paths[0]), "*") if paths else "<dump dir>/*"
    return [
        f"Flight Recorder dumps were written but not given ({where}); collect them, e.g. "
        f'`for h in <hosts>; do scp "$h:{pattern}" dumps/; done`, and run `nccllog analyze <logs> dumps/`'
    ]


# --------------------------------------------------------------------------- diagnosis


def rule(ctx: Context) -> list[Draft]:
    """A hypothesis per divergence the dumps show (high when every rank of the group left a dump)."""
    facts = ctx.ev.filter(pl.col("signal") == "flight_divergence")
    drafts = []
    for _key, sub in facts.group_by("pg", "seq", maintain_order=True):
        first = sub.row(0, named=True)
        culprits = tuple(sorted(int(r) for r in sub["target_rank"].drop_nulls().to_list()))
        entries = ctx.ev.filter(
            (pl.col("pattern") == "flight.entry")
            & (pl.col("pg") == first["pg"])
            & (pl.col("seq") == first["seq"])
        )
        d = Draft(
            category=str(first["category"]),
            culprits=culprits,
            kind="flight",
            summary=str(first["message"]),
        )
        complete = (first["joined"] or 0) >= (first["nranks"] or 0)
        d.score = 0.92 if complete else 0.7
        if not complete:
            d.rules_out.append(
                f"Only {first['joined']} of the group's {first['nranks']} ranks left a dump here; a rank without one may be the cause."
            )
        d.rules_in.append(
            f"Flight Recorder dumps of {first['joined']} of the {first['nranks']} ranks of process group "
            f"{first['pg']}, aligned by collective sequence number, part ways at #{first['seq']}."
        )
        d.evidence = [evidence(first)] + [evidence(r) for r in entries.sort("rank").head(4).to_dicts()]
        if d.category == "collective_mismatch":
            d.remediation.append(
                "Make every rank issue the same collectives in the same order: look at the call site named above "
                "for a rank-dependent branch or an extra collective."
            )
        else:
            d.remediation.append(
                "Look at what the named rank was doing instead of the collective (its last call site above, and "
                "its log around the time of the timeout)."
            )
        d.collect.extend(COLLECT)
        drafts.append(d)
    return drafts
