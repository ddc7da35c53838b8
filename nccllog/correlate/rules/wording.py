"""Sentences about failures, cascades and network errors, built from their rows' fields."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nccllog.correlate import wording as w
from nccllog.correlate.ranks_state import Failure
from nccllog.correlate.rules.base import Context
from nccllog.correlate.rules.scores import S
from nccllog.correlate.rules.vocabulary import vocabulary
from nccllog.vocab import Category, Signal


def _sig_size(sig: tuple[Any, ...]) -> str:
    return w.numel(sig[1], sig[2]) if sig[1] is not None else f"shape {sig[3]}"


def _progress_text(row: dict[str, Any]) -> str:
    """What a progress row says: ``1695000 of 3634744, 47%, after 30:09`` or ``1170.9 s``."""
    step, total, elapsed = row.get("step"), row.get("total_steps"), row.get("elapsed_s")
    secs = row.get("seconds")
    if step is not None and total:
        text = f"{step} of {total}" + ("" if step >= total else f", {min(99, round(100 * step / total))}%")
        if elapsed is not None:
            m, sec = divmod(int(elapsed), 60)
            text += f", after {m // 60}:{m % 60:02d}:{sec:02d}" if m >= 60 else f", after {m}:{sec:02d}"
        return text
    if secs is not None:
        return f"{secs:.1f} s"
    return w.excerpt(row.get("message"))


XID_NAMES = vocabulary().xid_names  # Xid number -> what it means (vocabulary.toml)


def _failure_clause(f: Failure, who: str) -> str:
    """``"Rank 5 ran out of GPU memory (tried to allocate 7.83 GiB)"`` and the like."""
    r = f.row
    plural = who.startswith("Ranks ")
    if f.signal == Signal.OOM:
        size = f" (tried to allocate {r['size']})" if r.get("size") else ""
        text = r.get("message") or ""
        gpu = "CUDA" in text or r.get("gpu") is not None
        kind = "GPU memory" if gpu else "host memory"
        return f"{who} ran out of {kind}{size}"
    if f.signal == Signal.CUDA_ERROR:
        return f"{who} hit a CUDA error ({r.get('error') or 'see the evidence'})"
    if f.signal == Signal.XID and r.get("xid") is not None:
        name = XID_NAMES.get(int(r["xid"]), "")
        gpus = (
            f"the GPU{'s' if plural else ''} of {who[0].lower() + who[1:]}" if who.startswith("Rank") else who
        )
        return f"{gpus[0].upper() + gpus[1:]} logged Xid {r['xid']}{' (' + name + ')' if name else ''}"
    if f.signal == Signal.DUPLICATE_GPU:
        bus = f" (bus {r['bus_id']})" if r.get("bus_id") else ""
        verb = "were" if plural or who.startswith("Ranks") else "was"
        return f"{who} {verb} placed on the same GPU{bus}, so NCCL refused to set up the communicator"
    if f.category == Category.SEGFAULT_CRASH:
        sig = r.get("signal_name") or ("SIGSEGV" if r.get("exitcode") in (-11, 139) else None)
        code = f" (exit code {r['exitcode']})" if r.get("exitcode") is not None else ""
        return f"{who} crashed with {sig or 'a fatal signal'}{code}"
    if f.signal == Signal.PYTHON_EXCEPTION:
        name = r.get("error_name") or "an exception"
        err = r.get("error")
        return f"{who} raised {name}" + (f": {str(err)[:120]}" if err and err != name else "")
    if f.signal == Signal.ACTOR_DIED:
        return f"{who} lost {'their' if plural else 'its'} Ray worker" + (
            f" ({r['error']})" if r.get("error") else ""
        )
    if f.signal in (Signal.PROCESS_EXIT, Signal.ROOT_CAUSE) and r.get("exitcode") is not None:
        return f"{who} exited with code {r['exitcode']}"
    return f"{who} failed: {_failure_text(f)}"


def _failure_text(f: Failure) -> str:
    r = f.row
    if f.signal == Signal.XID and r.get("xid") is not None:
        return f"Xid {r['xid']}" + (f" on GPU {r['pci']}" if r.get("pci") else "")
    if f.signal == Signal.OOM:
        size = f" (tried to allocate {r['size']})" if r.get("size") else ""
        return (
            f"CUDA out of memory{size}"
            if "CUDA" in (r.get("message") or "") or r.get("gpu") is not None
            else f"out of memory{size}"
        )
    if f.signal == Signal.PROCESS_EXIT and r.get("exitcode") is not None:
        return f"exit code {r['exitcode']}"
    for k in ("error_name", "error", "signal_name"):
        if r.get(k):
            return str(r[k])
    pat = f.pattern.split(".")[-1].replace("_", " ")
    return pat or f.signal.replace("_", " ")


def _cascade(ctx: Context, culprits: Sequence[int], lead: Failure) -> str:
    """``"timeouts on ranks 0,2-7"`` for what the other ranks logged afterwards."""
    others = sorted(r for r, st in ctx.states.items() if r not in culprits and (st.timeouts or st.hang_time))
    if others:
        return f"the timeouts on {w.others_phrase(others, ctx.world_size)} followed"
    errs = sorted(
        r
        for r, st in ctx.states.items()
        if r not in culprits and any(f.weight >= S.weight_error and f is not lead for f in st.failures)
    )
    if errs:
        return f"the errors on {w.others_phrase(errs, ctx.world_size)} followed"
    stopped = sorted(
        r
        for r, st in ctx.states.items()
        if r not in culprits and any(f.signal == Signal.PROCESS_EXIT for f in st.failures)
    )
    if stopped:
        return f"{w.others_phrase(stopped, ctx.world_size)} {'was' if len(stopped) == 1 else 'were'} then stopped"
    return ""


def _bare(addr: str) -> str:
    from nccllog.correlate.network import strip_port

    return strip_port(addr)


def _net_detail(rows: list[dict[str, Any]]) -> str:
    r = rows[0]
    if r.get("ib_status") is not None:
        txt = f"IB error {r['ib_status']}"
        if r.get("vendor_err") is not None:
            txt += f", vendor err {r['vendor_err']}"
        return txt
    return str(r.get("error") or "")
