"""nccllog's vocabulary: the signals a pattern gives a line, the cause categories a verdict names,
severities, confidences and field types, each a ``StrEnum`` (a member equals its string, so tables and
JSON hold plain strings), with the categories' titles and roles.

A typo in a member name fails at import or in mypy; a string in a data file that is not a member
fails the library's load (``match/library.py``) and tests/test_rules.py.
"""

from __future__ import annotations

from enum import StrEnum


class Signal(StrEnum):
    """The role of a matched line in the diagnosis (docs/patterns.md lists their meaning)."""

    COLLECTIVE_TIMEOUT = "collective_timeout"
    WORK_STATUS = "work_status"
    DESYNC_REPORT = "desync_report"
    HEARTBEAT = "heartbeat"
    DUMP = "dump"
    ABORT = "abort"
    NCCL_ERROR = "nccl_error"
    NCCL_WARN = "nccl_warn"
    NCCL_RESULT = "nccl_result"
    NETWORK_IB = "network_ib"
    NETWORK_SOCKET = "network_socket"
    STORE_TIMEOUT = "store_timeout"
    CUDA_ERROR = "cuda_error"
    OOM = "oom"
    CRASH_SIGNAL = "crash_signal"
    PYTHON_EXCEPTION = "python_exception"
    ERROR_LINE = "error_line"
    PROCESS_EXIT = "process_exit"
    ROOT_CAUSE = "root_cause"
    ACTOR_DIED = "actor_died"
    XID = "xid"
    DRIVER_HANG = "driver_hang"
    DUPLICATE_GPU = "duplicate_gpu"
    INIT = "init"
    VERSION = "version"
    ENV_SETTING = "env_setting"
    BOOTSTRAP = "bootstrap"
    COMPLETION = "completion"
    PROGRESS = "progress"
    STALL = "stall"
    FRAMEWORK = "framework"
    SETUP_FRAME = "setup_frame"
    COLLECTIVE_FRAME = "collective_frame"
    INFO = "info"


class Category(StrEnum):
    """A cause category: the verdict vocabulary of the JSON contract (schema_version 1). Never rename."""

    STRAGGLER_HANG = "straggler_hang"
    COLLECTIVE_MISMATCH = "collective_mismatch"
    NETWORK_IB = "network_ib"
    NETWORK_SOCKET = "network_socket"
    BOOTSTRAP_RENDEZVOUS = "bootstrap_rendezvous"
    CUDA_ERROR = "cuda_error"
    OOM = "oom"
    SEGFAULT_CRASH = "segfault_crash"
    GPU_HARDWARE_XID = "gpu_hardware_xid"
    P2P_TOPOLOGY = "p2p_topology"
    CONFIG_TIMEOUT_TOO_SHORT = "config_timeout_too_short"
    VERSION_MISMATCH = "version_mismatch"
    INIT_FAILURE = "init_failure"
    OTHER = "other"
    NO_FAILURE = "no_failure"
    UNKNOWN = "unknown"


class Severity(StrEnum):
    """How bad a line is, least first."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"
    CRITICAL = "critical"


class Confidence(StrEnum):
    """How sure a hypothesis is, least first."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class FieldType(StrEnum):
    """The type of a pattern field (``clock``: [H:]MM:SS, stored as float seconds)."""

    INT = "int"
    FLOAT = "float"
    STR = "str"
    HEX = "hex"
    CLOCK = "clock"


# What each category's verdict is called in the reports.
CATEGORY_TITLES: dict[str, str] = {
    Category.STRAGGLER_HANG: "A rank stopped making progress (straggler or hang)",
    Category.COLLECTIVE_MISMATCH: "Ranks called different collectives (mismatch)",
    Category.NETWORK_IB: "InfiniBand / RoCE network failure",
    Category.NETWORK_SOCKET: "Socket network failure",
    Category.BOOTSTRAP_RENDEZVOUS: "Bootstrap / rendezvous failure",
    Category.CUDA_ERROR: "CUDA error",
    Category.OOM: "Out of memory (GPU or host)",
    Category.SEGFAULT_CRASH: "A process crashed (signal / segfault)",
    Category.GPU_HARDWARE_XID: "GPU hardware fault (Xid)",
    Category.P2P_TOPOLOGY: "Peer-to-peer / topology failure",
    Category.CONFIG_TIMEOUT_TOO_SHORT: "Collective timeout set too short for the work",
    Category.VERSION_MISMATCH: "Version mismatch between ranks or libraries",
    Category.INIT_FAILURE: "Initialisation failure",
    Category.OTHER: "Other failure",
    Category.NO_FAILURE: "No failure found",
    Category.UNKNOWN: "Failure of unknown cause",
}

# Causes that live in one machine, so naming its host is the finding even when it is the only one.
HOST_CAUSES: tuple[Category, ...] = (Category.GPU_HARDWARE_XID,)
# Causes in a machine's or the job's setup (interfaces, rendezvous, installed versions, devices).
ENV_CAUSES: tuple[Category, ...] = (
    Category.NETWORK_SOCKET,
    Category.BOOTSTRAP_RENDEZVOUS,
    Category.VERSION_MISMATCH,
    Category.INIT_FAILURE,
    Category.P2P_TOPOLOGY,
)
