"""Detectors: the values in one log-derived text that identify a site or a person.

``detect(text)`` returns ``(kind, value)`` pairs; kinds are ``host``, ``ip``, ``user``, ``email``,
``secret`` and ``nodes`` (a Slurm node list such as ``gpu-[01-04,07]``, whose members are also
returned as hosts). Values are raw: the Redactor decides what a value stands for (a host that
parses as an address is an ``ip``; loopback, public sites and generic words are dropped).

Every expression here runs in time linear in the text: a match can only start where the run of
characters it consumes starts (a look-behind excludes the run's own characters), quantifiers are
bounded, and nothing nests an unbounded repeat. ``TIMEOUT`` is the backstop all the same: each
search gives up after that many seconds with ``TimeoutError``, and the caller withholds the text.
"""

from __future__ import annotations

import ipaddress
import itertools
from collections.abc import Iterator

import regex

TIMEOUT = 5.0  # seconds per search; every expression here needs well under 0.5 s on 1 MiB
NODELIST_CAP = 4096  # members expanded from one Slurm node list
_A = regex.ASCII
_AI = regex.ASCII | regex.IGNORECASE

ALIAS = regex.compile(r"(?<![A-Za-z0-9])(?:host|ip|user|email|secret|nodes)-[0-9]{1,9}(?![A-Za-z0-9])", _AI)

_EMAIL = regex.compile(
    r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,8}"
    r"\.[A-Za-z]{2,24}(?![A-Za-z0-9-])",
    _A,
)
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
# Not glued to letters or digits (v1.2.3.4) nor part of a longer dotted number; `_` and `-` may
# touch it, as in file names (rank0_10.0.0.1.log).
# Nor the tail of an alias (host-3.0.0.12 is host-3 and a remainder): redaction stays idempotent.
_IPV4 = regex.compile(
    rf"(?<![A-Za-z0-9])(?<![0-9]\.)(?<!(?i:host|ip|user|email|secret|nodes)-)(?:{_OCTET}\.){{3}}{_OCTET}"
    r"(?![A-Za-z0-9])(?!\.[0-9])",
    _A,
)
_V6 = r"(?:[0-9A-Fa-f]{0,4}:){2,7}(?:(?:[0-9]{1,3}\.){3}[0-9]{1,3}|[0-9A-Fa-f]{1,4})?"
_IPV6 = regex.compile(rf"(?<![\w:.])({_V6})(?![\w:]|\.[0-9])", _A)
# NCCL's interface list glues the address to the interface name: `[0]eth0:fe80::1%eth0<0>`.
_IFACE_IPV6 = regex.compile(
    r"(?<![\w.:-])[A-Za-z][\w.-]{0,31}:((?:[0-9A-Fa-f]{0,4}:){1,7}(?:(?:[0-9]{1,3}\.){3}[0-9]{1,3}|[0-9A-Fa-f]{1,4})?)"
    r"(?![\w:]|\.[0-9])",
    _A,
)
# The user is the first folder after a home root that is not itself a home root word
# (`/gpfs/home/users/alice/…`: alice, not users).
_HOME = regex.compile(
    r"[/\\](?:home[0-9]?|Users|users|u|scratch|nfs/home|data/home|gpfs/home|mnt/home)[/\\]"
    r"(?:(?:home[0-9]?|Users|users|u|scratch)[/\\])?([A-Za-z_][\w.-]{0,63})",
    _A,
)
_USER_KV = regex.compile(
    r"(?<![A-Za-z0-9])(?:user|logname|username|user_name|owner)\s{0,8}[=:]\s{0,8}['\"]?([A-Za-z_][\w.-]{1,63})",
    _AI,
)
_HOST_KEYS = (
    r"master[_-]?addr(?:ess)?|host(?:[_-]?name)?|node(?:[_-]?(?:name|ip|ip[_-]address|manager[_-]address))?|"
    r"head[_-]?(?:node|address|ip)|slurmd_nodename|slurm_topology_addr|slurm_launch_node_ipaddr|"
    r"slurm_submit_host|batchhost|allocnode|server|store[_-]?addr(?:ess)?|gcs[_-]?address|"
    r"rdzv[_-]?endpoint|endpoint|dashboard[_-]host"
)
_HOST_VALUE = r"(\[[0-9A-Fa-f:.]{2,45}\]|[A-Za-z0-9][\w.-]{0,252})"
_HOST_KV = regex.compile(rf"(?<![A-Za-z0-9-])({_HOST_KEYS})\s{{0,8}}([=:])\s{{0,8}}['\"]?{_HOST_VALUE}", _AI)
# Keys whose value is a machine even when it is a plain word; after "host: " prose may follow.
_STRONG_KEY = regex.compile(
    r"master[_-]?addr(?:ess)?|host[_-]?name|node[_-]?name|slurmd_nodename|batchhost|allocnode|slurm_submit_host",
    _AI,
)
# Launcher arguments: --master_addr X, --master-addr=X, --rdzv_endpoint X:29500, --hosts a,b, -H a:4,b:4
_HOST_ARG = regex.compile(
    rf"(?<![\w-])--?(?:{_HOST_KEYS}|hosts|H|include|exclude|head[_-]?node[_-]?ip)(?:=|\s{{1,8}})['\"]?"
    r"([\w.:,\[\]-]{1,4096})",
    _AI,
)
_HOST_CONTEXTS = (
    # NCCL's line header "host:pid:tid [dev]" (possibly after launcher prefixes)
    regex.compile(r"(?:^|(?<=[\s\]>:]))([A-Za-z][\w.-]{0,252}):[0-9]{1,10}:[0-9]{1,10} \[[0-9]{1,4}\]", _A),
    # srun: error: node-3: task 3: Exited with exit code 1
    regex.compile(
        r"\bsrun: (?:error|Job step aborted|got SIGCONT|forcing job termination)[^:\n]{0,200}: "
        r"([A-Za-z][\w.-]{0,252}): task",
        _A,
    ),
    # NCCL socket peers: "remote peer node-3.cluster.local<54321>", "to node-3<...>"
    regex.compile(r"(?<![\w-])(?:peer|to|from|with|on|addr) ([A-Za-z][\w.-]{0,252})<[0-9]{1,6}>", _A),
    # TCPStore and c10d: "[node-3]:29500", "[::ffff:10.0.0.1]:29500"
    regex.compile(r"\[([A-Za-z0-9:][\w.:%-]{0,252})\]:[0-9]{1,5}(?![0-9])", _A),
    # ssh and pdsh: "ssh: connect to host node-3 port 22", "Could not resolve hostname node-3",
    # "Permanently added 'node-3,10.0.0.3'", "node-3: ssh: ..."
    regex.compile(
        r"(?:connect to host|resolve hostname|Permanently added ')\s{0,4}\[?([A-Za-z0-9][\w.-]{0,252})", _AI
    ),
    regex.compile(
        r"(?:^|(?<=\s))([A-Za-z][\w.-]{0,252}): (?:ssh|pdsh|rcmd|ssh_exchange_identification)\b", _A
    ),
)
# Contexts where a generic word may follow (a Python tuple, "on node failure"): only values with
# a digit, a dash or a dot are taken there.
_WEAK_CONTEXTS = (
    # (host, port) tuples
    regex.compile(
        r"\(\s{0,8}['\"]?([A-Za-z0-9:][\w.:%-]{0,252})['\"]?\s{0,8},\s{0,8}[0-9]{1,5}\s{0,8}\)", _A
    ),
    # "on host X", "Failed on node X", "to server X"
    regex.compile(r"\b(?:on|at|to|from) (?:host|node|machine|server) ([A-Za-z0-9][\w.-]{0,252})", _A),
    # ssh [options] [user@]host
    regex.compile(
        r"(?<![\w-])ssh(?:\s{1,4}-[\w=-]{1,64}(?:\s{1,4}[0-9]{1,5})?){0,8}\s{1,4}(?:[\w.-]{1,64}@)?"
        r"([A-Za-z0-9][\w.-]{0,252})",
        _A,
    ),
    # user@host
    regex.compile(r"(?<![\w.@-])([a-z_][a-z0-9_.-]{0,63})@([A-Za-z][\w.-]{0,252})(?![\w@-])", _A),
)
# scheme://[user[:password]@]host[:port]
_URL = regex.compile(
    r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,15}://(?:([^\s/@:\[\]]{1,64})(?::([^\s/@]{1,128}))?@)?"
    r"(\[[0-9A-Fa-f:.]{2,45}\]|[A-Za-z0-9][\w.-]{0,252})",
    _A,
)
_NODELIST_KV = regex.compile(
    r"(?<![A-Za-z0-9])(?:slurm_(?:job_|step_)?nodelist|nodelist|nodes|reqnodelist|excnodelist|schednodelist|"
    r"nodenames?)\s{0,8}[=:]\s{0,8}['\"]?([\w.\[\],-]{1,4096})",
    _AI,
)
_NODELIST_EXPR = regex.compile(
    r"(?<![\w.\[\]-])([A-Za-z][\w.-]{0,63}\[[0-9][0-9,-]{0,255}\](?:[\w.-]{0,63}\[[0-9][0-9,-]{0,255}\]){0,3}"
    r"[\w.-]{0,63})",
    _A,
)
# Fully qualified names whose last label says "host" (a file name like torch.distributed.py does not).
_TLDS = (
    "local", "internal", "lan", "intranet", "corp", "cluster", "cloud", "compute", "ec2",
    "com", "net", "org", "edu", "gov", "io", "ai", "dev", "cn", "de", "uk", "fr", "jp", "us", "ca",
)  # fmt: skip
_FQDN = regex.compile(
    r"(?<![\w.-])([A-Za-z0-9][\w-]{0,62}(?:\.[A-Za-z0-9][\w-]{0,62}){0,126}\.(?i:"
    + "|".join(_TLDS)
    + r"))(?![\w-]|\.[A-Za-z])",
    _A,
)
_SECRET_PREFIXED = regex.compile(
    r"(?<![\w-])(?:hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}|sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}|"
    r"xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|ASIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35}|glpat-[A-Za-z0-9_-]{20,}|"
    r"eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})(?![\w-])",
    _A,
)
_SECRET_KV = regex.compile(
    r"(?<![\w-])[\w-]{0,64}?(?:api[_-]?key|secret(?:[_-]?access)?(?:[_-]?key)?|token|passwd|password|pwd|"
    r"credentials?|access[_-]?key|auth[_-]?key)['\"]?\s{0,8}[=:]\s{0,8}['\"]?(?:Bearer\s{1,8}|Basic\s{1,8})?"
    r"([^\s'\",;&)}\]]{6,})",
    _AI,
)
_SECRET_BEARER = regex.compile(r"\b(?:Bearer|Basic)\s{1,8}([A-Za-z0-9._~+/=-]{12,})", _A)
# Long mixed-case-and-digit runs that look random (API keys of unknown vendors).
_SECRET_GENERIC = regex.compile(r"(?<![\w/+=-])([A-Za-z0-9+/]{32,}={0,2})(?![\w/+=-])", _A)

_SECRET_PREFIXES = ("hf_", "gh", "github_pat_", "sk-", "xox", "AKIA", "ASIA", "AIza", "glpat-", "eyJ")
_SECRET_WORDS = ("key", "secret", "token", "passw", "pwd", "credential")
_HOME_HINTS = ("home", "users", "/u/", "\\u", "scratch")
_FQDN_HINTS = tuple("." + tld for tld in _TLDS)
_HOST_WORDS = ("host", "node", "addr", "slurm", "server", "endpoint")


def _find(rx: regex.Pattern[str], text: str) -> Iterator[regex.Match[str]]:
    return rx.finditer(text, timeout=TIMEOUT)


def ip_value(text: str) -> str | None:
    """The canonical form of an address worth hiding (IPv4-mapped IPv6 as its IPv4), else None."""
    core = text.strip("[]").split("%", 1)[0]
    if not any(c.isdigit() for c in core) or ("." not in core and ":" not in core):
        return None
    try:
        ip = ipaddress.ip_address(core)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback or ip.is_unspecified:
        return None
    return str(ip)


def _ipv6_candidate(text: str) -> bool:
    return ("::" in text or text.count(":") == 7) and ip_value(text) is not None


def _random_looking(token: str) -> bool:
    return (
        any(c.islower() for c in token)
        and any(c.isupper() for c in token)
        and sum(c.isdigit() for c in token) >= 3
        and not token.startswith("_Z")
    )


def _distinctive(value: str) -> bool:
    return any(c.isdigit() or c in "-." for c in value)


def expand_nodelist(expr: str) -> list[str]:
    """``gpu-[01-03,07]`` -> ``gpu-01 gpu-02 gpu-03 gpu-07`` (zero padding kept; at most NODELIST_CAP)."""
    choices: list[list[str]] = []
    for part in regex.split(r"(\[[^\]]*\])", expr):
        if not part.startswith("["):
            choices.append([part])
            continue
        items: list[str] = []
        for item in part[1:-1].split(","):
            lo_s, _, hi_s = item.partition("-")
            hi_s = hi_s or lo_s
            if not (lo_s.isdigit() and hi_s.isdigit()) or len(lo_s) > 9 or len(hi_s) > 9:
                return []
            width = len(lo_s) if lo_s.startswith("0") else 0
            stop = min(int(hi_s), int(lo_s) + NODELIST_CAP - 1)
            items.extend(f"{n:0{width}d}" for n in range(int(lo_s), stop + 1))
        choices.append(items[:NODELIST_CAP])
    return ["".join(p) for p in itertools.islice(itertools.product(*choices), NODELIST_CAP)]


def _nodelist(value: str) -> Iterator[tuple[str, str]]:
    """A Slurm node list (``a-[1-2],b3``): the list itself when it has ranges, and every member."""
    value = value.strip(",")
    parts, depth, start = [], 0, 0
    for i, c in enumerate(value):
        depth += (c == "[") - (c == "]")
        if c == "," and depth == 0:
            parts.append(value[start:i])
            start = i + 1
    parts.append(value[start:])
    if "[" in value and not value.startswith("["):
        yield "nodes", value
    for part in parts:
        if part.startswith("["):  # [fe80::1]:29500
            yield "host", part[1:].split("]", 1)[0]
        elif "[" in part:
            yield from (("host", m) for m in expand_nodelist(part))
        elif part:
            yield "host", part if ip_value(part) else part.split(":", 1)[0]


def detect(text: str) -> list[tuple[str, str]]:
    """Every sensitive value in ``text`` as ``(kind, value)``, in order of appearance per detector.

    Each detector runs only when a cheap substring test says it can match (most log lines hold
    nothing sensitive, and there can be millions of them). Raises ``TimeoutError`` when a search
    runs past ``TIMEOUT``."""
    found: list[tuple[str, str]] = []
    low = text.lower()
    if "@" in text:
        found.extend(("email", m.group(0)) for m in _find(_EMAIL, text))
    if "://" in text:
        for m in _find(_URL, text):
            user, password, host = m.groups()
            if user:
                found.append(("user", user))
            if password:
                found.append(("secret", password))
            found.append(("host", host))
    if any(p in text for p in _SECRET_PREFIXES):
        found.extend(("secret", m.group(0)) for m in _find(_SECRET_PREFIXED, text))
    if any(w in low for w in _SECRET_WORDS):
        found.extend(("secret", m.group(1)) for m in _find(_SECRET_KV, text))
    if "bearer" in low or "basic" in low:
        found.extend(("secret", m.group(1)) for m in _find(_SECRET_BEARER, text))
    if len(text) >= 32:
        found.extend(
            ("secret", m.group(1)) for m in _find(_SECRET_GENERIC, text) if _random_looking(m.group(1))
        )
    if "." in text:
        found.extend(("ip", m.group(0)) for m in _find(_IPV4, text))
    if "::" in text or text.count(":") >= 7:
        for rx in (_IPV6, _IFACE_IPV6):
            found.extend(("ip", m.group(1)) for m in _find(rx, text) if _ipv6_candidate(m.group(1)))
    if any(h in low for h in _HOME_HINTS):
        found.extend(("user", m.group(1).rstrip(".")) for m in _find(_HOME, text))
    if "user" in low or "logname" in low or "owner" in low:
        found.extend(("user", m.group(1).rstrip(".")) for m in _find(_USER_KV, text))
    if any(h in low for h in _FQDN_HINTS):
        found.extend(("host", m.group(1)) for m in _find(_FQDN, text))
    if any(w in low for w in _HOST_WORDS):
        for m in _find(_HOST_KV, text):
            key, sep, value = m.groups()
            if sep == "=" or _STRONG_KEY.fullmatch(key) or _distinctive(value):
                found.append(("host", value))
    if "-" in text:
        for m in _find(_HOST_ARG, text):
            found.extend(_nodelist(m.group(1)))
    if "node" in low:
        for m in _find(_NODELIST_KV, text):
            found.extend(_nodelist(m.group(1)))
    if "[" in text:
        for m in _find(_NODELIST_EXPR, text):
            inside = m.group(1)[m.group(1).index("[") :]
            if "-" in inside or "," in inside:
                found.extend(_nodelist(m.group(1)))
    hints: tuple[tuple[str, ...], ...] = ((" [",), ("srun:",), ("<",), ("]:",), ("host", "added"), (": ",))
    for rx, words in zip(_HOST_CONTEXTS, hints, strict=True):
        if any(w in low for w in words):
            found.extend(("host", m.group(1)) for m in _find(rx, text))
    for rx, hint in zip(_WEAK_CONTEXTS, (",", " ", "ssh", "@"), strict=True):
        if hint in low:
            for m in _find(rx, text):
                if _distinctive(m.group(rx.groups)):
                    found.extend(
                        ("user" if i < rx.groups else "host", m.group(i)) for i in range(1, rx.groups + 1)
                    )
    return found


# A node list in the template of an unmatched line, where the matcher masked its numbers:
# "Nodes gpu-[N-N,N] are not ready".
_TEMPLATE_NODELIST = regex.compile(r"(?<![\w.\[\]-])[A-Za-z][\w.-]{0,63}\[N(?:[-,]N){1,64}\][\w.-]{0,63}", _A)


def detect_template(template: str) -> list[tuple[str, str]]:
    """``detect`` for a template whose numbers are masked as ``N``, plus the node lists in it."""
    found = detect(template)
    if "[N" in template:
        found.extend(("nodes", m.group(0)) for m in _find(_TEMPLATE_NODELIST, template))
    return found


def aliases_in(text: str) -> Iterator[str]:
    """Tokens of ``text`` shaped like aliases (``host-3``): kept as they are, their numbers reserved."""
    if "-" in text:
        yield from (m.group(0) for m in _find(ALIAS, text))
