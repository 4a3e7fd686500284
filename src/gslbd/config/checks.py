"""Health-check profiles (`checks:`) and the `check:` references of services and endpoints."""

from __future__ import annotations

import re
from collections.abc import Mapping

from gslbd.config.fields import (
    Invalid,
    MapReader,
    Report,
    as_map,
    boolean,
    describe,
    duration,
    enum,
    integer,
    join,
    nonempty_string,
    string,
    suggest,
)
from gslbd.config.loader import Map, Node, Scalar, Seq
from gslbd.config.names import origin_name
from gslbd.model.check import Check
from gslbd.types import CheckType, InitialState

_COMMON = ("type", "port", "interval", "timeout", "rise", "fall", "window", "initial")
PUSH_TTL = 30.0  # seconds: a push check's default ttl
MAX_WINDOW = 64  # results a window holds (a bit each)
_HTTP = ("path", "host", "expect_status", "expect_body", "headers")
KEYS_BY_TYPE: Mapping[CheckType, tuple[str, ...]] = {
    CheckType.HTTP: _HTTP,
    CheckType.HTTPS: (*_HTTP, "tls_verify", "ca_file"),
    CheckType.TCP: ("send", "expect"),
    CheckType.DNS: ("query", "qtype", "expect_rcode", "expect_answer"),
    CheckType.GRPC: ("service",),
    CheckType.ICMP: ("count",),
    CheckType.EXEC: ("command",),
    CheckType.PUSH: ("ttl",),
}
_ALL_KEYS = frozenset(_COMMON).union(*KEYS_BY_TYPE.values())
_NEEDS_PORT = (CheckType.TCP, CheckType.GRPC)
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")
NONE = "none"


def _path(node: Node) -> str:
    value = string(node)
    if not value.startswith("/"):
        raise Invalid(f"path must start with '/', got {value!r}")
    return value


def _status(node: Node) -> int:
    return integer(100, 599)(node)


def _statuses(node: Node) -> tuple[int, ...]:
    if isinstance(node, Scalar):
        return (_status(node),)
    if not isinstance(node, Seq) or not node.items:
        raise Invalid(f"expected a list of HTTP status codes, got {describe(node)}")
    out = []
    for i, item in enumerate(node.items):
        try:
            out.append(_status(item))
        except Invalid as exc:
            raise Invalid(f"item {i}: {exc.message}") from None
    return tuple(out)


def _regex(node: Node) -> str:
    value = string(node)
    try:
        re.compile(value)
    except re.error as exc:
        raise Invalid(f"not a valid regular expression {value!r}: {exc}") from None
    return value


def _headers(node: Node) -> tuple[tuple[str, str], ...]:
    if not isinstance(node, Map):
        raise Invalid(f"expected a mapping of header names to values, got {describe(node)}")
    out = []
    for entry in node.entries:
        if not _HEADER_NAME.match(entry.key):
            raise Invalid(f"invalid header name {entry.key!r}")
        value = entry.value.value if isinstance(entry.value, Scalar) else None
        if not isinstance(value, str) or "\r" in value or "\n" in value:
            raise Invalid(f"header {entry.key!r}: expected a one-line string, got {describe(entry.value)}")
        out.append((entry.key, value))
    return tuple(out)


def _qtype(node: Node) -> str:
    import dns.rdatatype  # dnspython: only for a dns check (costly to import)

    value = string(node)
    try:
        rdtype = dns.rdatatype.from_text(value)
    except dns.rdatatype.UnknownRdatatype:
        raise Invalid(f"unknown DNS type {value!r}") from None
    if dns.rdatatype.is_metatype(rdtype):
        raise Invalid(f"{value!r} is not a type a probe can ask for")
    return dns.rdatatype.to_text(rdtype)


def _rcode(node: Node) -> str:
    import dns.rcode  # dnspython: only for a dns check (costly to import)

    value = string(node)
    try:
        return dns.rcode.to_text(dns.rcode.from_text(value))
    except dns.rcode.UnknownRcode:
        raise Invalid(f"unknown DNS rcode {value!r}; e.g. NOERROR, NXDOMAIN, SERVFAIL, REFUSED") from None


def _command(node: Node) -> tuple[str, ...]:
    if not isinstance(node, Seq):
        raise Invalid(f"expected a list of strings (argv), got {describe(node)}")
    if not node.items:
        raise Invalid("must not be empty: give the program and its arguments")
    out = []
    for i, item in enumerate(node.items):
        value = item.value if isinstance(item, Scalar) else None
        if not isinstance(value, str):
            raise Invalid(f"item {i}: expected a string, got {describe(item)}")
        out.append(value)
    if not out[0].strip():
        raise Invalid("the program (item 0) must not be empty")
    return tuple(out)


def read_check(r: MapReader, name: str) -> Check | None:
    """One profile (or inline check) named `name`; None when it has errors (they are reported)."""
    for entry in r.node.entries:
        if entry.key not in _ALL_KEYS:
            hint = suggest(entry.key, _ALL_KEYS) or "; valid keys: " + ", ".join(sorted(_ALL_KEYS))
            r.rep.error(entry.key_line, r.at(entry.key), f"unknown key '{entry.key}'{hint}")
    kind = r.req("type", enum(CheckType, "check type"))
    if kind is None:
        return None
    allowed = set(_COMMON) | set(KEYS_BY_TYPE[kind])
    if kind is CheckType.ICMP:
        allowed.discard("port")
    if kind is CheckType.PUSH:  # nothing is probed: results come by POST /api/v1/health, or their ttl ends
        allowed -= {"port", "interval", "timeout"}
    errors_before = len(r.rep.problems)
    for entry in r.node.entries:
        if entry.key in _ALL_KEYS and entry.key not in allowed:
            users = [t.value for t, keys in KEYS_BY_TYPE.items() if entry.key in keys]
            for_what = f" (it is for {', '.join(users)})" if users else ""
            r.rep.error(
                entry.key_line, r.at(entry.key), f"'{entry.key}' does not apply to type {kind}{for_what}"
            )
    port = r.opt("port", integer(1, 65535))
    if kind in _NEEDS_PORT and not r.has("port"):
        r.rep.error(r.line, r.at("port"), f"required key is missing (type {kind} has no default port)")
    interval = r.get("interval", duration(), 5.0)
    timeout = r.get("timeout", duration(), 2.0)
    if kind is CheckType.PUSH:  # a missing push is a failed result every ttl: the check's interval
        interval = r.get("ttl", duration(), PUSH_TTL)
        timeout = 0.0
    elif timeout >= interval:
        key = "timeout" if r.has("timeout") else "interval"
        r.error(key, f"timeout ({timeout:g}s) must be shorter than interval ({interval:g}s)")
    ca_file = r.opt("ca_file", nonempty_string)
    if ca_file is not None:
        file = r.rep.resolve_path(ca_file)
        ca_file = str(file)
        if not file.is_file():
            r.error("ca_file", f"CA file {ca_file!r} is not a file that exists")
    if kind is CheckType.EXEC and not r.has("command"):
        r.missing("command")
    fall = r.get("fall", integer(1), 3)
    window = r.get("window", integer(1, MAX_WINDOW), 0)
    if window and window < fall:
        r.error(
            "window",  # down when `fall` of the last `window` results failed
            f"window ({window}) must be at least fall ({fall})",
        )
    check = Check(
        name=name,
        type=kind,
        port=port,
        interval=interval,
        timeout=timeout,
        rise=r.get("rise", integer(1), 2),
        fall=fall,
        window=window,
        initial=r.get("initial", enum(InitialState, "initial state"), InitialState.UP) is InitialState.UP,
        path=r.get("path", _path, "/"),
        host=r.opt("host", nonempty_string),
        expect_status=r.get("expect_status", _statuses, ()),
        expect_body=r.opt("expect_body", _regex),
        tls_verify=r.get("tls_verify", boolean, True),
        ca_file=ca_file,
        headers=r.get("headers", _headers, ()),
        send=r.opt("send", string),
        expect=r.opt("expect", string),
        query=r.opt("query", origin_name),
        qtype=r.get("qtype", _qtype, "A"),
        expect_rcode=r.get("expect_rcode", _rcode, "NOERROR"),
        expect_answer=r.opt("expect_answer", string),
        service=r.get("service", string, ""),
        count=r.get("count", integer(1, 100), 1),
        command=r.get("command", _command, ()),
    )
    if any(p.severity == "error" for p in r.rep.problems[errors_before:]):
        return None
    return check


def read_profiles(rep: Report, r: MapReader | None) -> dict[str, tuple[Check, str]]:
    """`checks:` -> {name: (Check, path)} for every valid profile, in config order."""
    out: dict[str, tuple[Check, str]] = {}
    if r is None:
        return out
    for entry in r.node.entries:
        path = join(r.path, entry.key)
        if entry.key == NONE:
            rep.error(entry.key_line, path, "'none' cannot be a profile name: `check: none` means no check")
            continue
        profile = as_map(rep, entry.value, path, entry.key_line)
        if profile is None:
            continue
        check = read_check(profile, entry.key)
        if check is not None:
            out[entry.key] = (check, path)
    return out


class CheckRef:
    """Resolves `check:` values (a profile name, an inline mapping, or `none`) and records which
    profiles are used, so unused ones can be reported."""

    def __init__(self, rep: Report, profiles: Mapping[str, tuple[Check, str]], names: set[str]) -> None:
        self.rep = rep
        self.profiles = profiles
        self.names = names  # every name under `checks:`, valid or not (no "unknown profile" for those)
        self.used: set[str] = set()

    def resolve(self, r: MapReader, inline_name: str) -> tuple[bool, Check | None]:
        """(given, check) for r's `check` key: given is False when the key is absent."""
        node = r.node_of("check")
        if node is None:
            return False, None
        if isinstance(node, Map):
            inline = MapReader(self.rep, node, r.at("check"), r.key_line("check"))
            return True, read_check(inline, inline_name)
        value = node.value if isinstance(node, Scalar) else None
        if not isinstance(value, str):
            r.error("check", f"expected a profile name, an inline mapping or none, got {describe(node)}")
            return True, None
        if value == NONE:
            return True, None
        self.used.add(value)
        found = self.profiles.get(value)
        if found is not None:
            return True, found[0]
        if value not in self.names:
            r.error("check", self._unknown(value))
        return True, None

    def _unknown(self, value: str) -> str:
        if self.names:
            hint = suggest(value, self.names) or "; defined: " + ", ".join(sorted(self.names))
        else:
            hint = "; no profiles are defined under checks"
        return f"unknown check profile '{value}'{hint}"

    def resolve_list(self, r: MapReader) -> tuple[Check, ...] | None:
        """r's `checks` key (`endpoints[].checks: [a, b]`): the profiles named, in order; None when
        the key is absent or something in it is wrong (each problem reported at its item)."""
        node = r.node_of("checks")
        if node is None:
            return None
        if not isinstance(node, Seq):
            r.error("checks", f"expected a list of check profile names, got {describe(node)}")
            return None
        if not node.items:
            r.error("checks", "the list is empty: name at least one check profile (or leave checks out)")
            return None
        out: list[Check] = []
        seen: set[str] = set()
        ok = True
        for i, item in enumerate(node.items):
            path = join(r.at("checks"), i)
            value = item.value if isinstance(item, Scalar) else None
            if not isinstance(value, str):
                self.rep.error(item.line, path, f"expected a check profile name, got {describe(item)}")
                ok = False
                continue
            if value == NONE:
                self.rep.error(
                    item.line, path, "'none' is not a check profile: leave checks out for no check"
                )
                ok = False
                continue
            self.used.add(value)
            if value in seen:
                self.rep.error(item.line, path, f"check profile '{value}' is listed twice")
                ok = False
                continue
            seen.add(value)
            found = self.profiles.get(value)
            if found is None:
                if value not in self.names:
                    self.rep.error(item.line, path, self._unknown(value))
                ok = False
                continue
            out.append(found[0])
        return tuple(out) if ok else None

    def warn_unused(self, r: MapReader | None) -> None:
        if r is None:
            return
        for entry in r.node.entries:
            if entry.key in self.profiles and entry.key not in self.used:
                self.rep.warn(entry.key_line, join(r.path, entry.key), "check profile is never used")
