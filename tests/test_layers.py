"""The declared prefix layers (nccllog/attribution/layers.toml): each launcher's real format,
its near-misses, and the table's loader."""

from __future__ import annotations

from pathlib import Path

import pytest

from nccllog.attribution import layer_table
from nccllog.attribution.layers import LAUNCHER_LAYERS, launcher_prefix, parse_line
from nccllog.pipeline import attribute


@pytest.mark.parametrize(
    ("line", "layers", "rank", "job", "message"),
    [
        (
            "[1,3]<stderr>: NCCL WARN Net : Connection closed by remote peer",
            ("mpi",),
            3,
            1,
            "NCCL WARN Net : Connection closed by remote peer",
        ),
        ("[0,12]<stdout>:Epoch 3 step 40 loss 2.18", ("mpi",), 12, 0, "Epoch 3 step 40 loss 2.18"),
        (
            "[7,0]<stddiag>: warning: rank is oversubscribed",
            ("mpi",),
            0,
            7,
            "warning: rank is oversubscribed",
        ),
        # --timestamp-output glues mpirun's ctime date in front of the tag
        (
            "Mon Oct  2 21:07:33 2023[1,6]<stdout>:gpu-b11:40117:40190 [2] NCCL INFO Connected all rings",
            ("mpi", "nccl"),
            6,
            1,
            "Connected all rings",
        ),
        # Open MPI tag then a c10 prefix from the rank's own logger
        (
            "[1,5]<stderr>:[E1124 09:12:44.102938271 ProcessGroupNCCL.cpp:616] watchdog fired",
            ("mpi", "c10"),
            5,
            1,
            "watchdog fired",
        ),
    ],
)
def test_openmpi_tag_output(line: str, layers: tuple[str, ...], rank: int, job: int, message: str) -> None:
    a = parse_line(line)
    assert (a.layers, a.rank, a.rank_kind, a.job, a.message) == (layers, rank, "prefix", job, message)


@pytest.mark.parametrize(
    "line",
    [
        "[1,3] <stderr>: spaced out",  # a space before the stream name
        "[1,3]<stdin>: not an output stream",
        "[1;3]<stderr>: semicolon",
        "[a,3]<stderr>: letter job id",
        "[1,3]<stderr> no colon after the stream",
    ],
)
def test_openmpi_near_misses(line: str) -> None:
    a = parse_line(line)
    assert "mpi" not in a.layers and a.rank is None and a.job is None


@pytest.mark.parametrize(
    ("line", "layers", "host", "extra"),
    [
        (
            "[pod/trainer-worker-3/pytorch] [rank11]:RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970",
            ("kubectl", "rank"),
            "trainer-worker-3",
            {"rank": 11},
        ),
        (
            "[pod/trainer-master-0/pytorch] [default2]:Traceback (most recent call last):",
            ("kubectl", "tee"),
            "trainer-master-0",
            {"local_rank": 2},
        ),
        # --prefix with --timestamps: the RFC 3339 time with nanoseconds follows the prefix
        (
            "[pod/llm-ft-worker-1/main] 2026-02-14T08:15:02.123456789Z gpu-b07:4411:4520 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[2] via P2P/IPC",
            ("kubectl", "date", "nccl"),
            "gpu-b07",
            {"pid": 4411},
        ),
        (
            "[pod/job.v2-worker-0/c1] plain output",
            ("kubectl",),
            "job.v2-worker-0",
            {},
        ),
    ],
)
def test_kubectl_prefix(line: str, layers: tuple[str, ...], host: str, extra: dict[str, int]) -> None:
    a = parse_line(line)
    assert a.layers == layers
    assert a.host == host  # the pod, unless an inner NCCL header names its host
    for k, v in extra.items():
        assert getattr(a, k) == v


def test_kubectl_timestamp_is_read() -> None:
    a = parse_line("[pod/trainer-worker-3/pytorch] 2026-02-14T08:15:02.500000000Z step 10")
    assert a.time is not None and (a.time.year, a.time.second, a.time.microsecond) == (2026, 2, 500000)
    assert a.message == "step 10"


@pytest.mark.parametrize(
    "line",
    [
        "[pod/trainer-worker-3] no container part",
        "[deployment/trainer/pytorch] another kind of object",
        "[pod/Trainer-Worker-3/pytorch] upper case is no pod name",
        "[pod/trainer-worker-3/pytorch]no space after the prefix",
        "log: [pod/trainer-worker-3/pytorch] not at the start",
    ],
)
def test_kubectl_near_misses(line: str) -> None:
    a = parse_line(line)
    assert "kubectl" not in a.layers


def test_kubectl_is_a_launcher_layer() -> None:
    assert "kubectl" in LAUNCHER_LAYERS
    assert (
        launcher_prefix("[pod/trainer-worker-3/pytorch] 45%|####   | 9/20")
        == "[pod/trainer-worker-3/pytorch] "
    )


def test_table_loads_every_layer_in_order() -> None:
    names = [x.name for x in layer_table.DECLARED]
    assert names == ["kubectl", "rank", "mpi", "tee", "ray", "skypilot", "srun", "hostpid"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("(head, rank=0, pid=4120) NCCL version 2.18.1+cuda12.1", "NCCL version 2.18.1+cuda12.1"),
        (
            "(worker2, rank=2, pid=3377, ip=10.4.0.12) [rank17]: Traceback (most recent call last):",
            "Traceback (most recent call last):",
        ),
    ],
)
def test_skypilot_prefix_is_stripped_and_names_no_rank(line: str, message: str) -> None:
    a = parse_line(line)
    assert (a.layers[0], a.ip, a.message, a.pid, a.host) == ("skypilot", None, message, None, None)
    assert a.rank == (17 if "[rank17]" in line else None)


@pytest.mark.parametrize("line", ["(head rank=0 pid=1) no commas", "(node1, rank=0, pid=12) not a role name"])
def test_skypilot_near_misses(line: str) -> None:
    assert "skypilot" not in parse_line(line).layers


@pytest.mark.parametrize(
    ("entry", "error"),
    [
        ('name = "x"\nregex = "a"\nfirst = "a"\nsets = { nope = "g" }', "not a field"),
        ('name = "x"\nregex = "(?P<g>a)"\nfirst = "a"\nsets = { host = "h" }', "no group"),
        ('name = "x"\nregex = "a"\nfirst = "a"\nwithin = "deep"', "within/depth"),
        ('name = "x"\nregex = "a"', "first"),
        ('name = "x"\nregex = "a"\nfirst = "a"\ncolour = "red"', "unknown keys"),
    ],
)
def test_table_loader_names_the_bad_entry(entry: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        layer_table.load("[[layer]]\n" + entry)


def test_a_new_layer_is_a_data_entry() -> None:
    """A launcher added to the table is read without code: here a made-up `<<node7/2>> ` prefix."""
    extra = layer_table.load(
        '[[layer]]\nname = "demo"\nregex = "<<(?P<h>[a-z0-9]+)/(?P<lr>[0-9]+)>> "\nfirst = "<"\n'
        'sets = { host = "h", local_rank = "lr" }\nwithin = "start"\ndepth = "task"\nonce = "demo"\n'
    )
    st: dict[str, object] = {}
    names: list[str] = []
    hit = layer_table.apply(layer_table.by_first(extra), "<<node7/2>> hello", 0, 0, set(), st, names)
    assert hit == (len("<<node7/2>> "), layer_table.DEPTHS["task"])
    assert st == {"host": "node7", "local_rank": 2} and names == ["demo"]


def test_kubectl_pods_are_hosts_end_to_end(tmp_path: Path) -> None:
    """Two pods' logs, fetched with `kubectl logs --prefix`: each line's host is its pod."""
    for pod, ranks in (("trainer-worker-0", (0, 1)), ("trainer-worker-1", (2, 3))):
        text = "".join(
            f"[pod/{pod}/pytorch] [rank{r}]:[E0109 03:10:44.102938271 ProcessGroupNCCL.cpp:616] [Rank {r}] "
            "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=8, "
            "NumelOut=8, Timeout(ms)=600000) ran for 600101 milliseconds before timing out.\n"
            for r in ranks
        )
        (tmp_path / f"{pod}.log").write_text(text, encoding="utf-8")
    events = attribute([str(tmp_path)])
    got = {(r, h) for r, h in events.select("rank", "host").iter_rows() if r is not None}
    assert got == {
        (0, "trainer-worker-0"),
        (1, "trainer-worker-0"),
        (2, "trainer-worker-1"),
        (3, "trainer-worker-1"),
    }


@pytest.mark.parametrize(
    ("line", "pid", "message"),
    [
        # the ESC dropped on the way to a paste, a space in its place
        (
            " [36m(RayWorkerVllm pid=5085) [0m [E ProcessGroupNCCL.cpp:475] [Rank 4] Watchdog",
            5085,
            "[Rank 4] Watchdog",
        ),
        # a Windows console shows ESC as a left arrow
        ("←[36m(RayWorkerWrapper pid=311, ip=10.1.2.3)←[0m INFO hello", 311, "INFO hello"),
    ],
)
def test_colour_codes_that_lost_their_escape_still_leave_the_ray_prefix(
    line: str, pid: int, message: str
) -> None:
    attrs = parse_line(line)
    assert (attrs.pid, attrs.layers[0], attrs.message) == (pid, "ray", message)


@pytest.mark.parametrize(
    ("line", "kept"),
    [("retry in [5m] [0m", "[5m]"), ("cache[0m hit", "cache[0m"), ("step [12m elapsed", "[12m")],
)
def test_bracketed_text_that_is_no_colour_code_stays(line: str, kept: str) -> None:
    assert kept in parse_line(line).message
