"""Redaction: no original host, IP address, user, e-mail or secret survives in any format; aliases
are stable across the whole report; redacting twice changes nothing."""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import re
from contextlib import chdir
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from synth import straggler

import nccllog
from bench.cases import fixture_cases
from nccllog.model import Incident
from nccllog.redact import ALIAS_RE, detect, redact, redact_text, redact_with_map
from nccllog.render import FORMATS, render

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SCENARIOS = [c.inputs.parent for c in fixture_cases()]  # sealed fixtures: bench/accuracy.py --sealed only
IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w]|\.\d)")
HOME = re.compile(r"/home/([A-Za-z_][\w.-]*)")


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
    hosts -= {"localhost"}
    ips = set()
    for m in IPV4.finditer(text):
        try:
            ip = ipaddress.ip_address(m.group(0))
        except ValueError:
            continue
        if not (ip.is_loopback or ip.is_unspecified):
            ips.add(m.group(0))
    users = set(HOME.findall(text))
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
    assert ("ip", "fe80::1ff:fe23:4567:890a%eth0") in found
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

_HOST = st.from_regex(r"[a-z]{2,6}-[a-z]?[0-9]{1,3}(\.[a-z]{2,6}\.(local|internal|com))?", fullmatch=True)
# routable addresses (loopback 127/8 is kept on purpose)
_IP = st.tuples(st.integers(1, 254).filter(lambda o: o != 127), *[st.integers(0, 254)] * 3).map(
    lambda t: ".".join(map(str, t))
)
_USER = st.from_regex(r"[a-z][a-z0-9]{2,8}", fullmatch=True)
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
    assert not _present(host, once)
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
