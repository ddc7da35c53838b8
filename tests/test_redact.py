"""Redaction: no original host, IP address, user, e-mail or secret survives in any format; aliases
are stable across the whole report; redacting twice changes nothing."""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import re
import time
from contextlib import chdir
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from synth import straggler

import nccllog
from bench.cases import fixture_cases
from nccllog.model import Incident
from nccllog.redact import ALIAS_RE, WITHHELD, Redactor, detect, redact, redact_text, redact_with_map
from nccllog.redact.aliases import GENERIC_NAMES, SHARED_ACCOUNTS
from nccllog.render import FORMATS, render

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SCENARIOS = [c.inputs.parent for c in fixture_cases()]  # sealed fixtures: bench/accuracy.py --sealed only
IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w]|\.\d)")
HOME = re.compile(r"/home/(?:users/)?([A-Za-z_][\w.-]*)")  # /home/users/<name>: the name


def _present(value: str, text: str) -> bool:
    return re.search(rf"(?<![A-Za-z0-9]){re.escape(value)}(?![A-Za-z0-9])", text) is not None


def _all_text(incident: Incident) -> str:
    """Every string of the incident (model and events table), for collecting the originals."""
    parts: list[str] = []

    def walk(obj: object) -> None:
        if isinstance(obj, str):
            parts.append(obj)
        elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            for f in dataclasses.fields(obj):
                if f.name != "events":
                    walk(getattr(obj, f.name))
        elif isinstance(obj, tuple | list):
            for x in obj:
                walk(x)
        elif isinstance(obj, dict):
            for k, v in obj.items():
                walk(k)
                walk(v)

    walk(incident)
    ev = incident.events
    for col, dtype in ev.schema.items():
        if dtype == nccllog.model.pl.String:
            parts.extend(ev.get_column(col).drop_nulls().unique().to_list())
    return "\n".join(parts)


def _originals(incident: Incident) -> dict[str, set[str]]:
    """What a reader could use to identify the site: hosts, routable IPs, user names."""
    text = _all_text(incident)
    hosts = {r.host for r in incident.ranks if r.host}
    if incident.events.height:
        hosts |= set(incident.events.get_column("host").drop_nulls().to_list())
    hosts |= set(incident.verdict.culprit_hosts)
    # one letter identifies nobody, nor does a generic word (a node called `master`)
    hosts = {h for h in hosts if len(h) >= 2 and h.lower() not in GENERIC_NAMES}
    ips = set()
    for m in IPV4.finditer(text):
        try:
            ip = ipaddress.ip_address(m.group(0))
        except ValueError:
            continue
        if not (ip.is_loopback or ip.is_unspecified):
            ips.add(m.group(0))
    users = set(HOME.findall(text)) - SHARED_ACCOUNTS
    return {"host": hosts, "ip": ips, "user": users}


def _assert_clean(incident: Incident, originals: dict[str, set[str]], where: str) -> None:
    red = redact(incident)
    for fmt in FORMATS:
        out = render(red, fmt)
        for kind, values in originals.items():
            for value in values:
                assert not _present(value, out), f"{where}: {kind} {value!r} survives in {fmt}"
    # and the events table the library hands out
    events = _all_text(dataclasses.replace(red, ranks=(), findings=(), timeline=()))
    for kind, values in originals.items():
        for value in values:
            assert not _present(value, events), f"{where}: {kind} {value!r} survives in the events table"


def test_synthetic_no_original_survives() -> None:
    inc = straggler(16, culprit=11, per_host=4, hostile=True, user="alice")
    originals = _originals(inc)
    assert len(originals["host"]) == 4 and len(originals["ip"]) == 4 and originals["user"] == {"alice"}
    _assert_clean(inc, originals, "synthetic")
    out = render(redact(inc), "text")
    assert "cluster.local" not in out and "alice" not in out and "10.12." not in out


@pytest.mark.parametrize("folder", SCENARIOS, ids=[p.name for p in SCENARIOS])
def test_fixture_no_original_survives(folder: Path) -> None:
    with chdir(folder):
        inc = nccllog.analyze("logs")
    _assert_clean(inc, _originals(inc), folder.name)


def test_aliases_are_stable_across_the_report() -> None:
    inc = straggler(16, culprit=11, per_host=4)
    red, aliases = redact_with_map(inc)
    by_original = {v: k for k, v in aliases.items()}
    culprit_alias = by_original["node-a02.cluster.local"]
    assert red.verdict.culprit_hosts == (culprit_alias,)
    assert {r.host for r in red.ranks if r.rank in (8, 9, 10, 11)} == {culprit_alias}
    assert culprit_alias in red.verdict.summary and culprit_alias in red.verdict.evidence[1].note
    assert set(red.events.filter(nccllog.model.pl.col("rank") == 11)["host"].to_list()) == {culprit_alias}
    assert all(culprit_alias in s for s in red.ranks[11].sources)
    doc = json.loads(render(red, "json"))
    assert doc["verdict"]["culprit_hosts"] == [culprit_alias] and doc["redacted"] is True
    # host-1 is rank 0's host; users and IPs get their own numbering
    assert aliases["host-1"] == "node-a00.cluster.local"
    assert aliases["user-1"] == "alice"
    assert aliases["ip-1"] == "10.12.0.10"
    assert all(ALIAS_RE.fullmatch(a) for a in aliases)


def test_redaction_is_idempotent_on_the_model() -> None:
    inc = straggler(12, culprit=5, per_host=4, hostile=True)
    once = redact(inc)
    twice = redact(once)
    for fmt in FORMATS:
        assert render(once, fmt) == render(twice, fmt)
    assert render(inc, "json", redact=True) == render(once, "json")


def test_redact_map_lists_every_alias() -> None:
    inc = straggler(8, culprit=3, per_host=4)
    _red, aliases = redact_with_map(inc)
    assert set(aliases.values()) >= {
        "node-a00.cluster.local",
        "node-a01.cluster.local",
        "alice",
        "10.12.0.10",
    }


def test_detectors() -> None:
    found = set(
        detect(
            "node-a07:12345:12399 [3] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.2<0> "
            'File "/home/bob/train.py" mail jane.doe@corp.example.com HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123 '
            "peer fe80::1ff:fe23:4567:890a%eth0 Authorization: Bearer abcdefghijklmnop.qrstuv "
            "host : trn-b12.internal srun: error: gpu-07: task 3: Exited"
        )
    )
    assert ("host", "node-a07") in found and ("ip", "10.0.0.2") in found and ("user", "bob") in found
    assert ("email", "jane.doe@corp.example.com") in found
    assert ("secret", "hf_abcdefghijklmnopqrstuvwxyz0123") in found
    assert ("ip", "fe80::1ff:fe23:4567:890a") in found  # the zone (%eth0) names an interface
    assert ("secret", "abcdefghijklmnop.qrstuv") in found
    assert ("host", "trn-b12.internal") in found and ("host", "gpu-07") in found


def test_not_redacted_on_purpose() -> None:
    text = (
        "[rank3]:[E1023 14:02:17.412903117 ProcessGroupNCCL.cpp:632] c10::Error at::Tensor std::runtime_error "
        "see https://pytorch.org/docs/stable/notes/cuda.html 127.0.0.1 ::1 0.0.0.0 localhost "
        "NCCL version 2.20.5+cuda12.4 torch.distributed.elastic max_tokens=4096"
    )
    assert redact_text(text) == text


# ---------------------------------------------------------------------------------------------
# properties

# Real names may have the shape of an alias (a machine called host-3 or ip-0): they are kept as
# they are, and no alias takes their number.
_HOST = st.one_of(
    st.from_regex(r"[a-z]{2,6}-[a-z]?[0-9]{1,3}(\.[a-z]{2,6}\.(local|internal|com))?", fullmatch=True),
    st.from_regex(r"(host|ip|user|nodes)-[0-9]{1,2}(\.[a-z]{2,6}\.local)?", fullmatch=True),
)
# routable addresses (loopback 127/8 is kept on purpose)
_IP = st.tuples(st.integers(1, 254).filter(lambda o: o != 127), *[st.integers(0, 254)] * 3).map(
    lambda t: ".".join(map(str, t))
)
_USER = st.from_regex(
    r"[a-z]{2,6}[0-9]{1,3}", fullmatch=True
)  # not a generic word (root, shared) that is kept
_NOISE = st.text(alphabet=st.characters(codec="utf-8"), max_size=40)


@st.composite
def _log_text(draw: st.DrawFn) -> tuple[str, str, str, str]:
    host, ip, user = draw(_HOST), draw(_IP), draw(_USER)
    pieces = [
        f"{host}:4242:4243 [0] NCCL INFO NET/Socket : Using [0]eth0:{ip}<0>",
        f'File "/home/{user}/x.py", line 3',
        f"connect to {ip} failed",
        f"hostname: {host}",
        draw(_NOISE),
        draw(_NOISE),
    ]
    order = draw(st.permutations(pieces))
    return " ".join(order), host, ip, user


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_log_text())
def test_property_redaction_removes_and_is_idempotent(case: tuple[str, str, str, str]) -> None:
    text, host, ip, user = case
    once = redact_text(text)
    assert redact_text(once) == once
    assert not _present(ip, once)
    assert ALIAS_RE.fullmatch(host) or not _present(host, once)
    assert f"/home/{user}/" not in once


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_property_never_raises_and_idempotent(text: str) -> None:
    once = redact_text(text)
    assert redact_text(once) == once


def test_ipv4_mapped_ipv6_gids_are_redacted_whole() -> None:
    from nccllog.redact import redact_text

    # NCCL prints RoCE GIDs as IPv4-mapped IPv6, with and (2.20+) without a space after remoteGids.
    text = "localGid ::ffff:10.1.0.17 remoteGids::ffff:10.1.0.21 peer fe80::1<40917>; see 2001:db8::1."
    out = redact_text(text)
    for original in ("10.1.0.17", "10.1.0.21", "1.0.17", "fe80::1", "2001:db8::1"):
        assert original not in out, out
    assert redact_text(out) == out


# ---------------------------------------------------------------------------------------------
# every context a log names a machine in

CONTEXTS = [
    ("The client socket has failed to connect to [store-n1]:29500 (errno: 110)", ["store-n1"]),
    ("connect to ('store-n2', 29500) failed", ["store-n2"]),
    ("DistStoreError: (store-n3.cluster.local, 29500)", ["store-n3"]),
    ('File "/home/carol,", and /home/dave) and /Users/erin.', ["carol", "dave", "erin"]),
    ("n1:1:2 [0] NCCL INFO NET/Socket : Using [0]eth0:fe80::1b2%eth0<0> [1]ib0:fd00::7<0>", ["fe80::1b2", "fd00::7"]),
    ("logs/rank0_10.9.8.7.log logs/10.9.8.6-rank1.log job.10.9.8.5.out", ["10.9.8.7", "10.9.8.6", "10.9.8.5"]),
    ("torchrun --master_addr head-n4 --master-addr=head-n5 --nnodes 2", ["head-n4", "head-n5"]),
    ("torchrun --rdzv_endpoint head-n6:29400 --rdzv-endpoint=[fd00::9]:29400", ["head-n6", "fd00::9"]),
    ("init_method=tcp://head-n7:23456 env tcp://10.9.8.4:1 c10d://head-n8", ["head-n7", "10.9.8.4", "head-n8"]),
    ("ssh: connect to host far-n1 port 22: Connection refused", ["far-n1"]),
    ("ssh: Could not resolve hostname far-n2: Name or service not known", ["far-n2"]),
    ("Warning: Permanently added 'far-n3,10.9.8.3' (ED25519) to the list", ["far-n3", "10.9.8.3"]),
    ("far-n4: ssh: connect to host failed; ssh -p 2222 far-n5 hostname", ["far-n4", "far-n5"]),
    ("(RayTrainWorker pid=9, ip=10.9.8.2, node_name=ray-w3) node_ip_address: ray-w4", ["10.9.8.2", "ray-w3", "ray-w4"]),
    ("SLURM_JOB_NODELIST=gpu-[01-03,07],cpu9 srun: error: Nodes dgx[11-12] are not ready", ["gpu-[01-03,07]", "gpu-02", "gpu-07", "cpu9", "dgx[11-12]", "dgx12"]),
    ("mpirun -H wk-1:4,wk-2:4 --hosts wk-3,wk-4", ["wk-1", "wk-2", "wk-3", "wk-4"]),
    ("https://ops:hunter2pass@git.site-x.corp/repo and mail ops.team@site-x.example.com", ["hunter2pass", "git.site-x.corp", "ops.team@site-x.example.com"]),
]  # fmt: skip


@pytest.mark.parametrize(("text", "originals"), CONTEXTS, ids=[c[1][0] for c in CONTEXTS])
def test_every_context_is_redacted(text: str, originals: list[str]) -> None:
    once = redact_text(text)
    for original in originals:
        assert not _present(original, once) and original not in once, (original, once)
    assert redact_text(once) == once


def test_one_alias_per_machine() -> None:
    text = (
        "hostname: node-q07.cluster.local | node-q07:1:2 [0] NCCL INFO x | NODE-Q07 | Node-Q07.Cluster.Local | "
        "logs/node-q07_rank3.log || peer ::ffff:10.4.0.7<1> 10.4.0.7 ::FFFF:10.4.0.7 [::ffff:10.4.0.7]:29500"
    )
    red = Redactor()
    red.scan(text)
    out = red.apply(text)
    assert red.aliases == {"host-1": "node-q07.cluster.local", "ip-1": "10.4.0.7"}
    assert "q07" not in out.lower() and "10.4.0.7" not in out
    assert out.count("host-1") == 5 and out.count("ip-1") == 4


def test_alias_shaped_names_are_kept_and_never_reused() -> None:
    text = "hostname: host-1 | hostname: ip-2 | hostname: node-z9 | peer 10.5.0.1<1> peer 10.5.0.2<2> | host-1.lab.local"
    red = Redactor()
    red.scan(text)
    out = red.apply(text)
    aliases = red.aliases
    assert "host-1" not in aliases and "ip-2" not in aliases  # the real names keep their numbers
    assert {aliases["host-2"], aliases["host-3"]} == {"node-z9", "host-1.lab.local"}
    assert aliases["ip-1"] == "10.5.0.1" and aliases["ip-3"] == "10.5.0.2"
    assert out.startswith("hostname: host-1 | hostname: ip-2 | hostname: host-")
    assert "lab.local" not in out and redact_text(out) == out


def test_own_text_is_never_redacted() -> None:
    """Advice, remediation and reasons are rewritten only where they quote a value of the logs."""
    inc = straggler(8, culprit=3, per_host=4)
    own = (
        "Check MASTER_ADDR/MASTER_PORT and MASTER_ADDR:MASTER_PORT; host: the first node; "
        "set NCCL_SOCKET_IFNAME; see ProcessGroupNCCL.cpp and nccl.warn"
    )
    env = dataclasses.replace(inc.environment, settings={**inc.environment.settings, "MASTER_PORT": "29500"})
    verdict = dataclasses.replace(
        inc.verdict,
        remediation=(own,),
        rules_in=(*inc.verdict.rules_in, f"{own} on node-a01.cluster.local"),
    )
    advice = tuple(dataclasses.replace(a, why=own) for a in inc.advice)
    # a log line that says the same must not teach the redactor that MASTER_PORT is a host
    first = dataclasses.replace(inc.findings[0], text=f"export MASTER_ADDR:MASTER_PORT {own}")
    inc = dataclasses.replace(
        inc, verdict=verdict, advice=advice, environment=env, findings=(first, *inc.findings[1:])
    )
    red = redact(inc)
    assert red.verdict.remediation == (own,)
    assert red.verdict.rules_in[-1] == f"{own} on host-2"
    assert all(a.why == own for a in red.advice) and red.environment.settings["MASTER_PORT"] == "29500"
    assert red.verdict.category == inc.verdict.category and red.findings[0].pattern == inc.findings[0].pattern
    assert "MASTER_PORT" in red.findings[0].text and "MASTER_PORT" in render(red, "markdown")


def test_a_timed_out_text_is_withheld(monkeypatch: pytest.MonkeyPatch) -> None:
    from nccllog.redact import detectors

    monkeypatch.setattr(detectors, "TIMEOUT", 1e-9)
    text = "hostname: node-t1 " + "a." * 300_000
    assert redact_text(text) == WITHHELD
    assert redact_text(WITHHELD) == WITHHELD


# Units repeated to fill a line, each aimed at one detector's slow path: a run of its leading
# class, a separator it retries on, a keyword followed by nothing it can take.
_PROBES = (
    "a%", "a.", "a@", " ", "a", ":", "0:", "f:", "eth0:", "1.", "::", "/home/", "token ", "user ",
    "[a]:", "(a, ", "tcp://", "-", "gpu-[", "[1-", "a[1-2]", "ssh -x ", "_", "hostname: ", "1.1.1.",
    "@a.", "Bearer ", "aA1", "on host ", "peer ", "--hosts ", "nodes=", "a,", "://a@", "host-1 ",
)  # fmt: skip


def _seconds(text: str) -> float:
    t0 = time.perf_counter()
    redact_text(text)
    return time.perf_counter() - t0


@pytest.mark.slow
@pytest.mark.parametrize("unit", _PROBES)
def test_redaction_time_is_linear(unit: str) -> None:
    """1 MiB against 256 KiB: linear work grows 4x, quadratic 16x. The bound is a ratio with a
    generous margin (and a floor for timer noise on tiny times), never a wall-clock limit."""

    def probe(n: int) -> str:
        return (unit * (n // len(unit) + 1))[:n] + "@x.com"

    ratio = 0.0
    for _ in range(3):  # a busy machine can spoil one measurement, not three
        small, big = _seconds(probe(1 << 18)), _seconds(probe(1 << 20))
        ratio = big / max(small, 0.01)
        if ratio < 9:
            break
    assert ratio < 9, f"{unit!r}: 1 MiB took {ratio:.1f}x the time of 256 KiB"


_TEMPLATES = (
    "{h}:4242:4243 [0] NCCL INFO NET/Socket : Using [0]eth0:{ip}<0>",
    "failed to connect to [{h}]:29500 (errno: 110)",
    "store ('{h}', 29500) and [{ip}]:29400",
    "torchrun --master_addr {h} --rdzv_endpoint {ip}:29400",
    "init_method=tcp://{h}:23456",
    "ssh: connect to host {h} port 22",
    "SLURM_JOB_NODELIST={h}-[01-02,5]",
    "hostname: {h} HOSTNAME={h}",
    'File "/home/{u}/x.py", line 3',
    "logs/{h}_rank0.log logs/{ip}_rank1.log",
    "peer ::ffff:{ip}<1> remote peer {h}<2>",
)


@st.composite
def _context_text(draw: st.DrawFn) -> tuple[str, str, str, str]:
    host, ip, user = draw(_HOST), draw(_IP), draw(_USER)
    shown = host.upper() if draw(st.booleans()) else host
    templates = draw(st.lists(st.sampled_from(_TEMPLATES), min_size=1, max_size=5))
    templates.append("MASTER_ADDR={h}")  # the host is known once; every other spelling and place follows
    pieces = [t.replace("{h}", shown).replace("{ip}", ip).replace("{u}", user) for t in templates]
    pieces += draw(st.lists(_NOISE, max_size=2))
    text = " ".join(draw(st.permutations(pieces)))
    return text, host, ip, user


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_context_text())
def test_property_every_context_any_case_idempotent(case: tuple[str, str, str, str]) -> None:
    text, host, ip, user = case
    once = redact_text(text)
    assert redact_text(once) == once
    assert ip not in once or not _present(ip, once)
    assert ALIAS_RE.fullmatch(host) or host.lower() not in once.lower()
    assert f"/home/{user}/" not in once


def test_the_user_under_a_nested_home_root_is_redacted() -> None:
    from nccllog.redact.detectors import _HOME

    assert _HOME.findall("/gpfs/home/users/qz81/.venv/lib/torch") == ["qz81"]
