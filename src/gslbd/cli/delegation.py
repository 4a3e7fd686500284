"""`gslbd delegation`: print the records the parent zone needs, or send them as an RFC 2136 update.

    gslbd delegation --config FILE [--zone ORIGIN ...] [--parent ZONE] [--ttl SECONDS]
    gslbd delegation --config FILE --apply --server HOST[:PORT] --tsig-key NAME:SECRET
                     [--tsig-algorithm hmac-sha256] [--timeout SECONDS]

Printing is pure (cli/delegation_records.py); --apply asks the parent's primary for the current NS set
of the delegated name (to remove address records of nameservers that left it), then sends one signed
update per zone over TCP and prints the response code. Exit 0 when every update was accepted, 1 when
one failed, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import socket
import sys
from dataclasses import dataclass

import dns.exception
import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import dns.tsig

from gslbd.cli.configs import load_or_report
from gslbd.cli.delegation_records import (
    Delegation,
    DelegationError,
    delegations,
    stale_names,
    update_message,
    zone_text,
)
from gslbd.cli.server_address import parse_server
from gslbd.config.tsig import TsigKeyError, parse_tsig_key, parse_tsig_key_file
from gslbd.model.tsig import ALGORITHMS, TsigKey

DEFAULT_TIMEOUT = 5.0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `delegation` to the gslbd command line; it sets `args.run(args) -> int`."""
    p = sub.add_parser(
        "delegation",
        help="print the parent zone's NS and glue records for the served zones, or apply them (RFC 2136)",
        description="Print, in zone-file format, the records the parent zone needs to delegate each "
        "served zone to gslbd: the NS set of every site (the zone's nameservers) and the addresses of "
        "the nameservers inside the parent zone. With --apply, send them to the parent's primary as a "
        "TSIG-signed dynamic update that replaces the NS set and that glue.",
    )
    p.add_argument("--config", "-c", required=True, metavar="FILE", help="the YAML configuration")
    p.add_argument(
        "--zone",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="only this served zone (repeatable; default every zone of the config)",
    )
    p.add_argument(
        "--parent", default=None, metavar="ZONE", help="the parent zone (default: the zone one label up)"
    )
    p.add_argument(
        "--ttl", type=int, default=None, metavar="SECONDS", help="TTL of the records (default the zone's ttl)"
    )
    p.add_argument("--apply", action="store_true", help="send the records as an RFC 2136 dynamic update")
    p.add_argument(
        "--server", default=None, metavar="HOST[:PORT]", help="the parent zone's primary (port 53)"
    )
    p.add_argument(
        "--tsig-key", default=None, metavar="NAME:SECRET", help="the TSIG key (also ALGORITHM:NAME:SECRET)"
    )
    p.add_argument(
        "--tsig-key-file",
        default=None,
        metavar="FILE",
        help="read the key from a file (BIND key statement as tsig-keygen writes it, or NAME:SECRET)",
    )
    p.add_argument(
        "--tsig-algorithm",
        default=None,
        choices=ALGORITHMS,
        metavar="ALGORITHM",
        help="HMAC of the key (default hmac-sha256; one of " + ", ".join(ALGORITHMS) + ")",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"per exchange with the server (default {DEFAULT_TIMEOUT:g})",
    )
    p.set_defaults(run=run_delegation)


def _fail(message: str) -> int:
    print(f"gslbd delegation: {message}", file=sys.stderr)
    return 2


def run_delegation(args: argparse.Namespace) -> int:
    """The `delegation` command: print the records, or apply them with --apply."""
    if not args.apply and (args.server or args.tsig_key or args.tsig_key_file):
        return _fail("--server and --tsig-key go with --apply")
    key: TsigKey | None = None
    server: tuple[str, int] | None = None
    if args.apply:
        if not args.server:
            return _fail("--apply needs --server HOST[:PORT] (the parent zone's primary)")
        if bool(args.tsig_key) == bool(args.tsig_key_file):
            return _fail("--apply needs exactly one of --tsig-key NAME:SECRET and --tsig-key-file FILE")
        try:
            key = _read_key(args.tsig_key, args.tsig_key_file, args.tsig_algorithm)
            server = resolve_server(args.server)
        except (DelegationError, TsigKeyError, OSError) as e:
            return _fail(str(e))
    config, _ = load_or_report(args.config)
    if config is None:
        return 1
    try:
        items = delegations(config, zones=args.zone, parent=args.parent, ttl=args.ttl)
    except DelegationError as e:
        return _fail(str(e))
    if key is None or server is None:
        print(zone_text(items, args.config), end="")
        return 0
    failed = 0
    for d in items:
        result = apply(d, server, key, timeout=args.timeout)
        print(result.line())
        failed += not result.ok
    return 1 if failed else 0


def _read_key(text: str | None, path: str | None, algorithm: str | None) -> TsigKey:
    if text is not None or path is None:
        return parse_tsig_key(text or "", algorithm)
    try:
        with open(path, encoding="utf-8") as f:
            content = f.read()
    except OSError as e:
        raise DelegationError(f"cannot read the key file: {e}") from None
    return parse_tsig_key_file(content, algorithm)


def resolve_server(text: str) -> tuple[str, int]:
    """`HOST`, `HOST:PORT`, `[V6]:PORT` or a bare IPv6 address -> (address, port); default port 53."""
    try:
        host, port = parse_server(text)
    except ValueError as e:
        raise DelegationError(f"--server {e}") from None
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise DelegationError(f"--server {text.strip()!r}: cannot resolve {host!r}: {e.strerror}") from None
    return str(found[0][4][0]), port


@dataclass(frozen=True, slots=True)
class Result:
    """What the parent's primary said to one update."""

    delegation: Delegation
    server: tuple[str, int]
    rcode: str  # "NOERROR", "NOTAUTH", ... or "" when no answer came
    detail: str = ""
    removed: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.rcode == "NOERROR"

    def line(self) -> str:
        d = self.delegation
        host, port = self.server
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        head = f"update of {d.parent} at {where} for {d.zone}: {self.rcode or 'FAILED'}"
        if not self.ok:
            return head + (f" ({self.detail})" if self.detail else "")
        parts = [f"NS set of {len(d.nameservers)}", f"{len(d.glue)} glue records"]
        if self.removed:
            parts.append("removed the addresses of " + ", ".join(self.removed))
        return head + " (" + "; ".join(parts) + ")"


def current_nameservers(zone: str, server: tuple[str, int], timeout: float) -> tuple[str, ...]:
    """The NS set the server holds for the delegated name now (from a referral or an answer)."""
    query = dns.message.make_query(zone, dns.rdatatype.NS)
    query.flags &= ~dns.flags.RD
    reply = dns.query.tcp(query, server[0], port=server[1], timeout=timeout)
    found: list[str] = []
    for rrset in [*reply.answer, *reply.authority]:
        if rrset.rdtype == dns.rdatatype.NS and rrset.name.to_text().lower() == zone:
            found.extend(r.target.to_text().lower() for r in rrset)
    return tuple(found)


def apply(d: Delegation, server: tuple[str, int], key: TsigKey, *, timeout: float) -> Result:
    """Send the delegation as one signed RFC 2136 update; never raises for network or TSIG trouble."""
    try:
        current = current_nameservers(d.zone, server, timeout)
    except (dns.exception.DNSException, OSError):
        current = ()  # the update below reports what is wrong with the server
    removed = stale_names(d, current)
    update = update_message(d, key, current_ns=current)
    try:
        reply = dns.query.tcp(update, server[0], port=server[1], timeout=timeout)
    except dns.tsig.PeerBadKey:
        return Result(d, server, "NOTAUTH", f"BADKEY: the server does not know the key {key.name}")
    except dns.tsig.PeerBadSignature:
        return Result(d, server, "NOTAUTH", f"BADSIG: wrong secret or algorithm for the key {key.name}")
    except dns.tsig.PeerBadTime:
        return Result(d, server, "NOTAUTH", "BADTIME: the clocks of this host and the server differ")
    except dns.tsig.PeerError as e:
        return Result(d, server, "NOTAUTH", f"TSIG error: {e}")
    except dns.exception.Timeout:
        return Result(d, server, "", f"no answer within {timeout:g}s")
    except (dns.exception.DNSException, OSError) as e:
        return Result(d, server, "", f"{type(e).__name__}: {e}")
    rcode = dns.rcode.to_text(reply.rcode())
    detail = {
        "REFUSED": "the server does not allow this key to update the zone",
        "NOTAUTH": f"the server is not authoritative for {d.parent} or rejected the key",
        "NOTZONE": f"a record is outside {d.parent}",
    }.get(rcode, "")
    return Result(d, server, rcode, detail, removed if rcode == "NOERROR" else ())
