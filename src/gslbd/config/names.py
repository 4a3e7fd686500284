"""DNS names, IP addresses and "host:port" texts as the configuration writes them.

Names come out absolute, lower case, with a trailing dot. A name without a trailing dot is relative to
the zone that holds it ("app" in gslb.example.com. is app.gslb.example.com.); "@" is the zone apex.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable

from gslbd.config.fields import Invalid, nonempty_string, string
from gslbd.config.loader import Node
from gslbd.model.config import ListenAddress
from gslbd.types import EndpointKind

_LABEL = re.compile(r"[a-z0-9_-]{1,63}\Z")
_MAX_NAME = 254  # text length of a 255-octet wire name, trailing dot included


def absolute(name: str) -> str:
    """A name as the model writes it: lower case with a trailing dot (not validated)."""
    name = name.strip().lower()
    return name if name.endswith(".") else name + "."


def check_absolute(name: str, *, wildcard: bool = False) -> str:
    """Validate an absolute name (with its trailing dot); returns it lower case. With `wildcard`, a
    first label `*` is allowed (a wildcard service name)."""
    name = name.lower()
    if name == ".":
        return name
    if len(name) > _MAX_NAME:
        raise Invalid(f"name {name!r} is longer than 253 characters")
    for index, label in enumerate(name[:-1].split(".")):
        if not label:
            raise Invalid(f"name {name!r} has an empty label")
        if len(label) > 63:
            raise Invalid(f"label {label!r} of {name!r} is longer than 63 characters")
        if label == "*" and wildcard and index == 0:
            continue
        if label == "*":
            why = "only as the first label of a service name" if wildcard else "only for service names"
            raise Invalid(f"wildcard names are supported {why}: {name!r}")
        if not _LABEL.match(label):
            raise Invalid(f"name {name!r}: labels may hold only letters, digits, '-' and '_'")
    return name


def in_zone(name: str, origin: str) -> bool:
    """Is `name` the origin or below it? Both absolute."""
    return origin in (".", name) or name.endswith("." + origin)


def relative_to(name: str, origin: str) -> str:
    """The part of `name` below `origin` ("" for the apex)."""
    if name == origin:
        return ""
    return name[: len(name) - len(origin) - 1] if origin != "." else name[:-1]


def make_name(text: str, origin: str | None, *, wildcard: bool = False) -> str:
    """An absolute name from config text: absolute as written, else relative to `origin`."""
    text = text.strip()
    if not text:
        raise Invalid("a name must not be empty")
    if text == "@":
        if origin is None:
            raise Invalid("'@' needs a zone")
        return origin
    if text.endswith("."):
        return check_absolute(text, wildcard=wildcard)
    if origin is None:
        raise Invalid(f"name {text!r} must be absolute (end with a dot)")
    return check_absolute(text + "." + origin if origin != "." else text + ".", wildcard=wildcard)


def relative_warning(text: str, origin: str) -> str | None:
    """A warning when a relative name already ends with the origin (a forgotten trailing dot)."""
    bare = origin.rstrip(".")
    lowered = text.strip().lower()
    if bare and not lowered.endswith(".") and (lowered == bare or lowered.endswith("." + bare)):
        return (
            f"{text!r} has no trailing dot, so it is relative and means {make_name(text, origin)!r}; "
            f"write {text + '.'!r} if you meant the absolute name"
        )
    return None


def name_in(origin: str | None) -> Callable[[Node], str]:
    """Converter: a (possibly relative) name in the zone `origin`."""

    def conv(node: Node) -> str:
        return make_name(string(node), origin)

    return conv


def origin_name(node: Node) -> str:
    """Converter: a zone origin; the trailing dot may be left out."""
    text = nonempty_string(node).strip()
    return check_absolute(text if text.endswith(".") else text + ".")


def ip_text(text: str) -> str:
    """The normalized text of an IPv4 or IPv6 address; raises Invalid."""
    try:
        return str(ipaddress.ip_address(text.strip()))
    except ValueError:
        raise Invalid(f"{text!r} is not an IP address") from None


def ip_address(node: Node) -> str:
    """Converter: an IPv4/IPv6 address, normalized."""
    return ip_text(string(node))


_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
# An IPv4 address in its normal form (as ipaddress writes it: no leading zeros).
_IPV4 = re.compile(rf"{_OCTET}(?:\.{_OCTET}){{3}}\Z")


def target(node: Node) -> tuple[str, EndpointKind]:
    """Converter: an IP address or an absolute hostname (ending in a dot), with its kind."""
    return target_text(string(node))


def target_text(text: str) -> tuple[str, EndpointKind]:
    """An IP address or an absolute hostname (ending in a dot), with its kind; raises Invalid."""
    text = text.strip()
    if _IPV4.match(text):  # the common case, without ipaddress's cost
        return text, EndpointKind.IPV4
    try:
        addr = ipaddress.ip_address(text)
    except ValueError:
        if not text.endswith("."):
            raise Invalid(f"{text!r} is neither an IP address nor a hostname ending in a dot") from None
        if text == ".":
            raise Invalid("the root '.' is not a hostname") from None
        return check_absolute(text), EndpointKind.HOSTNAME
    return str(addr), EndpointKind.IPV4 if addr.version == 4 else EndpointKind.IPV6


def parse_hostport(text: str, default_port: int | None, min_port: int = 1) -> ListenAddress:
    """'127.0.0.1:53', '[::1]:53' (or a bare address when `default_port` is set) -> ListenAddress."""
    text = text.strip()
    port_text: str | None
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep:
            raise Invalid(f"{text!r}: missing ']' after the IPv6 address")
        if rest and not rest.startswith(":"):
            raise Invalid(f"{text!r}: expected ':port' after ']'")
        port_text = rest[1:] if rest else None
    elif text.count(":") > 1:
        raise Invalid(f"{text!r}: write IPv6 addresses in brackets, like [::1]:53")
    else:
        host, sep, port_text_raw = text.partition(":")
        port_text = port_text_raw if sep else None
    addr = ip_text(host)
    if port_text is None:
        if default_port is None:
            raise Invalid(f"{text!r}: missing ':port' (write host:port, or [v6]:port)")
        return ListenAddress(addr, default_port)
    if not port_text.isdigit():
        raise Invalid(f"{text!r}: port {port_text!r} is not a number")
    port = int(port_text)
    if not min_port <= port <= 65535:
        raise Invalid(f"{text!r}: port must be between {min_port} and 65535")
    return ListenAddress(addr, port)


def hostport(default_port: int | None, min_port: int = 1) -> Callable[[Node], ListenAddress]:
    def conv(node: Node) -> ListenAddress:
        return parse_hostport(string(node), default_port, min_port)

    return conv
