"""The regular expressions of line prefix layers (`attribution/layers.py` reads lines with them):
each is anchored with ``.match`` at a position, and bounded so that no line can make it slow."""

from __future__ import annotations

import regex

from nccllog.ingest.timestamps import CTIME_DATE_TIME, ISO_DATE_TIME, SYSLOG_DATE_TIME

_A = regex.ASCII

SYSLOG = regex.compile(
    SYSLOG_DATE_TIME + r" (?P<host>[^\s:\[\]]+) (?P<ident>[^\s:\[\]]+)(?:\[(?P<pid>[0-9]+)\])?: ", _A
)
ISO_TS = regex.compile(ISO_DATE_TIME + r"(?P<tz>Z|[+-][0-9]{2}:?[0-9]{2})?:? ", _A)
ISO_ANYWHERE = regex.compile(ISO_DATE_TIME, _A)
SYSLOG_TAIL = regex.compile(
    r"(?P<host>[^\s:\[\]]+) (?P<ident>kernel|[^\s:\[\]]+(?=\[))(?:\[(?P<pid>[0-9]+)\])?: ", _A
)
DMESG = regex.compile(r"\[ *(?P<s>[0-9]{1,10}\.[0-9]{1,9})\] ", _A)
DMESG_T = regex.compile(r"\[" + CTIME_DATE_TIME + r"\] ", _A)
C10 = regex.compile(
    r"\[(?P<lvl>[FEWIV])(?:(?P<md>[0-9]{3,4}) (?P<h>[0-9]{2}):(?P<mi>[0-9]{2}):(?P<s>[0-9]{2})\.(?P<f>[0-9]{9}|[0-9]{6})"
    r"(?: (?P<num>[0-9]+))?)? ?(?P<src>[^\s\]:]+:[0-9]+)\] ?",
    _A,
)
C10_CUT = regex.compile(r"\[(?P<lvl>[FEWIV])[0-9]{3,4} [0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?\s*$", _A)
GLOG = regex.compile(
    r"(?P<lvl>[FEWIVDC])(?P<md>[0-9]{4}) (?P<h>[0-9]{2}):(?P<mi>[0-9]{2}):(?P<s>[0-9]{2})\.(?P<f>[0-9]{6}|[0-9]{9})"
    r"(?: +(?P<num>[0-9]+))? (?P<src>[^\s\]:]+:[0-9]+)\](?: \[[^\]]*\])? ?",
    _A,
)
PYPLAIN = regex.compile(
    r"(?P<lvl>DEBUG|INFO|WARNING|ERROR|CRITICAL):(?P<logger>[A-Za-z_][A-Za-z0-9_.]*):", _A
)
BRACKET_DATE = regex.compile(r"\[" + ISO_DATE_TIME + r"\] ?", _A)
DEEPSPEED = regex.compile(r"\[(?P<lvl>[A-Z]+)\] \[(?P<src>[^\s\]:]+:[0-9]+):(?P<func>[^\s\]]+)\] ?", _A)
PY21 = regex.compile(r"(?:\[[^\]\s]*\] )?(?P<logger>[A-Za-z_][A-Za-z0-9_.]*): \[(?P<lvl>[A-Z]+)\] ?", _A)
NCCL = regex.compile(
    # the host is empty where a log collector cut it (`worker-9 >> :168:1228 [2] NCCL INFO …`)
    r"(?P<host>[^\s:\[\]()]*):(?P<pid>[0-9]+):(?P<tid>[0-9]+) "
    r"(?:\[(?P<dev>-?[0-9]+)\] )?"
    r"(?:(?P<tms>[0-9]+\.[0-9]+) )?"
    r"(?:(?P<src>[^\s:]+:[0-9]+)(?: \((?P<func>[^\s()]*)\))? )?"
    r"NCCL (?P<lvl>INFO|WARN|TRACE|CALL|ABORT|VERSION)(?: |$)",
    _A,
)
PG = regex.compile(
    r"\[(?:PG ID (?P<lid>[0-9]+) PG GUID (?P<guid>[^\s()\]]+)(?:\((?P<d1>[^()\]]*)\))?"
    r"|PG (?P<name>[^\s()\]]+)(?: \((?P<d2>[^()\]]*)\))?) Rank (?P<r>[0-9]+)\]"
    r"|\[Rank (?P<wr>[0-9]+)\]",
    _A,
)
EXC_HEAD = regex.compile(
    r"  what\(\):  |(?:[A-Za-z_][A-Za-z0-9_]*\.)*[A-Za-z_][A-Za-z0-9_]*(?:Error|Exception): "
    # Ray's C++ terminate handler: `[time E pid tid] logging.cc:108: Unhandled exception: T. what(): `
    r"|(?:\[[^\]]{1,80}\] )?[A-Za-z0-9_.]+:[0-9]+: Unhandled exception: [A-Za-z0-9_:]+\. what\(\): ",
    _A,
)
EXC_RANK = regex.compile(
    r"NCCL communicator was aborted on rank (?P<r>[0-9]+)\."
    r"|\[Rank (?P<w>[0-9]+)\] (?:Watchdog caught|Caught collective|NCCL watchdog|Some NCCL operations)",
    _A,
)
TQDM = regex.compile(
    r"[^\r\n\[\]]{0,120}?(?:[0-9]{1,3}%\|[^|]{0,200}\|[^\[\]|]{0,60}\[[^\[\]]{0,200}\]"
    r"|[0-9.]+[kMGT]?it \[[^\[\]]{0,120}\])",
    _A,
)
NCCLTESTS = regex.compile(r" \.\. (?P<host>[^\s:]+) pid (?P<pid>[0-9]+): ", _A)
NCCL_GRANK = regex.compile(r"\[Rank (?P<r>[0-9]+)\] nccl[A-Za-z]+ comm ", _A)
LOG_DIST = regex.compile(r"\[Rank (?P<r>[0-9]+)\] ", _A)
APP_RANK = regex.compile(
    r"Rank (?P<r>[0-9]+): |\[rank: (?P<l>[0-9]+)\] "
    # ColBERT print_message(f"[{rank}]", …): `[Mar 14, 09:13:42] [2] \t\t …`
    r"|\[[A-Z][a-z]{2} [0-9]{2}, [0-9]{2}:[0-9]{2}:[0-9]{2}\] \[(?P<c>[0-9]+)\] ",
    _A,
)

# Where a known layer starts after a leading layer nccllog does not know (a CI or container
# timestamp, a log viewer's line number, a collector's `host >> `, markdown quoting): the
# anchor must follow whitespace or a separator, within the first ANCHOR_WINDOW characters.
ANCHOR_WINDOW = 240
ANCHOR = regex.compile(
    r"(?<=[\s>|\]])(?:"
    r"\[rank[0-9]{1,7}\]:"  # [rank3]:
    r"|\[[0-9]{1,10},[0-9]{1,7}\]<std"  # Open MPI --tag-output
    r"|\[[A-Za-z_][A-Za-z0-9_.\-]{0,40}?[0-9]{1,7}\]:"  # torchrun tee [default3]:
    r"|\[[FEWI](?:[0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}| [A-Za-z_][\w.]{0,60}:[0-9]{1,6}\])"  # c10
    r"|[FEWI][0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}"  # glog / torch python 2.3+
    r"|\[[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}"  # [2025-10-23 14:02:17 (logger / NCCL 2.26)
    r"|\([A-Za-z_][A-Za-z0-9_]{0,80} pid=[0-9]{1,7}"  # Ray (Actor pid=…
    r"|[^\s:\[\]()]{0,80}:[0-9]{1,10}:[0-9]{1,10} (?:\[-?[0-9]{1,4}\] )?(?:[0-9.]{1,20} )?(?:\S{1,80} )?"
    r"(?:\(\S{1,80}\) )?NCCL (?:INFO|WARN|TRACE|CALL|ABORT)\b"  # NCCL header
    r"|(?:INFO|WARNING|ERROR|CRITICAL):[A-Za-z_][\w.]{0,80}:"  # Python logging (torch <= 2.0)
    r"|Traceback \(most recent call last\):"
    r")",
    _A,
)
TERMINAL_LAYERS = frozenset({"c10", "glog", "pylog", "deepspeed", "nccl", "nccltests"})

IPV4 = regex.compile(r"(?:[0-9]{1,3}\.){3}[0-9]{1,3}", _A)
HOSTNAME = regex.compile(r"[a-z0-9](?:[a-z0-9-]{0,62})(?:\.[a-z0-9](?:[a-z0-9-]{0,62}))*", _A)
TOOLS = regex.compile(  # lower-case tokens with a digit/hyphen that are programs or counters, not hosts
    r"(?:python|pip|perl|ruby|lua|php|java|nvcc|gcc|g\+\+|clang|cc|ld|bash|sh|zsh)[0-9.]*(?:-[0-9.]+)?"
    r"|nvidia-smi|cuda-gdb|ld-linux[a-z0-9.-]*"
    r"|(?:rank|step|epoch|iter|iteration|layer|batch|process|proc|thread|stage|device|task)[-_]?[0-9]+",
    _A,
)
PDSH_NEXT = regex.compile(r"\[(?:rank[0-9]|[A-Za-z_][A-Za-z0-9_.\-]*?[0-9]+\]:|[0-9]{4}-)", _A)
