"""Names used across gslbd: enums with the exact spellings of the configuration format."""

from __future__ import annotations

from enum import StrEnum


class PolicyName(StrEnum):
    ROUND_ROBIN = "round_robin"
    WEIGHTED = "weighted"
    FAILOVER = "failover"
    GEO = "geo"
    RANDOM = "random"
    HASH = "hash"


class Select(StrEnum):
    """`services[].select`: how an answer is cut from the policy's order (policy/select.py)."""

    ROTATE = "rotate"  # the chosen group, rotated or drawn per query (every release before select)
    FIRST_N = "first_n"  # the first max_answers of the policy's whole order (NS1 Select First N)


class AllDown(StrEnum):
    SERVE_ALL = "serve_all"
    NXDOMAIN = "nxdomain"
    SERVFAIL = "servfail"
    NODATA = "nodata"
    FALLBACK = "fallback"


class AdminState(StrEnum):
    OBEY = "obey"
    UP = "up"
    DOWN = "down"


class InitialState(StrEnum):
    """A check's `initial`: the verdict of its endpoints before their first result."""

    UP = "up"
    DOWN = "down"


class CheckType(StrEnum):
    HTTP = "http"
    HTTPS = "https"
    TCP = "tcp"
    DNS = "dns"
    GRPC = "grpc"
    ICMP = "icmp"
    EXEC = "exec"
    PUSH = "push"


class SyncMode(StrEnum):
    LOCK = "lock"
    NONE = "none"


class Discover(StrEnum):
    STATIC = "static"
    NS = "ns"


class EndpointKind(StrEnum):
    IPV4 = "ipv4"
    IPV6 = "ipv6"
    HOSTNAME = "hostname"


class LogFormat(StrEnum):
    TEXT = "text"
    JSON = "json"


class LogLevel(StrEnum):
    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


def choices(enum: type[StrEnum]) -> str:
    """The valid spellings of an enum, for error messages: 'a | b | c'."""
    return " | ".join(m.value for m in enum)


class Rcode:
    """DNS response codes used by the answer model (the numeric values of RFC 1035/6891)."""

    NOERROR = 0
    FORMERR = 1
    SERVFAIL = 2
    NXDOMAIN = 3
    NOTIMP = 4
    REFUSED = 5
    YXDOMAIN = 6  # a DNAME substitution longer than 255 octets (RFC 6672 2.2)
    NOTAUTH = 9
