"""`nccllog ray-extract`: one task per node of a (local, two-node) Ray cluster reads that node's own
log folder; the parts merge into the analysis of all the logs. Skipped where ray is not installed."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import nccllog
from nccllog import ray_extract as rx
from nccllog.cli import main
from tests.test_parts import LIB, _extract, write_tree

HAVE_RAY = importlib.util.find_spec("ray") is not None


def test_without_ray_the_command_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    res = CliRunner().invoke(main, ["ray-extract", "-o", "parts"])
    assert res.exit_code == 2
    assert res.output == "nccllog: error: ray-extract needs Ray: pip install 'nccllog[ray]'\n"


def test_node_inputs_finds_the_nodes_logs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = tmp_path / "session_x"
    (session / "logs").mkdir(parents=True)
    for name in ("worker-ab-01000000-123.out", "worker-ab-01000000-123.err", "raylet.out"):
        (session / "logs" / name).write_text("x\n")
    own = tmp_path / "own"
    own.mkdir()
    monkeypatch.setenv(rx.ENV_LOGS, f"{own}:{tmp_path / 'missing'}")
    monkeypatch.setenv("TORCH_FR_DUMP_TEMP_FILE", str(tmp_path / "fr_rank_"))
    (tmp_path / "fr_rank_3").write_bytes(b"\x80\x02}q\x00.")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    plan = rx._Plan(paths=(str(own),), ray_logs=True, torch_dumps=True)
    got = rx.node_inputs(plan, str(session))
    assert got == [
        str(own),
        str(session / "logs" / "worker-ab-01000000-123.err"),
        str(session / "logs" / "worker-ab-01000000-123.out"),
        str(tmp_path / "fr_rank_3"),
    ]


@pytest.mark.ray
@pytest.mark.skipif(not HAVE_RAY, reason="ray is not installed (pip install 'nccllog[ray]')")
def test_ray_extract_on_a_two_node_cluster(tmp_path: Path) -> None:
    import ray
    from ray.cluster_utils import Cluster

    tree = tmp_path / "tree"
    tree.mkdir()
    files = write_tree(tree, 8, 4, 5, dumps=True)
    dirs = [tmp_path / "node0", tmp_path / "node1"]
    for i, f in enumerate(files):  # each node holds half of the files, in its own folder
        dirs[i % 2].mkdir(exist_ok=True)
        shutil.copy2(f, dirs[i % 2] / Path(f).name)
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "env_vars": {rx.ENV_LOGS: str(dirs[0])}}
    )
    cluster.add_node(num_cpus=1, env_vars={rx.ENV_LOGS: str(dirs[1])})
    try:
        ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
        cluster.wait_for_nodes()
        seen: list[tuple[int, int]] = []
        got = rx.ray_extract(ray_logs=False, torch_dumps=False, progress=lambda d, t: seen.append((d, t)))
        assert len(got) == 2 and all(p.data for p in got) and seen[-1] == (2, 2)
        assert sorted(p.files for p in got) == sorted(len(_extract([str(d)]).read.stats) for d in dirs)
        assert {p.inputs for p in got} == {(str(d),) for d in dirs}
        # a per-node mapping adds paths on that node only
        extra = tmp_path / "extra"
        extra.mkdir()
        (extra / "rank_0.log").write_text("[rank0]:NCCL version 2.21.5+cuda12.4\n")
        target = got[0].node_id
        mapped = rx.ray_extract([], node_paths={target: [str(extra)]}, ray_logs=False, torch_dumps=False)
        assert {p.node_id: p.inputs[0] for p in mapped}[target] == str(extra)
        res = CliRunner().invoke(
            main, ["ray-extract", "--no-ray-logs", "--no-torch-dumps", "-o", str(tmp_path / "parts")]
        )
        assert res.exit_code == 0, res.output
        assert "wrote 2 part(s)" in res.output
    finally:
        ray.shutdown()
        cluster.shutdown()
    merged = nccllog.analyze(str(tmp_path / "parts"), library=LIB)
    one = nccllog.analyze(files, library=LIB)
    assert merged.verdict.category == one.verdict.category
    assert merged.verdict.culprit_ranks == one.verdict.culprit_ranks == (5,)
    assert [(r.rank, r.status) for r in merged.ranks] == [(r.rank, r.status) for r in one.ranks]
    assert merged.coverage.files == one.coverage.files
