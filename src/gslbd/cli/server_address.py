"""A DNS server named on the command line: `HOST`, `HOST:PORT`, `[V6]:PORT` or a bare IPv6 address.

One parser for every option that names a server (`doctor --parent-server`, `delegation --server`). The
configuration file has its own, stricter form (config/names.py: IP addresses only, IPv6 in brackets).
"""

from __future__ import annotations

Server = tuple[str, int]
DNS_PORT = 53


def server_text(server: Server) -> str:
    host, port = server
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def parse_server(text: str, default_port: int = DNS_PORT) -> Server:
    """`HOST`, `HOST:PORT`, `[V6]:PORT` or a bare IPv6 address; ValueError with the reason."""
    text = text.strip()
    host, port_text = text, ""
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise ValueError(f"{text!r} is not HOST[:PORT]")
        port_text = rest[1:]
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    if not host:
        raise ValueError(f"{text!r} has no host")
    if not port_text:
        return host, default_port
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"{text!r}: the port must be a number from 1 to 65535")
    return host, int(port_text)
