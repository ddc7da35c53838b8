"""A lint of the pattern library, beyond what the loader enforces (docs/patterns.md, "Lint"):

- the file's stem is the name part of its id (``nccl.comm_init`` in ``comm_init.toml``);
- the file's folder is its producer (``patterns/nccl/`` for ``producer = "nccl"``);
- every pattern has at least two near-misses;
- every example asserts every field it captures (``fields = {…}`` names each non-null field);
- no example is matched by a second pattern unless the example declares it (``also = [ids]``).

Examples run through the production reader and matcher, as in test_patterns.py. The allowlists
below record what the library held when the lint came in; they may only shrink (a listed entry
that passes fails the test, so fix it and drop it from the list).
"""

from __future__ import annotations

import tomllib
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from nccllog.ingest.reader import read_sources
from nccllog.ingest.sources import Source
from nccllog.match.library import Library, builtin_pattern_dir, load_library
from nccllog.match.matcher import match_lines, prefilter_keywords, sampled_keywords

# Files named for their topic before the rule (the id is never renamed, and a file's path orders
# the library): relative paths under patterns/.
STEM_ALLOWED: frozenset[str] = frozenset(
    {
        "crash/absl_fault_signal.toml",
        "crash/absl_other_signal.toml",
        "crash/fatal_python_error_other.toml",
        "crash/glog_aborted_at.toml",
        "crash/glog_fault_signal.toml",
        "crash/glog_other_signal.toml",
        "crash/shell_aborted.toml",
        "crash/shell_killed.toml",
        "crash/shell_segfault.toml",
        "deepspeed/pdsh_ssh_exited.toml",
        "nccl_tests/avg_busbw.toml",
        "nvidia/ps_stuck_in_driver.toml",
        "progress/faiss_kmeans.toml",
        "progress/torchtune_checkpoint.toml",
        "progress/tqdm_bar.toml",
        "python/app_rank_of_world.toml",
        "python/hf_process_rank_local.toml",
        "python/llamafactory_process_rank_global.toml",
        "python/lmeval_building_contexts.toml",
        "python/lmeval_data_parallel.toml",
        "rl/openrlhf_init_process_group.toml",
        "rl/openrlhf_update_weight.toml",
        "rl/verl_detach_nccl_sync.toml",
        "rl/verl_detach_nccl_sync_crashed.toml",
        "rl/verl_detach_sync_metrics.toml",
        "rl/verl_init_process_group.toml",
        "rl/verl_trainer_nodes.toml",
        "rl/vllm_engine_core_init_failed.toml",
        "rl/vllm_parallel_state_world.toml",
        "rl/vllm_using_nccl.toml",
        "torchrun/store_client_connect_timeout.toml",
        "torchrun/store_client_retrying.toml",
        "torchrun/store_client_timed_out.toml",
        "torchrun/store_connect_addr_failed.toml",
        "torchrun/store_connect_any_address.toml",
        "torchrun/store_server_socket_failed.toml",
        "torchrun/store_socket_timeout.toml",
        "torchrun/store_wait_for_workers_timeout.toml",
        "torchrun/store_wait_timeout.toml",
        "torchrun/store_wait_timeout_legacy.toml",
    }
)
# Files kept in a topic folder (crash/, rl/, progress/ …) rather than their producer's.
FOLDER_ALLOWED: frozenset[str] = frozenset(
    {
        "crash/absl_fault_signal.toml",
        "crash/absl_other_signal.toml",
        "crash/c10_fault_signal.toml",
        "crash/c10_other_signal.toml",
        "crash/fatal_python_error_other.toml",
        "crash/faulthandler_aborted.toml",
        "crash/faulthandler_fault.toml",
        "crash/glog_aborted_at.toml",
        "crash/glog_fault_signal.toml",
        "crash/glog_other_signal.toml",
        "crash/shell_aborted.toml",
        "crash/shell_killed.toml",
        "crash/shell_segfault.toml",
        "crash/terminate_called.toml",
        "crash/terminate_what.toml",
        "deepspeed/pdsh_ssh_exited.toml",
        "fabricmanager/service_failed.toml",
        "nccl/tests_failure.toml",
        "nccl_tests/avg_busbw.toml",
        "nccl_tests/device.toml",
        "nccl_tests/header.toml",
        "nccl_tests/result_row.toml",
        "nvidia/ps_stuck_in_driver.toml",
        "nvidia/smi_failed.toml",
        "nvidia/topo_matrix_row.toml",
        "progress/faiss_kmeans.toml",
        "progress/torchtune_checkpoint.toml",
        "progress/tqdm_bar.toml",
        "python/app_rank_of_world.toml",
        "python/hf_process_rank_local.toml",
        "python/llamafactory_process_rank_global.toml",
        "python/lmeval_building_contexts.toml",
        "python/lmeval_data_parallel.toml",
        "python/run_finished.toml",
        "rl/no_pending_work_stall.toml",
        "rl/openrlhf_init_process_group.toml",
        "rl/openrlhf_update_weight.toml",
        "rl/verl_detach_nccl_sync.toml",
        "rl/verl_detach_nccl_sync_crashed.toml",
        "rl/verl_detach_sync_metrics.toml",
        "rl/verl_init_process_group.toml",
        "rl/verl_trainer_nodes.toml",
        "rl/vllm_engine_core_init_failed.toml",
        "rl/vllm_parallel_state_world.toml",
        "rl/vllm_using_nccl.toml",
        "shell/env_export.toml",
        "shell/env_listing.toml",
        "shell/master_addr_env.toml",
        "torchrun/store_client_connect_timeout.toml",
        "torchrun/store_client_retrying.toml",
        "torchrun/store_client_timed_out.toml",
        "torchrun/store_connect_addr_failed.toml",
        "torchrun/store_connect_any_address.toml",
        "torchrun/store_server_socket_failed.toml",
        "torchrun/store_socket_timeout.toml",
        "torchrun/store_wait_for_workers_timeout.toml",
        "torchrun/store_wait_timeout.toml",
        "torchrun/store_wait_timeout_legacy.toml",
    }
)


def _files() -> dict[str, tuple[Path, dict[str, Any]]]:
    root = builtin_pattern_dir()
    out = {}
    for f in sorted(root.rglob("*.toml")):
        data = tomllib.loads(f.read_text(encoding="utf-8"))
        out[data["id"]] = (f.relative_to(root), data)
    return out


FILES = _files()


def _check(found: set[str], allowed: frozenset[str], what: str) -> None:
    new = sorted(found - allowed)
    stale = sorted(allowed - found)
    assert not new, f"{what}: {new}"
    assert not stale, f"these now pass, drop them from the allowlist: {stale}"


def test_stem_is_the_id_name() -> None:
    found = {str(rel) for pid, (rel, _d) in FILES.items() if rel.stem != pid.split(".", 1)[1]}
    _check(found, STEM_ALLOWED, "file stem differs from the id's name")


def test_folder_is_the_producer() -> None:
    found = {str(rel) for rel, d in FILES.values() if rel.parent.name != d.get("producer")}
    _check(found, FOLDER_ALLOWED, "folder differs from the producer")


def test_two_near_misses() -> None:
    found = sorted(pid for pid, (_rel, d) in FILES.items() if len(d.get("near_misses", [])) < 2)
    assert not found, f"fewer than two [[near_misses]]: {found}"


@pytest.fixture(scope="module")
def matched() -> tuple[Library, list[tuple[str, int]], dict[int, list[dict[str, Any]]]]:
    """Every example of the library through the production path, one source per example."""
    lib = load_library()
    sources, meta = [], []
    for p in lib.patterns:
        for j, ex in enumerate(p.examples):
            sources.append(Source(name=f"ex{len(meta)}.log", data=ex.line.encode("utf-8")))
            meta.append((p.id, j))
    read = read_sources(sources, prefilter_keywords(lib), sampled=sampled_keywords(lib))
    rows: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in match_lines(read.lines, lib).events.to_dicts():
        rows[int(r["source"][2:-4])].append(r)
    return lib, meta, rows


def test_examples_assert_all_their_fields(
    matched: tuple[Library, list[tuple[str, int]], dict[int, list[dict[str, Any]]]],
) -> None:
    lib, meta, rows = matched
    patterns = {p.id: p for p in lib.patterns}
    unasserted = []
    for k, (pid, j) in enumerate(meta):
        p = patterns[pid]
        mine = [r for r in rows[k] if r["pattern"] == pid]
        if not mine:
            continue  # test_patterns.py reports an example that does not match
        missing = sorted(n for n in p.fields if mine[0][n] is not None and n not in p.examples[j].fields)
        if missing:
            unasserted.append(f"{pid} example {j}: {missing}")
    assert not unasserted, "examples that capture fields they do not assert:\n" + "\n".join(unasserted)


def test_no_undeclared_second_match(
    matched: tuple[Library, list[tuple[str, int]], dict[int, list[dict[str, Any]]]],
) -> None:
    _lib, meta, rows = matched
    undeclared = []
    for k, (pid, j) in enumerate(meta):
        others = {r["pattern"] for r in rows[k]} - {pid}
        declared = set(FILES[pid][1]["examples"][j].get("also", []))
        if others != declared:
            undeclared.append(f"{pid} example {j}: matched by {sorted(others)}, declared {sorted(declared)}")
    assert not undeclared, "declare a second match with also = [ids], or fix the patterns:\n" + "\n".join(
        undeclared
    )
