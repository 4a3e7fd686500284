"""`services[].pools` and `services[].rules` (policy/pools.py): read and checked as octoDNS checks them.

Every reason is reported at its file:line:field, all at once: an unknown pool in a rule or a fallback,
a loop in the fallbacks ("loop in pool fallbacks: a -> b -> a"), a pool no rule or fallback reaches
("unused pool"), a rules list without a catch-all last or with one before the end, a pool with
neither sites nor endpoints, an address that is not an endpoint of the service, an `asn` condition
without `topology.geoip.asn_database`.
"""

from __future__ import annotations

import ipaddress
import re

from gslbd.config.fields import Invalid, MapReader, as_map, integer, join, nonempty_string, scalar, site_name
from gslbd.config.loader import Node, Scalar
from gslbd.config.names import ip_address
from gslbd.model.service import Endpoint, Pool, Rule
from gslbd.model.topology import IPNetwork

POOL_KEYS = ("sites", "endpoints", "fallback", "min_healthy")
RULE_KEYS = ("pool", "networks", "sites", "countries", "continents", "asn")
CONTINENTS = ("AF", "AN", "AS", "EU", "NA", "OC", "SA")
_POOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,63}\Z")
_COUNTRY = re.compile(r"[A-Z]{2}\Z")


def _pool_name(node: Node) -> str:
    value = nonempty_string(node)
    if not _POOL_NAME.match(value):
        raise Invalid(f"invalid pool name {value!r}; must match [A-Za-z0-9_-]+")
    return value


def _network(node: Node) -> IPNetwork:
    text = str(scalar(node, "a network")).strip()
    try:
        return ipaddress.ip_network(text)
    except ValueError as exc:
        raise Invalid(f"invalid network {text!r}: {exc}") from None


def _country(node: Node) -> str:
    value = nonempty_string(node)
    if not _COUNTRY.match(value):
        raise Invalid(f"invalid country {value!r}; must be an ISO 3166-1 alpha-2 code such as DE")
    return value


def _continent(node: Node) -> str:
    value = nonempty_string(node)
    if value not in CONTINENTS:
        raise Invalid(f"invalid continent {value!r}; valid: {', '.join(CONTINENTS)}")
    return value


def read_pools(
    r: MapReader, endpoints: tuple[Endpoint, ...], peer_sites: set[str], has_asn: bool
) -> tuple[tuple[Pool, ...], tuple[Rule, ...]]:
    """The service's pools and rules (both empty when neither is given); problems go to `r.rep`."""
    pools_r = r.sub("pools")
    if pools_r is None and not r.has("rules"):
        return (), ()
    if pools_r is None:
        r.error("rules", "rules need pools to send clients to")
        return (), ()
    if not r.has("rules"):
        r.error("pools", "pools need rules that send clients to them")
        return (), ()
    pools, lines = _pools(pools_r, endpoints, peer_sites)
    rules = _rules(r, set(pools), has_asn)
    _fallbacks(pools_r, pools, lines, {rule.pool for rule in rules})
    return tuple(pools.values()), rules


def _pools(
    pools_r: MapReader, endpoints: tuple[Endpoint, ...], peer_sites: set[str]
) -> tuple[dict[str, Pool], dict[str, tuple[int, int]]]:
    """The pools by name, and per pool the lines of its name and of its fallback."""
    addresses = {e.address for e in endpoints}
    sites = {e.site for e in endpoints} | peer_sites
    out: dict[str, Pool] = {}
    lines: dict[str, tuple[int, int]] = {}
    for entry in pools_r.node.entries:
        path = join(pools_r.path, entry.key)
        try:
            name = _pool_name(Scalar(entry.key_line, entry.key))
        except Invalid as exc:
            pools_r.rep.error(entry.key_line, path, exc.message)
            continue
        p = as_map(pools_r.rep, entry.value, path, entry.key_line)
        if p is None:
            continue
        p.check_keys(POOL_KEYS)
        pool_sites = [s for s, _, _ in p.list_of("sites", site_name) or []]
        pool_addresses = []
        for address, at, line in p.list_of("endpoints", ip_address) or []:
            if address not in addresses:
                p.rep.error(line, at, f"{address} is not an endpoint of this service")
            pool_addresses.append(address)
        for site, at, line in p.list_of("sites", site_name) or []:
            if site not in sites:
                p.rep.warn(line, at, f"no endpoint has site '{site}'")
        if not pool_sites and not pool_addresses:
            p.rep.error(p.line, path, "a pool needs sites or endpoints")
        fallback = p.opt("fallback", _pool_name)
        out[name] = Pool(
            name, tuple(pool_sites), tuple(pool_addresses), fallback, p.get("min_healthy", integer(1), 1)
        )
        lines[name] = (entry.key_line, p.line_of("fallback"))
    return out, lines


def _rules(r: MapReader, names: set[str], has_asn: bool) -> tuple[Rule, ...]:
    out: list[Rule] = []
    items = list(r.items("rules"))
    for i, (item, path) in enumerate(items):
        rr = as_map(r.rep, item, path)
        if rr is None:
            continue
        rr.check_keys(RULE_KEYS)
        pool = rr.req("pool", _pool_name)
        if pool is not None and pool not in names:
            known = ", ".join(sorted(names)) or "none"
            rr.error("pool", f"unknown pool '{pool}'; pools: {known}")
        asns = tuple(v for v, _, _ in rr.list_of("asn", integer(1, 4_294_967_295)) or [])
        if asns and not has_asn:
            rr.error("asn", "an asn condition needs topology.geoip.asn_database")
        rule = Rule(
            pool or "",
            tuple(v for v, _, _ in rr.list_of("networks", _network) or []),
            tuple(v for v, _, _ in rr.list_of("sites", site_name) or []),
            tuple(v for v, _, _ in rr.list_of("countries", _country) or []),
            tuple(v for v, _, _ in rr.list_of("continents", _continent) or []),
            asns,
        )
        last = i == len(items) - 1
        catch_all = not any(rr.has(key) for key in RULE_KEYS[1:])  # as written: an invalid condition is one
        if catch_all and not last:
            r.rep.error(
                rr.line, path, "a catch-all rule (only `pool`) must be last: the rules after it never match"
            )
        if last and not catch_all:
            r.rep.error(
                rr.line,
                path,
                "the last rule must be a catch-all (only `pool`), so that every client reaches a pool",
            )
        out.append(rule)
    if not items:
        r.error("rules", "rules must list at least the catch-all rule")
    return tuple(out)


def _fallbacks(
    pools_r: MapReader, pools: dict[str, Pool], lines: dict[str, tuple[int, int]], used: set[str]
) -> None:
    reached = set(used)
    for name, pool in pools.items():
        line = lines[name][1]
        path = join(join(pools_r.path, name), "fallback")
        if pool.fallback is None:
            continue
        if pool.fallback not in pools:
            pools_r.rep.error(
                line, path, f"unknown pool '{pool.fallback}'; pools: {', '.join(sorted(pools))}"
            )
            continue
        reached.add(pool.fallback)
        chain: list[str] = [name]
        step: str | None = pool.fallback
        while step is not None and step in pools:
            if step in chain:
                if step == name:  # report each loop once, at every pool in it
                    loop = " -> ".join([*chain, step])
                    pools_r.rep.error(line, path, f"loop in pool fallbacks: {loop}")
                break
            chain.append(step)
            step = pools[step].fallback
    for name in pools:
        if name not in reached:
            message = f"unused pool '{name}': no rule or fallback sends clients to it"
            pools_r.rep.error(lines[name][0], join(pools_r.path, name), message)
