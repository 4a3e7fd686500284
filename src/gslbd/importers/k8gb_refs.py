"""What a k8gb Gslb stands for: the host names it serves and the addresses its cluster exposes them on,
found through its `resourceRef` (or the embedded `spec.ingress`) among the objects of the same file.

Addresses come, first match wins, from the Gslb annotations `k8gb.io/exposed-ip-addresses` and
`k8gb.io/exposed-hostnames`, the referenced object's status (Ingress and LoadBalancer Service:
`status.loadBalancer.ingress[]`; Gateway API routes: `status.addresses` of their parent Gateways; Istio
VirtualService: the LoadBalancer Service its Istio Gateway selects), else the Gslb's own
`status.loadBalancer.exposedIps`.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from gslbd.config.fields import Invalid
from gslbd.config.names import check_absolute
from gslbd.importers.kube import GATEWAY_GROUP, ISTIO_GROUP, ROUTE_KINDS, KubeObject, split_api_version
from gslbd.importers.result import ImportFailure, Unmapped
from gslbd.importers.selectors import Selector, selector

HOSTNAME = "k8gb.io/hostname"
EXPOSED_IPS = "k8gb.io/exposed-ip-addresses"
EXPOSED_HOSTNAMES = "k8gb.io/exposed-hostnames"
REF_KINDS = ("Ingress", "Service", "VirtualService", *ROUTE_KINDS)


@dataclass(slots=True)
class Target:
    hosts: list[str] = field(default_factory=list)  # as written (no trailing dot)
    addresses: list[str] = field(default_factory=list)  # IP addresses, and hostnames ending in a dot


class Index:
    """The objects of one file (one cluster), found by kind, namespace and name or by labels."""

    def __init__(self, objects: list[KubeObject]) -> None:
        self.objects = objects

    def named(self, group: str, kind: str, namespace: str, name: str) -> KubeObject | None:
        for obj in self.objects:
            if (obj.group, obj.kind, obj.namespace, obj.name) == (group, kind, namespace, name):
                return obj
        return None

    def selected(
        self, group: str | None, kind: str, namespace: str | None, chosen: Selector | None = None
    ) -> list[KubeObject]:
        """The objects of `kind` (in `group` and `namespace` unless None) whose labels `chosen` selects."""
        return [
            obj
            for obj in self.objects
            if obj.kind == kind
            and (group is None or obj.group == group)
            and (namespace is None or obj.namespace == namespace)
            and (chosen is None or chosen.matches(obj.labels))
        ]


def _address(
    text: object, where: str, obj: KubeObject, report: list[Unmapped], ip_only: bool = False
) -> str | None:
    if not isinstance(text, str) or not text.strip():
        report.append(Unmapped(obj.ref, where, f"{text!r} is not an address"))
        return None
    text = text.strip()
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        if ip_only:
            report.append(Unmapped(obj.ref, where, f"{text!r} is not an IP address"))
            return None
    try:
        return host_name(text)
    except Invalid as exc:
        report.append(Unmapped(obj.ref, where, f"neither an IP address nor a host name: {exc}"))
        return None


def host_name(text: str, wildcard: bool = False) -> str:
    """A host name as gslbd writes it (absolute, lower case), validated by gslbd's own rules."""
    return check_absolute(text.strip().rstrip(".").lower() + ".", wildcard=wildcard)


def _load_balancer(obj: KubeObject, report: list[Unmapped]) -> list[str]:
    """The addresses of `status.loadBalancer.ingress[]` (ip, else hostname)."""
    found: list[str] = []
    entries = obj.get("status", "loadBalancer", "ingress")
    for i, entry in enumerate(entries if isinstance(entries, list) else []):
        if not isinstance(entry, dict):
            report.append(
                Unmapped(obj.ref, f"status.loadBalancer.ingress[{i}]", f"{entry!r} is not a mapping")
            )
            continue
        key = "ip" if entry.get("ip") else "hostname"
        where = f"status.loadBalancer.ingress[{i}].{key}"
        address = _address(entry.get(key), where, obj, report, ip_only=key == "ip")
        if address is not None:
            found.append(address)
    if not found:
        report.append(Unmapped(obj.ref, "status.loadBalancer.ingress", "no address in the status"))
    return found


def _gateway_addresses(route: KubeObject, index: Index, report: list[Unmapped]) -> list[str]:
    parents = route.get("status", "parents")
    refs = [p.get("parentRef") for p in parents if isinstance(p, dict)] if isinstance(parents, list) else []
    where = "status.parents[].parentRef"
    if not refs:
        spec_refs = route.get("spec", "parentRefs")
        refs, where = (spec_refs if isinstance(spec_refs, list) else []), "spec.parentRefs"
    found: list[str] = []
    for i, ref in enumerate(refs):
        if not isinstance(ref, dict) or ref.get("kind", "Gateway") != "Gateway":
            continue
        namespace = str(ref.get("namespace") or route.namespace)
        gateway = index.named(
            str(ref.get("group", GATEWAY_GROUP)), "Gateway", namespace, str(ref.get("name"))
        )
        if gateway is None:
            report.append(
                Unmapped(
                    route.ref, f"{where}[{i}]", f"Gateway/{namespace}/{ref.get('name')} is not in the input"
                )
            )
            continue
        addresses = gateway.get("status", "addresses")
        for j, entry in enumerate(addresses if isinstance(addresses, list) else []):
            if isinstance(entry, dict):
                where = f"status.addresses[{j}].value"
                ip_only = entry.get("type", "IPAddress") == "IPAddress"
                address = _address(entry.get("value"), where, gateway, report, ip_only)
                if address is not None:
                    found.append(address)
        if not addresses:
            report.append(Unmapped(gateway.ref, "status.addresses", "no address in the status"))
    return found


def _istio_addresses(vs: KubeObject, index: Index, report: list[Unmapped]) -> list[str]:
    found: list[str] = []
    gateways = vs.get("spec", "gateways")
    for i, text in enumerate(gateways if isinstance(gateways, list) else []):
        if not isinstance(text, str) or text == "mesh":
            continue
        namespace, _, name = text.rpartition("/")
        gateway = index.named(ISTIO_GROUP, "Gateway", namespace or vs.namespace, name)
        if gateway is None:
            report.append(
                Unmapped(vs.ref, f"spec.gateways[{i}]", f"Istio Gateway {text!r} is not in the input")
            )
            continue
        given = gateway.get("spec", "selector")
        chosen = selector(given, None) if isinstance(given, dict) else None
        services = index.selected("", "Service", None, chosen) if chosen else []
        if not services:
            report.append(
                Unmapped(
                    gateway.ref,
                    "spec.selector",
                    "no Service in the input has these labels (the gateway's service)",
                )
            )
        for service in services:
            found.extend(_load_balancer(service, report))
    return found


def _hosts(gslb: KubeObject, ref: KubeObject | None, report: list[Unmapped]) -> list[str]:
    annotated = gslb.annotations.get(HOSTNAME)
    if isinstance(annotated, str) and annotated:
        return [annotated]
    if ref is None:
        rules = gslb.get("spec", "ingress", "rules")
    elif ref.kind == "Ingress":
        rules = ref.get("spec", "rules")
    elif ref.kind == "VirtualService":
        hosts = ref.get("spec", "hosts")
        return [h for h in hosts if isinstance(h, str)] if isinstance(hosts, list) else []
    elif ref.kind in ("HTTPRoute", "GRPCRoute", "TLSRoute"):
        hosts = ref.get("spec", "hostnames")
        if isinstance(hosts, list) and hosts:
            return [h for h in hosts if isinstance(h, str)]
        rules = None
    else:
        rules = None
    if rules is None:
        report.append(
            Unmapped(gslb.ref, f"metadata.annotations.{HOSTNAME}", "no host name: the annotation is needed")
        )
        return []
    found = []
    for i, rule in enumerate(rules if isinstance(rules, list) else []):
        host = rule.get("host") if isinstance(rule, dict) else None
        if isinstance(host, str) and host:
            found.append(host)
        else:
            what = ref.ref if ref is not None else gslb.ref
            base = "spec.rules" if ref is not None else "spec.ingress.rules"
            report.append(Unmapped(what, f"{base}[{i}].host", "a rule without a host has no DNS name"))
    return found


def _referenced(gslb: KubeObject, index: Index) -> KubeObject | None:
    """The object of spec.resourceRef (None for an embedded spec.ingress); an error when it names nothing."""
    ref = gslb.get("spec", "resourceRef")
    if not isinstance(ref, dict):
        if isinstance(gslb.get("spec", "ingress"), dict):
            return index.named("networking.k8s.io", "Ingress", gslb.namespace, gslb.name)  # the one k8gb made
        raise ImportFailure(
            gslb.source, gslb.line, f"{gslb.ref}: spec.resourceRef (or spec.ingress) is required"
        )
    kind = ref.get("kind")
    if kind not in REF_KINDS:
        raise ImportFailure(
            gslb.source,
            gslb.line,
            f"{gslb.ref}: spec.resourceRef.kind {kind!r} is not one of {', '.join(REF_KINDS)}",
        )
    group = split_api_version(str(ref.get("apiVersion", "")))[0] if ref.get("apiVersion") else None
    namespace = str(ref.get("namespace") or gslb.namespace)
    try:
        chosen = selector(ref.get("matchLabels"), ref.get("matchExpressions"))
    except ValueError as exc:
        raise ImportFailure(gslb.source, gslb.line, f"{gslb.ref}: spec.resourceRef: {exc}") from None
    if isinstance(ref.get("name"), str):
        found = [o for o in index.selected(group, str(kind), namespace) if o.name == ref["name"]]
        what = f"{kind}/{namespace}/{ref['name']}"
    elif chosen:
        found = index.selected(group, str(kind), namespace, chosen)
        what = f"a {kind} in namespace {namespace!r} with labels {chosen}"
    else:
        raise ImportFailure(
            gslb.source,
            gslb.line,
            f"{gslb.ref}: spec.resourceRef needs name, matchLabels or matchExpressions",
        )
    if not found:
        raise ImportFailure(
            gslb.source, gslb.line, f"{gslb.ref}: spec.resourceRef: {what} is not in the input"
        )
    if len(found) > 1:
        names = ", ".join(o.ref for o in found)
        raise ImportFailure(gslb.source, gslb.line, f"{gslb.ref}: spec.resourceRef: {what} matches {names}")
    return found[0]


def resolve(gslb: KubeObject, index: Index, report: list[Unmapped]) -> Target:
    ref = _referenced(gslb, index)
    target = Target(hosts=_hosts(gslb, ref, report))
    annotations = gslb.annotations
    for key in (EXPOSED_IPS, EXPOSED_HOSTNAMES):
        text = annotations.get(key)
        if isinstance(text, str) and text.strip():
            for part in text.split(","):
                address = _address(part, f"metadata.annotations.{key}", gslb, report)
                if address is not None:
                    target.addresses.append(address)
    if target.addresses:
        return target
    if ref is not None:
        if ref.kind == "Service" and ref.get("spec", "type") != "LoadBalancer":
            report.append(
                Unmapped(
                    ref.ref,
                    "spec.type",
                    f"{ref.get('spec', 'type')!r}: only a LoadBalancer Service has addresses",
                )
            )
        elif ref.kind in ("Ingress", "Service"):
            target.addresses = _load_balancer(ref, report)
        elif ref.kind == "VirtualService":
            target.addresses = _istio_addresses(ref, index, report)
        else:
            target.addresses = _gateway_addresses(ref, index, report)
    if not target.addresses:
        exposed = gslb.get("status", "loadBalancer", "exposedIps")
        for i, text in enumerate(exposed if isinstance(exposed, list) else []):
            address = _address(text, f"status.loadBalancer.exposedIps[{i}]", gslb, report, ip_only=True)
            if address is not None:
                target.addresses.append(address)
    return target
