"""Redaction end to end: a realistic multi-file log tree of a two-node Slurm + torchrun job
(generated here, with made-up values) names its machines, addresses, user, e-mail and token in
every way such logs do, in the lines and in the file names. None of the originals may reach the
output of ``nccllog analyze --redact`` in any format, nor of ``nccllog paste``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from nccllog.cli import main
from nccllog.render import FORMATS

TOKEN = "hf_Zq8wXr2LmN4bVc6TyU0iOpAs"
# What must never be printed (compared case-insensitively, as substrings).
ORIGINALS = (
    "trn-k0",  # trn-k07, trn-k08, trn-k09 and the list trn-k[07-08]
    "trn-k[",
    "site-q",
    "10.77.3.",
    "fe80::a1b2",
    "a1b2:77ff",
    "/home/zoe",
    "zoe.ops",
    TOKEN,
    "s3cr3tpass",
)

HEADER = "trn-k07:4101:4101 [0]"
HEADER8 = "trn-k08:4202:4202 [0]"


def _tree(root: Path) -> Path:
    logs = root / "logs"
    (logs / "trn-k07").mkdir(parents=True)
    (logs / "nccl-debug").mkdir()
    (logs / "slurm-81234.out").write_text(
        "SLURM_JOB_NODELIST=trn-k[07-08]\n"
        "SLURMD_NODENAME=trn-k07\n"
        "+ srun torchrun --nnodes 2 --nproc_per_node 1 --rdzv_endpoint trn-k07.site-q.internal:29400 "
        "--master_addr 10.77.3.7 /home/zoe/proj/train.py\n"
        "ssh: connect to host trn-k09 port 22: Connection refused\n"
        "srun: error: trn-k08: task 1: Exited with exit code 1\n"
        "srun: error: Nodes trn-k[07-08] are still not ready\n",
        encoding="utf-8",
    )
    (logs / "trn-k07" / "rank0.log").write_text(
        f"{HEADER} NCCL INFO Bootstrap : Using eth0:10.77.3.7<0>\n"
        f"{HEADER} NCCL INFO NET/Socket : Using [0]eth0:fe80::a1b2:77ff:fe03:7%eth0<0>\n"
        f"{HEADER} NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0\n"
        f"{HEADER} NCCL INFO comm 0x5a10 rank 0 nranks 2 cudaDev 0 busId 1b000 commId 0x9f1 - Init COMPLETE\n"
        "[W1125 10:04:00.000000000 socket.cpp:464] [c10d] The client socket has failed to connect to "
        "[TRN-K07.site-q.internal]:29500 (errno: 110 - Connection timed out).\n"
        "wandb: Currently logged in as: zoe.ops@site-q.example.com\n"
        f"env: HF_TOKEN={TOKEN} USER=zoe MASTER_ADDR=trn-k07 MASTER_PORT=29500\n"
        "pip: fetching https://zoe:s3cr3tpass@pypi.site-q.internal/simple\n"
        "[rank0]:[E1125 10:14:03.123456789 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=311, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, "
        "Timeout(ms)=600000) ran for 600042 milliseconds before timing out.\n",
        encoding="utf-8",
    )
    (logs / "10.77.3.8_rank1.log").write_text(
        f"{HEADER8} NCCL INFO Bootstrap : Using eth0:10.77.3.8<0>\n"
        f"{HEADER8} NCCL INFO comm 0x5a20 rank 1 nranks 2 cudaDev 0 busId 1b000 commId 0x9f1 - Init COMPLETE\n"
        "init_method=tcp://trn-k08.site-q.internal:23456 store ('Trn-K08', 29500) peer ::ffff:10.77.3.7\n"
        "Traceback (most recent call last):\n"
        '  File "/home/zoe/proj/train.py", line 88, in <module>\n'
        "    loss.backward()\n"
        "[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered\n",
        encoding="utf-8",
    )
    (logs / "dmesg_trn-k08.log").write_text(
        "[Tue Nov 25 10:13:58 2025] NVRM: Xid (PCI:0000:1b:00): 79, pid=4202, name=python, "
        "GPU has fallen off the bus.\n",
        encoding="utf-8",
    )
    (logs / "nccl-debug" / "trn-k08.4202.log").write_text(
        f"{HEADER8} misc/socket.cc:538 NCCL WARN socketProgress: Connection closed by remote peer "
        "trn-k07.site-q.internal<54021>\n",
        encoding="utf-8",
    )
    return logs


def _leaks(out: str) -> list[str]:
    low = out.lower()
    return [o for o in ORIGINALS if o.lower() in low]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _tree(tmp_path_factory.mktemp("corpus"))


def test_the_corpus_names_every_original(tree: Path) -> None:
    """Without redaction every original is there to leak (the corpus tests something)."""
    plain = "\n".join(p.read_text(encoding="utf-8") for p in sorted(tree.rglob("*.log")))
    plain += "\n".join(str(p) for p in sorted(tree.rglob("*")))
    plain += (tree / "slurm-81234.out").read_text(encoding="utf-8")
    assert _leaks(plain) == list(ORIGINALS)
    r = CliRunner().invoke(main, ["analyze", str(tree), "-f", "json"])
    assert r.exit_code == 0, r.output
    assert {"trn-k0", "10.77.3."} <= set(_leaks(r.stdout))


@pytest.mark.parametrize("fmt", FORMATS)
def test_analyze_redact_prints_no_original(tree: Path, fmt: str, tmp_path: Path) -> None:
    amap = tmp_path / "aliases.json"
    r = CliRunner().invoke(main, ["analyze", str(tree), "--redact-map", str(amap), "-f", fmt, "-q"])
    assert r.exit_code == 0, r.output
    assert _leaks(r.stdout) == [], r.stdout
    aliases = json.loads(amap.read_text(encoding="utf-8"))
    # one alias per machine: trn-k07 in all its spellings is one host
    k07 = [a for a, o in aliases.items() if o.lower().split(".")[0] == "trn-k07"]
    assert len(k07) == 1 and k07[0].startswith("host-")
    if fmt == "json":
        doc = json.loads(r.stdout)
        plain = json.loads(CliRunner().invoke(main, ["analyze", str(tree), "-f", "json"]).stdout)
        assert doc["redacted"] is True
        # nccllog's own words survive: advice, pattern ids and categories are not aliased
        assert doc["advice"] == plain["advice"] and doc["advice"]
        assert [f["pattern"] for f in doc["findings"]] == [f["pattern"] for f in plain["findings"]]
        assert doc["verdict"]["category"] == plain["verdict"]["category"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_paste_prints_no_original(tree: Path, fmt: str) -> None:
    blob = "".join(p.read_text(encoding="utf-8") for p in sorted(tree.rglob("*")) if p.is_file())
    r = CliRunner().invoke(main, ["paste", "-f", fmt], input=blob)
    assert r.exit_code == 0, r.output
    assert _leaks(r.stdout) == [], r.stdout
