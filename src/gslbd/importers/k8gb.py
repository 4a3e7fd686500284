"""k8gb Gslb objects (k8gb.io/v1beta1 and the legacy k8gb.absa.oss/v1beta1) to gslbd services.

Each file given is one cluster's objects (`kubectl get -o yaml` of that cluster); its Gslbs' `status.geoTag`
is the gslbd site of the addresses found there (k8gb_refs.py). The same host from several clusters is one
service with the endpoints of all of them. Strategies: roundRobin -> round_robin, failover -> failover
(failover_order: primaryGeoTag first, then the other sites as met), weightRoundRobin -> weighted (per-site
`weights`), geoip -> geo; dnsTtlSeconds -> ttl. An Ingress carrying the annotation `k8gb.io/strategy`
that no Gslb of its file refers to stands for the Gslb k8gb makes from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gslbd.config.fields import Invalid
from gslbd.importers.k8gb_refs import Index, host_name, resolve
from gslbd.importers.kube import GSLB_GROUPS, KubeObject, read_objects
from gslbd.importers.manifests import LocatedDict
from gslbd.importers.result import Imported, Unmapped
from gslbd.importers.values import site_name, ttl_seconds

POLICIES = {
    "roundRobin": "round_robin",
    "failover": "failover",
    "weightRoundRobin": "weighted",
    "geoip": "geo",
}
STRATEGY = "k8gb.io/strategy"
PRIMARY = "k8gb.io/primary-geotag"
TTL = "k8gb.io/dns-ttl-seconds"


@dataclass(slots=True)
class _Service:
    host: str
    origin: str  # the Gslb that first gave it (kind/namespace/name)
    policy: str
    ttl: int | None
    primary: str | None
    weights: dict[str, int] | None
    sites: list[str] = field(default_factory=list)
    endpoints: dict[str, str | None] = field(default_factory=dict)  # address -> site

    def entry(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.host, "policy": self.policy}
        if self.policy == "failover":
            order = [self.primary] if self.primary else []
            out["failover_order"] = order + [s for s in self.sites if s not in order]
        if self.policy == "weighted" and self.weights:
            out["weights"] = self.weights
        if self.ttl is not None:
            out["ttl"] = self.ttl
        endpoints = []
        for address, site in self.endpoints.items():
            endpoints.append({"address": address, "site": site} if site else {"address": address})
        out["endpoints"] = endpoints
        return out


def _integer(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _site(gslb: KubeObject, report: list[Unmapped]) -> str | None:
    tag = gslb.get("status", "geoTag")
    if not isinstance(tag, str) or not tag:
        report.append(Unmapped(gslb.ref, "status.geoTag", "absent: its addresses get no site (this site)"))
        return None
    site = site_name(tag)
    if site != tag:
        report.append(
            Unmapped(gslb.ref, "status.geoTag", f"{tag!r} is site {site!r} (sites match [a-z0-9-]+)")
        )
    return site or None


def _strategy(
    gslb: KubeObject, report: list[Unmapped]
) -> tuple[str, int | None, str | None, dict[str, int] | None]:
    """(policy, ttl, primary site, site weights) of a Gslb."""
    spec = gslb.get("spec", "strategy")
    spec = spec if isinstance(spec, dict) else {}
    notes = gslb.annotations
    kind = spec.get("type", notes.get(STRATEGY))
    policy = POLICIES.get(str(kind))
    if policy is None:
        known = ", ".join(POLICIES)
        report.append(
            Unmapped(gslb.ref, "spec.strategy.type", f"{kind!r} is not one of {known}: round_robin")
        )
        policy = "round_robin"
    ttl_value = spec.get("dnsTtlSeconds", notes.get(TTL))
    ttl = ttl_seconds(ttl_value)
    if ttl_value is not None and ttl is None:
        report.append(Unmapped(gslb.ref, "spec.strategy.dnsTtlSeconds", f"{ttl_value!r} is not a TTL"))
        ttl = None
    primary_text = spec.get("primaryGeoTag", notes.get(PRIMARY))
    primary = site_name(str(primary_text)) or None if primary_text else None
    if policy == "failover" and primary is None:
        report.append(
            Unmapped(gslb.ref, "spec.strategy.primaryGeoTag", "absent: failover_order is the sites as met")
        )
    elif policy != "failover" and primary is not None:
        report.append(Unmapped(gslb.ref, "spec.strategy.primaryGeoTag", f"only used by failover, not {kind}"))
    weights: dict[str, int] | None = None
    given = spec.get("weight")
    if isinstance(given, dict) and given:
        weights = {}
        for tag, value in given.items():
            weight = _integer(value)
            if weight is None or not 0 <= weight <= 1000:
                report.append(
                    Unmapped(gslb.ref, f"spec.strategy.weight.{tag}", f"{value!r} is not a weight 0-1000")
                )
            elif not site_name(str(tag)):
                report.append(Unmapped(gslb.ref, f"spec.strategy.weight.{tag}", "is no site name"))
            else:
                weights[site_name(str(tag))] = weight
        if policy != "weighted":
            report.append(
                Unmapped(gslb.ref, "spec.strategy.weight", f"only used by weightRoundRobin, not {kind}")
            )
    elif policy == "weighted":
        report.append(Unmapped(gslb.ref, "spec.strategy.weight", "absent: every site weighs the same"))
    if policy == "geo":
        report.append(
            Unmapped(
                gslb.ref,
                "spec.strategy.type",
                "geoip is geo: needs topology networks or a GeoIP database in "
                "the gslbd config (k8gb's own GeoIP database is not read)",
            )
        )
    if "splitBrainThresholdSeconds" in spec:
        report.append(
            Unmapped(
                gslb.ref, "spec.strategy.splitBrainThresholdSeconds", "deprecated in k8gb; no equivalent"
            )
        )
    health = gslb.get("spec", "serviceHealthPolicy")
    if health is not None and health != "Any":
        report.append(
            Unmapped(
                gslb.ref,
                "spec.serviceHealthPolicy",
                f"{health!r}: gslbd checks each address, not the pods of "
                "the Services behind a host; give the service a check",
            )
        )
    return policy, ttl, primary, weights


def _annotated_ingresses(objects: list[KubeObject]) -> list[KubeObject]:
    """A Gslb for every Ingress with the `k8gb.io/strategy` annotation that no Gslb refers to."""
    referred = {(o.namespace, o.get("spec", "resourceRef", "name")) for o in objects if o.kind == "Gslb"} | {
        (o.namespace, o.name) for o in objects if o.kind == "Gslb"
    }
    made = []
    for obj in objects:
        if obj.kind != "Ingress" or STRATEGY not in obj.annotations or (obj.namespace, obj.name) in referred:
            continue
        body = LocatedDict(
            metadata={"name": obj.name, "namespace": obj.namespace, "annotations": obj.annotations},
            spec={"resourceRef": {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "name": obj.name}},
        )
        body.line = obj.line
        made.append(
            KubeObject(obj.source, obj.line, GSLB_GROUPS[0], "v1beta1", "Gslb", obj.namespace, obj.name, body)
        )
    return made


def import_k8gb(files: list[tuple[str, str]]) -> Imported:
    """The services of the Gslb objects in `files` ((name, text) pairs); ImportFailure for bad input."""
    result = Imported()
    report = result.report
    services: dict[str, _Service] = {}
    for source, text in files:
        objects = read_objects(source, text)
        index = Index(objects)
        gslbs = [o for o in objects if o.kind == "Gslb"] + _annotated_ingresses(objects)
        if not gslbs:
            report.append(Unmapped(source, "", "no Gslb object (nor an Ingress annotated k8gb.io/strategy)"))
        for gslb in gslbs:
            target = resolve(gslb, index, report)
            policy, ttl, primary, weights = _strategy(gslb, report)
            site = _site(gslb, report)
            for given in target.hosts:
                try:
                    host = key = host_name(given, wildcard=True)
                except Invalid as exc:
                    report.append(Unmapped(gslb.ref, "host", f"{given!r} is not a service name: {exc}"))
                    continue
                service = services.get(key)
                if service is None:
                    service = services[key] = _Service(host, gslb.ref, policy, ttl, primary, weights)
                elif (policy, ttl, primary, weights) != (
                    service.policy,
                    service.ttl,
                    service.primary,
                    service.weights,
                ):
                    report.append(
                        Unmapped(
                            gslb.ref,
                            "spec.strategy",
                            f"differs from {service.origin} for {host}: that one is kept",
                        )
                    )
                if site is not None and site not in service.sites:
                    service.sites.append(site)
                for address in target.addresses:
                    if address in service.endpoints and service.endpoints[address] != site:
                        report.append(
                            Unmapped(
                                gslb.ref,
                                "status",
                                f"{address} of {host} is also at site {service.endpoints[address]}",
                            )
                        )
                        continue
                    service.endpoints[address] = site
            if target.hosts and not target.addresses:
                report.append(Unmapped(gslb.ref, "status", "no address found: its site adds no endpoint"))
    for key, service in services.items():
        if not service.endpoints:
            report.append(Unmapped(service.origin, "", f"{key}: no address in any input: not written"))
            continue
        if any(a.endswith(".") for a in service.endpoints) and not all(
            a.endswith(".") for a in service.endpoints
        ):
            for address in [a for a in service.endpoints if a.endswith(".")]:
                report.append(
                    Unmapped(
                        service.origin,
                        "status",
                        f"{key}: host name {address} left out: the "
                        "service has IP addresses (gslbd answers a host name as CNAME)",
                    )
                )
                del service.endpoints[address]
        result.services.append(service.entry())
    result.report[:] = dict.fromkeys(report)  # the same Gslb in several clusters: each item once
    return result
