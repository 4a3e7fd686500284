"""`gslbd doctor --config FILE [--parent-server HOST[:PORT]]`: the troubleshooting checklist as a command.

Kubernetes Federation's troubleshooting guide ends with "clients are unable to resolve": the registrar
(the parent zone) must point at the configured nameservers. `doctor` checks that chain from the top, for
every zone of the config, and prints one PASS/FAIL line per check with a hint under every failure:

1. the parent zone delegates the zone to exactly the configured nameservers (NS set), the parent's
   addresses (glue) of the nameservers inside it are the configured ones, and its DS records fit the
   zone: none for an unsigned zone, one matching a served key for a signed zone (docs/dnssec.md);
2. every configured nameserver answers the zone's SOA with AA (and, for a signed zone, signatures made by
   its keys that do not expire soon);
3. this instance answers every service name and every locality name (A or AAAA, a CNAME chain counts);
4. every peer site's nameserver answers the zone's SOA with AA and publishes a fresh heartbeat.

The parent is asked at --parent-server; without it, its nameservers are found through this machine's
resolver. Nameserver addresses carry no port in the config: an address that is one of this instance's
`dns.listen` addresses or a peer's nameserver is asked on that port, any other on 53. Exit status 1 when
any check fails, 2 for a usage error, else 0.
"""

from __future__ import annotations

import argparse
import socket
import sys
import time
from collections.abc import Callable, Iterator

import dns.exception
import dns.flags
import dns.message
import dns.query
import dns.rdatatype
import dns.resolver

from gslbd.cli.configs import load_or_report
from gslbd.cli.delegation_records import in_zone
from gslbd.cli.doctor_checks import (
    Reply,
    Result,
    addresses_in,
    judge_delegation,
    judge_ds,
    judge_glue,
    judge_name,
    judge_peer,
    judge_peer_key,
    judge_signatures,
    judge_soa,
    local_server,
    nameserver_ports,
    parent_of,
)
from gslbd.cli.server_address import Server, parse_server, server_text
from gslbd.config.locality import levels, site_localities
from gslbd.model.config import Config
from gslbd.model.tsig import TsigKey
from gslbd.model.zone import Zone
from gslbd.wire.tsig import keyring

DEFAULT_TIMEOUT = 2.0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `doctor` to the gslbd command line (sets `args.run`)."""
    doctor = sub.add_parser(
        "doctor",
        help="check delegation, nameservers, service and locality names, and peers of a config",
    )
    doctor.add_argument("--config", "-c", required=True, metavar="FILE", help="the YAML configuration")
    doctor.add_argument(
        "--parent-server",
        default=None,
        metavar="HOST[:PORT]",
        help="a nameserver of the parent zone (default: found through this machine's resolver)",
    )
    doctor.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"per question (default {DEFAULT_TIMEOUT:g})",
    )
    doctor.set_defaults(run=lambda a: run_doctor(a.config, a.parent_server, a.timeout))


def run_doctor(path: str, parent_server: str | None, timeout: float) -> int:
    """Run every check of the config at `path` and print the results; the exit status."""
    parent: Server | None = None
    if parent_server is not None:
        try:
            parent = _resolved(parse_server(parent_server))
        except (ValueError, OSError) as exc:
            print(f"gslbd doctor: --parent-server: {exc}", file=sys.stderr)
            return 2
    config, _ = load_or_report(path)
    if config is None:
        return 1
    results: list[Result] = []
    for title, checks in _sections(config, parent, timeout):
        print(title)
        for result in checks:
            results.append(result)
            for line in result.lines():
                print(line)
    failed = sum(not r.ok for r in results)
    print(f"{len(results)} checks: {len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


def _sections(
    config: Config, parent: Server | None, timeout: float
) -> Iterator[tuple[str, Iterator[Result]]]:
    for zone in config.zones:
        yield f"zone {zone.origin}", _zone_checks(config, zone, parent, timeout)
    server = local_server(config)
    yield f"names (asked at {server_text(server)})", _name_checks(config, server, timeout)
    if config.peers is not None and config.peers.sites:
        yield "peers", _peer_checks(config, timeout)


def ask(
    server: Server, name: str, rtype: str, timeout: float, key: TsigKey | None = None, dnssec: bool = False
) -> Reply:
    """One question without recursion, by UDP (TCP when truncated): the reply, or why there is none.
    With `key` the question is signed and the reply must verify (else: why not); `dnssec` sets DO."""
    query = dns.message.make_query(name, dns.rdatatype.from_text(rtype), want_dnssec=dnssec)
    query.flags &= ~dns.flags.RD
    if key is not None:
        query.use_tsig(keyring(key), keyname=key.name, algorithm=key.algorithm)
    host, port = server
    try:
        reply = dns.query.udp(query, host, port=port, timeout=timeout, ignore_trailing=True)
        if reply.flags & dns.flags.TC:
            reply = dns.query.tcp(query, host, port=port, timeout=timeout)
    except dns.exception.Timeout:
        return f"timeout after {timeout:g} s"
    except OSError as exc:
        return exc.strerror or str(exc)
    except dns.exception.DNSException as exc:
        return f"bad reply: {exc}"
    return reply


def _resolved(server: Server) -> Server:
    """The server with its host as an address (a name is looked up by this machine's resolver)."""
    host, port = server
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
    return str(infos[0][4][0]), port


def _parent_servers(
    zone: Zone,
    parent: Server | None,
    timeout: float,
    system_resolver: Callable[[], dns.resolver.Resolver] = dns.resolver.Resolver,
) -> tuple[str, list[Server]] | Result:
    """The parent zone and the servers to ask it at: --parent-server, else the parent's nameservers
    (found through `system_resolver()`, this machine's /etc/resolv.conf)."""
    if parent is not None:
        return parent_of(zone.origin), [parent]
    resolver: dns.resolver.Resolver | None = None
    try:
        resolver = system_resolver()
        resolver.lifetime = timeout * 2
        found = dns.resolver.zone_for_name(parent_of(zone.origin), resolver=resolver).to_text().lower()
        names = [rd.to_text() for rd in resolver.resolve(found, "NS")]
        servers = [_resolved((name, 53)) for name in names]
    except (dns.exception.DNSException, OSError) as exc:
        hint = "pass --parent-server HOST[:PORT] (a nameserver of the parent zone)"
        why = (
            f"the nameservers of the parent zone of {zone.origin} were not found: "
            f"{_lookup_failure(exc, resolver)}"
        )
        return Result(False, f"delegation of {zone.origin}: {why}", hint)
    return found, servers


def _lookup_failure(exc: BaseException, resolver: dns.resolver.Resolver | None) -> str:
    """Why this machine's resolver could not say, in words (dnspython's own text for some of these is
    "There is no SOA RR at the DNS root name. This should never happen!")."""
    used = ", ".join(str(n) for n in resolver.nameservers) if resolver is not None else ""
    mine = f"this machine's resolver ({used})" if used else "this machine's resolver"
    if isinstance(exc, dns.resolver.NoResolverConfiguration):
        return "this machine has no resolver configured (no nameserver in /etc/resolv.conf)"
    if isinstance(exc, dns.resolver.NoRootSOA):
        return (
            f"{mine} answered no SOA record for any name, not even the root's: it is not reachable, or "
            "not a resolver that reaches the internet"
        )
    if isinstance(exc, dns.exception.Timeout):
        return f"{mine} did not answer in time"
    if isinstance(exc, dns.resolver.NoNameservers):
        return f"{mine} failed every query (SERVFAIL or REFUSED)"
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return f"{mine}: {exc}"


def _zone_checks(config: Config, zone: Zone, parent: Server | None, timeout: float) -> Iterator[Result]:
    found = _parent_servers(zone, parent, timeout)
    if isinstance(found, Result):
        yield found
    else:
        origin, servers = found
        server = servers[0]
        reply: Reply = "no server"
        for server in servers:  # the first that answers
            reply = ask(server, zone.origin, "NS", timeout)
            if not isinstance(reply, str):
                break
        result, listed = judge_delegation(zone, origin, server, reply)
        yield result
        if listed and not isinstance(reply, str):
            yield judge_glue(zone, origin, listed, _glue(server, reply, listed, origin, timeout))
            yield judge_ds(zone, origin, ask(server, zone.origin, "DS", timeout))
    ports = nameserver_ports(config)
    for ns in zone.nameservers:
        for target in _nameserver_servers(ns.name, ns.addresses, ports):
            if isinstance(target, Result):
                yield target
                continue
            yield judge_soa(zone, ns.name, target, ask(target, zone.origin, "SOA", timeout))
            if zone.dnssec is not None:
                for rtype in ("SOA", "DNSKEY"):
                    signed = ask(target, zone.origin, rtype, timeout, dnssec=True)
                    yield judge_signatures(zone, target, signed, time.time())


def _glue(
    server: Server, referral: dns.message.Message, listed: list[str], parent: str, timeout: float
) -> dict[str, set[str]]:
    """The parent's addresses of the listed nameservers inside it: from the referral's additional
    section, else by asking the parent for them."""
    out: dict[str, set[str]] = {}
    for name in listed:
        if not in_zone(name, parent):
            continue
        found = addresses_in(referral, name)
        if not found:
            for rtype in ("A", "AAAA"):
                reply = ask(server, name, rtype, timeout)
                if not isinstance(reply, str):
                    found |= addresses_in(reply, name)
        out[name] = found
    return out


def _nameserver_servers(
    name: str, addresses: tuple[str, ...], ports: dict[str, int]
) -> Iterator[Server | Result]:
    if not addresses:
        try:
            infos = socket.getaddrinfo(name.rstrip("."), 53, type=socket.SOCK_DGRAM)
        except OSError as exc:
            hint = "give the nameserver an address in zones[].nameservers, or publish its A/AAAA records"
            yield Result(False, f"nameserver {name}: no address in the config and none found ({exc})", hint)
            return
        addresses = tuple(dict.fromkeys(str(i[4][0]) for i in infos))
    for address in addresses:
        yield address, ports.get(address, 53)


def _name_checks(config: Config, server: Server, timeout: float) -> Iterator[Result]:
    if not config.services:
        return
    first = config.services[0].zone
    probe = ask(server, first, "SOA", timeout)
    if isinstance(probe, str):
        hint = "start gslbd with this config (gslbd serve --config FILE) or check dns.listen"
        yield Result(
            False, f"this gslbd at {server_text(server)} does not answer ({probe}): names not checked", hint
        )
        return
    sites = site_localities(config)
    for service in config.services:
        yield _name("service", service.name, server, timeout)
        if service.locality_names:
            for level in levels(service, [e.locality for e in service.endpoints] + list(sites)):
                yield _name("locality name", level.name, server, timeout, level.where())


def _name(kind: str, name: str, server: Server, timeout: float, note: str = "") -> Result:
    replies = {rtype: ask(server, name, rtype, timeout) for rtype in ("A", "AAAA")}
    return judge_name(kind, name, server, replies, note)


def _peer_checks(config: Config, timeout: float) -> Iterator[Result]:
    peers = config.peers
    if peers is None or not config.zones:
        return
    zone = (config.services[0].zone if config.services else None) or config.zones[0].origin
    for site in peers.sites:
        if not site.nameservers:
            hint = (
                f"give peers.sites[{site.name}].nameservers, or use discover: ns with NS names "
                "gslb-ns-<site>-..."
            )
            yield Result(False, f"peer {site.name}: no nameservers known", hint)
            continue
        for ns in site.nameservers:
            try:
                server = _resolved((ns.host, ns.port))
            except OSError as exc:
                yield Result(
                    False, f"peer {site.name}: {ns} does not resolve ({exc})", "check the peer's address"
                )
                continue
            soa = ask(server, zone, "SOA", timeout)
            beat = (
                ask(server, f"heartbeat-{site.name}.{zone}", "TXT", timeout)
                if not isinstance(soa, str)
                else soa
            )
            yield judge_peer(site.name, server, zone, soa, beat, time.time(), peers.stale_after)
            if peers.tsig is not None and not isinstance(soa, str):
                signed = ask(server, f"heartbeat-{site.name}.{zone}", "TXT", timeout, peers.tsig)
                yield judge_peer_key(site.name, server, peers.tsig.name, signed)
