"""octoDNS dynamic A/AAAA/CNAME records (a YamlProvider zone file) to gslbd services.

Every pool is a gslbd site of the same name; its values are that site's endpoints (`weight` kept,
`status` up/down/obey as `admin`). The policy follows the rules: rules with `geos` -> geo, each pool's
endpoints placed in the region named by its geo (`NA-US-CA` -> `na-us-ca`, `EU` -> `eu`; geos.py); a single
catch-all rule whose pool has a `fallback` chain -> failover in the order of the chain; else weighted when
the values' weights differ, round_robin when not. The record's own values (what octoDNS answers when
every pool is down) become `all_down: fallback`. A and AAAA records of one name make one service.
"""

from __future__ import annotations

from typing import Any

from gslbd.config.fields import Invalid
from gslbd.config.names import check_absolute, target_text
from gslbd.importers.geos import continent_centre, region_of
from gslbd.importers.manifests import line_of, load_documents
from gslbd.importers.result import Imported, ImportFailure, Unmapped
from gslbd.importers.values import site_name, ttl_seconds
from gslbd.types import EndpointKind

TYPES = ("A", "AAAA", "CNAME")
STATUSES = {"up": "up", "down": "down", "obey": "obey"}


_KINDS = {"A": EndpointKind.IPV4, "AAAA": EndpointKind.IPV6, "CNAME": EndpointKind.HOSTNAME}


def _value(rtype: str, text: object) -> str | None:
    """A value of a record of `rtype` as gslbd writes it (by gslbd's own rules), None when it is not one."""
    if not isinstance(text, str):
        return None
    try:
        value, kind = target_text(text)
    except Invalid:
        return None
    return value if kind is _KINDS[rtype] else None


def fallback_values(values: list[str], record: _Record) -> list[str]:
    """A gslbd `fallback`: addresses without repeats, or exactly one hostname (a CNAME); the record's
    static values of an A/AAAA and a CNAME record of one name cannot both be kept (noted)."""
    unique = list(dict.fromkeys(values))
    hosts = [v for v in unique if target_text(v)[1] is EndpointKind.HOSTNAME]
    if not hosts or unique == hosts[:1]:
        return unique
    kept = [v for v in unique if v not in hosts] or hosts[:1]
    record.note("values", f"a fallback is addresses or one hostname: {', '.join(kept)} kept")
    return kept


def _values(record: dict[str, Any]) -> list[object]:
    if isinstance(record.get("values"), list):
        return list(record["values"])
    return [record["value"]] if "value" in record else []


class _Record:
    """One dynamic record being mapped, and where its report items go."""

    def __init__(self, name: str, rtype: str, record: dict[str, Any], report: list[Unmapped]) -> None:
        self.name, self.rtype, self.record, self.report = name, rtype, record, report
        self.ref = f"record/{name or '@'}/{rtype}"

    def note(self, where: str, reason: str) -> None:
        self.report.append(Unmapped(self.ref, where, reason))

    def pools(self) -> dict[str, dict[str, Any]]:
        pools = self.record["dynamic"].get("pools")
        return {str(k): v for k, v in pools.items() if isinstance(v, dict)} if isinstance(pools, dict) else {}

    def chain(self, pools: dict[str, dict[str, Any]], start: str) -> list[str]:
        order = [start]
        while (nxt := pools.get(order[-1], {}).get("fallback")) is not None:
            if nxt in order or nxt not in pools:
                self.note(
                    f"dynamic.pools.{order[-1]}.fallback", f"{nxt!r} loops or names no pool: the chain stops"
                )
                break
            order.append(str(nxt))
        return order

    def endpoints(self, pool: str, values: object, region: str | None) -> list[dict[str, Any]]:
        found = []
        for i, given in enumerate(values if isinstance(values, list) else []):
            where = f"dynamic.pools.{pool}.values[{i}]"
            item = given if isinstance(given, dict) else {"value": given}
            address = _value(self.rtype, item.get("value"))
            if address is None:
                self.note(f"{where}.value", f"{item.get('value')!r} is not a {self.rtype} value")
                continue
            endpoint: dict[str, Any] = {"address": address, "site": site_name(pool)}
            if region:
                endpoint["locality"] = {"region": region}
            weight = item.get("weight", 1)
            if isinstance(weight, int) and not isinstance(weight, bool) and 0 <= weight <= 1000:
                if weight != 1:
                    endpoint["weight"] = weight
            else:
                self.note(f"{where}.weight", f"{weight!r} is not a weight 0-1000")
            status = STATUSES.get(str(item.get("status", "obey")))
            if status is None:
                self.note(f"{where}.status", f"{item.get('status')!r} is not up, down or obey: obey")
            elif status != "obey":
                endpoint["admin"] = status
            found.append(endpoint)
        return found

    def service(self, zone: str) -> dict[str, Any] | None:
        pools = self.pools()
        rules = self.record["dynamic"].get("rules")
        rules = [r for r in rules if isinstance(r, dict)] if isinstance(rules, list) else []
        if not pools or not rules:
            self.note("dynamic", "needs pools and rules: not imported")
            return None
        for i, rule in enumerate(rules):
            if rule.get("pool") not in pools:
                self.note(f"dynamic.rules[{i}].pool", f"{rule.get('pool')!r} names no pool: not imported")
                return None
            if "subnets" in rule:
                self.note(
                    f"dynamic.rules[{i}].subnets",
                    "not mapped: write them as topology networks of the "
                    f"site {site_name(str(rule['pool']))!r}",
                )
        try:
            name = check_absolute(f"{self.name}.{zone}".lower(), wildcard=True)
        except Invalid as exc:
            self.note("", f"not a service name: {exc}: not imported")
            return None
        out: dict[str, Any] = {"name": name}
        geo_rules = [(i, r) for i, r in enumerate(rules) if r.get("geos")]
        endpoints: list[dict[str, Any]] = []
        if geo_rules:
            out["policy"] = "geo"
            regions: dict[str, str] = {}
            for i, rule in geo_rules:
                given = rule["geos"] if isinstance(rule["geos"], list) else [rule["geos"]]
                geos = [str(g) for g in given]
                pool = str(rule["pool"])
                if pool in regions or len(geos) != 1:
                    kept = regions.get(pool) or (region_of(geos[0]) if geos else None)
                    self.note(
                        f"dynamic.rules[{i}].geos",
                        f"{geos}: an endpoint has one region; pool {pool!r} keeps {kept!r}",
                    )
                if geos and pool not in regions:
                    regions[pool] = region_of(geos[0])
                    centre = continent_centre(geos[0])
                    if centre is not None:
                        self.note(
                            f"dynamic.rules[{i}].geos",
                            f"for GeoIP clients give the site coordinates, e.g. "
                            f"sites.{site_name(pool)}.coordinates: [{centre[0]}, {centre[1]}]",
                        )
            for i, rule in enumerate(rules):
                if not rule.get("geos"):
                    self.note(
                        f"dynamic.rules[{i}]",
                        "a catch-all rule: geo answers an unplaced client with every "
                        "endpoint, not only this pool",
                    )
            for pool, spec in pools.items():
                if "fallback" in spec:
                    self.note(
                        f"dynamic.pools.{pool}.fallback",
                        "not kept: geo falls to the nearest site with healthy endpoints",
                    )
            used = dict.fromkeys([str(r["pool"]) for r in rules])
            for pool in used:
                endpoints += self.endpoints(pool, pools[pool].get("values"), regions.get(pool))
        else:
            for i in range(1, len(rules)):
                self.note(
                    f"dynamic.rules[{i}]", "never used: the first rule without geos matches every client"
                )
            order = self.chain(pools, str(rules[0]["pool"]))
            for pool in order:
                endpoints += self.endpoints(pool, pools[pool].get("values"), None)
            if len(order) > 1:
                out["policy"] = "failover"
                out["failover_order"] = [site_name(p) for p in order]
            else:
                weights = {e.get("weight", 1) for e in endpoints}
                out["policy"] = "weighted" if len(weights) > 1 else "round_robin"
        if out["policy"] != "weighted" and any("weight" in e for e in endpoints):
            self.note("dynamic.pools", f"value weights are kept but {out['policy']} does not use them")
        seen: set[str] = set()
        out["endpoints"] = []
        for endpoint in endpoints:
            if endpoint["address"] in seen:
                self.note("dynamic.pools", f"{endpoint['address']} is in two pools: the first is kept")
                continue
            seen.add(endpoint["address"])
            out["endpoints"].append(endpoint)
        if "ttl" in self.record:
            ttl = ttl_seconds(self.record["ttl"])
            if ttl is not None:
                out["ttl"] = ttl
            else:
                self.note("ttl", f"{self.record['ttl']!r} is not a TTL: the zone's ttl")
        static = [v for v in (_value(self.rtype, x) for x in _values(self.record)) if v is not None]
        static = fallback_values(static, self)
        if static:
            out["all_down"] = "fallback"
            out["fallback"] = static
        if isinstance(self.record.get("octodns"), dict) and "healthcheck" in self.record["octodns"]:
            self.note("octodns.healthcheck", "not mapped: give the service a gslbd check")
        return out


def _merge(into: dict[str, Any], other: dict[str, Any], record: _Record) -> None:
    """Adds an AAAA (or A) record's endpoints to the service of the same name made from the other."""
    for key in ("policy", "failover_order"):
        if into.get(key) != other.get(key):
            record.note(
                "dynamic", f"{key} {other.get(key)!r} differs from the other record's: that one is kept"
            )
    seen = {e["address"] for e in into["endpoints"]}
    into["endpoints"] += [e for e in other["endpoints"] if e["address"] not in seen]
    if "fallback" in other:
        into["fallback"] = fallback_values(into.get("fallback", []) + other["fallback"], record)
        into["all_down"] = "fallback"


def import_octodns(source: str, text: str, zone: str) -> Imported:
    """The services of the dynamic records of an octoDNS zone file; `zone` is its origin."""
    zone = zone.rstrip(".").lower() + "."
    documents = load_documents(source, text)
    if len(documents) != 1 or not isinstance(documents[0][1], dict):
        line = documents[1][0] if len(documents) > 1 else (documents[0][0] if documents else None)
        raise ImportFailure(source, line, "an octoDNS zone file is one mapping of record names")
    result = Imported()
    by_name: dict[str, dict[str, Any]] = {}
    zone_file = documents[0][1]
    for name, value in zone_file.items():
        records = value if isinstance(value, list) else [value]
        for record in records:
            if not isinstance(record, dict) or not isinstance(record.get("type"), str):
                line = line_of(record) or line_of(value) or line_of(zone_file)
                raise ImportFailure(source, line, f"record {name!r}: needs a type")
            mapped = _Record(str(name), record["type"], record, result.report)
            if record["type"] not in TYPES or not isinstance(record.get("dynamic"), dict):
                mapped.note(
                    "dynamic" if record["type"] in TYPES else "type",
                    "only dynamic A, AAAA and CNAME records are imported: not imported",
                )
                continue
            if not name:
                mapped.note("", "the zone apex cannot be a gslbd service: not imported")
                continue
            service = mapped.service(zone)
            if service is None:
                continue
            if service["name"] in by_name:
                _merge(by_name[service["name"]], service, mapped)
            else:
                by_name[service["name"]] = service
    result.services = [s for s in by_name.values() if s["endpoints"]]
    return result
