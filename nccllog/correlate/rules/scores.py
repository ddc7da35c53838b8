"""The rules' scores and thresholds, named (``scores.toml``): every tuning is a visible data diff."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields
from functools import cache
from importlib import resources
from typing import cast


@dataclass(frozen=True)
class Scores:
    """Every key of ``scores.toml`` as ``<table>_<key>``."""

    confidence_strong: float
    confidence_medium: float
    confidence_unknown_below: float
    confidence_tie: float
    weight_cause: float
    weight_error: float
    weight_phase_line_below: float
    mismatch_base: float
    mismatch_pair: float
    mismatch_tie: float
    mismatch_first_failed_s: float
    seq_skew_clear: float
    seq_skew_unclear: float
    seq_skew_far: float
    seq_skew_one_sided: float
    silent_one: float
    silent_several: float
    silent_all_missing: float
    silent_some_missing: float
    silent_unpasted: float
    silent_lone_reporter: float
    silent_unsure: float
    silent_pair: float
    silent_pair_missing: float
    silent_active_after_s: float
    enqueue_skew_never: float
    enqueue_skew_unknown_seq: float
    enqueue_skew_stuck: float
    desync_lagging: float
    desync_joiner: float
    heartbeat_stuck: float
    merge_bonus: float
    merge_cap: float
    nobody_first_collective: float
    nobody_everyone: float
    nobody_alone: float
    config_base: float
    config_working: float
    config_lines: float
    config_small: float
    config_subgroup: float
    config_no_culprit_cap: float
    config_straggler_working: float
    config_straggler_quiet: float
    config_small_numel: float
    config_long_step_s: float
    config_phase_window_min: float
    config_on_time_margin: float
    failstop_before_timeouts: float
    failstop_after_factor: float
    failstop_awaited: float
    failstop_also_timed_out: float
    failstop_earlier_other: float
    failstop_earlier_other_s: float
    network_own_socket: float
    network_local: float
    network_peer_ib: float
    network_peer_socket: float
    network_peer_gone: float
    network_everywhere: float
    network_died_factor: float
    network_flush_only: float
    network_intra_node: float
    network_restrictive_env: float
    bootstrap_awaited_own: float
    bootstrap_awaited: float
    bootstrap_absent: float
    bootstrap_partial: float
    bootstrap_unreachable: float
    version_split: float
    version_system: float
    stall_driver_hang: float
    stall_subset: float
    stall_all: float
    startup_rendezvous: float
    startup_rendezvous_env: float
    startup_rendezvous_unlogged: float
    startup_virtual_iface: float
    startup_init_hang: float
    startup_p2p: float
    startup_idle: float
    startup_pcie_switch: float
    startup_same_rank: float
    startup_same_rank_max_never: float
    leftover_base: float
    reconcile_cause_min: float
    reconcile_bonus: float
    reconcile_cap: float
    reconcile_hardware_bonus: float
    reconcile_hardware_lead_s: float
    penalty_missing_share: float
    penalty_missing_many: float
    penalty_missing_few: float
    penalty_truncated: float
    penalty_folded: float
    penalty_unaligned: float


@cache
def scores() -> Scores:
    """The table, read on first use; a key missing or unknown is an error in the package's data."""
    text = resources.files("nccllog.correlate.rules").joinpath("scores.toml").read_text("utf-8")
    flat = {
        f"{table}_{key}": float(v) for table, keys in tomllib.loads(text).items() for key, v in keys.items()
    }
    names = {f.name for f in fields(Scores)}
    if set(flat) != names:
        raise ValueError(
            f"scores.toml: missing {sorted(names - set(flat))}, unknown {sorted(set(flat) - names)}"
        )
    return Scores(**flat)


class _OnFirstUse:
    """``S.<name>``: a value of the table, the file read the first time one is asked for."""

    def __getattr__(self, name: str) -> float:
        return float(getattr(scores(), name))


S = cast(Scores, _OnFirstUse())
