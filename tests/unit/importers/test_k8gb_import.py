"""`import_k8gb`: Gslb objects of both API groups, through every kind of resourceRef, become services
that gslbd's own services-file reader loads, with a report naming what was not mapped; bad input is a
located ImportFailure."""

from __future__ import annotations

from pathlib import Path

import pytest
from importer_support import DATA, by_name, load_with_gslbd

from gslbd.importers.k8gb import import_k8gb
from gslbd.importers.result import ImportFailure

MAIN = """\
site: {name: eu}
sites: {us: {}}
zones:
  - origin: cloud.example.com.
    nameservers: [{name: ns1, address: 127.0.0.2}]
topology:
  networks: [{cidr: 192.0.2.0/24, site: eu}, {cidr: 198.51.100.0/24, site: us}]
"""


def read(*names: str) -> list[tuple[str, str]]:
    return [(name, (DATA / name).read_text(encoding="utf-8")) for name in names]


def test_two_clusters_make_one_failover_service_per_host_with_the_primary_geotag_first() -> None:
    result = import_k8gb(read("eu-cluster.yaml", "us-cluster.yaml"))
    shop = by_name(result.services)["shop.cloud.example.com."]
    assert shop == {
        "name": "shop.cloud.example.com.",
        "policy": "failover",
        "failover_order": ["eu", "us"],
        "ttl": 30,
        "endpoints": [
            {"address": "10.0.1.10", "site": "eu"},
            {"address": "10.0.1.11", "site": "eu"},
            {"address": "10.0.2.10", "site": "us"},
        ],
    }


def test_primary_geotag_leads_the_failover_order_even_when_its_cluster_comes_second() -> None:
    result = import_k8gb(read("us-cluster.yaml", "eu-cluster.yaml"))
    assert by_name(result.services)["shop.cloud.example.com."]["failover_order"] == ["eu", "us"]


def test_weight_round_robin_is_weighted_by_site_and_the_exposed_ip_annotation_wins_over_the_status() -> None:
    result = import_k8gb(read("eu-cluster.yaml", "us-cluster.yaml"))
    api = by_name(result.services)["api.cloud.example.com."]
    assert api["policy"] == "weighted"
    assert api["weights"] == {"eu": 80, "us": 20}
    assert api["endpoints"] == [
        {"address": "10.0.1.20", "site": "eu"},  # a LoadBalancer Service found by matchLabels
        {"address": "10.0.2.20", "site": "us"},  # k8gb.io/exposed-ip-addresses, not the ELB host name
        {"address": "10.0.2.21", "site": "us"},
    ]
    assert result.report == []


def test_the_lines_load_with_gslbds_own_services_file_reader_without_a_problem(tmp_path: Path) -> None:
    result = import_k8gb(read("eu-cluster.yaml", "us-cluster.yaml", "routes-cluster.yaml"))
    config, problems = load_with_gslbd(tmp_path, result.lines(), MAIN)
    assert config is not None
    assert [str(p) for p in problems] == []
    names = [s.name for s in config.services]
    assert names == [
        "shop.cloud.example.com.",
        "api.cloud.example.com.",
        "web.cloud.example.com.",
        "db.cloud.example.com.",
        "pay.cloud.example.com.",
        "legacy.cloud.example.com.",
    ]


def test_gateway_api_routes_take_the_addresses_of_their_parent_gateway() -> None:
    result = import_k8gb(read("routes-cluster.yaml"))
    services = by_name(result.services)
    web, db = services["web.cloud.example.com."], services["db.cloud.example.com."]
    assert web["policy"] == "geo" and web["ttl"] == 10  # geoip, dnsTtlSeconds
    assert web["endpoints"] == [{"address": "10.0.3.1", "site": "eu"}]  # the Gateway's IPAddress
    assert db["endpoints"] == web["endpoints"]  # a TCPRoute named by k8gb.io/hostname
    assert db["policy"] == "round_robin"


def test_an_istio_virtual_service_takes_the_addresses_of_the_service_its_gateway_selects() -> None:
    services = by_name(import_k8gb(read("routes-cluster.yaml")).services)
    assert services["pay.cloud.example.com."]["endpoints"] == [{"address": "10.0.4.1", "site": "eu"}]


def test_a_legacy_gslb_with_an_embedded_ingress_takes_the_ingress_k8gb_made_for_it() -> None:
    services = by_name(import_k8gb(read("routes-cluster.yaml")).services)
    assert services["legacy.cloud.example.com."]["endpoints"] == [{"address": "10.0.5.1", "site": "eu"}]


def test_the_report_names_object_and_field_of_everything_not_mapped() -> None:
    report = [str(item) for item in import_k8gb(read("routes-cluster.yaml")).report]
    assert report == [
        "Gslb/demo/web: spec.strategy.type: geoip is geo: needs topology networks or a GeoIP database in the "
        "gslbd config (k8gb's own GeoIP database is not read)",
        "Gslb/demo/web: spec.serviceHealthPolicy: 'All': gslbd checks each address, not the pods of the "
        "Services behind a host; give the service a check",
        "GRPCRoute/demo/rpc-route: spec.parentRefs[0]: Gateway/demo/internal is not in the input",
        "Gslb/demo/rpc: status: no address found: its site adds no endpoint",
        "Gslb/demo/legacy: spec.strategy.splitBrainThresholdSeconds: deprecated in k8gb; no equivalent",
        "Gslb/demo/web: status: web.cloud.example.com.: host name gw.lb.example.net. left out: the service "
        "has IP addresses (gslbd answers a host name as CNAME)",
        "Gslb/demo/db: status: db.cloud.example.com.: host name gw.lb.example.net. left out: the service "
        "has IP addresses (gslbd answers a host name as CNAME)",
        "Gslb/demo/rpc: rpc.cloud.example.com.: no address in any input: not written",
    ]


ANNOTATED_INGRESS = """\
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: blog
  namespace: web
  annotations:
    k8gb.io/strategy: failover
    k8gb.io/primary-geotag: us
    k8gb.io/dns-ttl-seconds: "15"
spec:
  rules:
    - host: blog.cloud.example.com
status:
  loadBalancer:
    ingress:
      - ip: 10.9.0.1
"""


def test_an_ingress_annotated_with_a_k8gb_strategy_is_imported_as_the_gslb_k8gb_makes_of_it() -> None:
    result = import_k8gb([("blog.yaml", ANNOTATED_INGRESS)])
    assert result.services == [
        {
            "name": "blog.cloud.example.com.",
            "policy": "failover",
            "failover_order": ["us"],
            "ttl": 15,
            "endpoints": [{"address": "10.9.0.1"}],
        }
    ]
    assert [str(i) for i in result.report] == [
        "Gslb/web/blog: status.geoTag: absent: its addresses get no site (this site)"
    ]


GSLB_TO_NOTHING = """\
apiVersion: k8gb.io/v1beta1
kind: Gslb
metadata: {name: lost, namespace: demo}
spec:
  resourceRef: {apiVersion: networking.k8s.io/v1, kind: Ingress, name: missing}
  strategy: {type: roundRobin}
"""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n",
            "bad.yaml:2: unknown kind 'Deployment' of apiVersion 'apps/v1'; known: Gateway, GRPCRoute, Gslb, "
            "HTTPRoute, Ingress, Service, TCPRoute, TLSRoute, UDPRoute, VirtualService",
        ),
        (
            "# a comment\n" + GSLB_TO_NOTHING,
            "bad.yaml:2: Gslb/demo/lost: spec.resourceRef: Ingress/demo/missing is not in the input",
        ),
        (
            "kind: List\napiVersion: v1\nitems:\n  - {a: [1, 2}\n",
            "bad.yaml:4: invalid YAML: expected ',' or ']', but got '}'",
        ),
        ("apiVersion: v1\nkind: Service\n", "bad.yaml:1: Service: metadata.name is required"),
        (
            "apiVersion: k8gb.io/v2\nkind: Gslb\nmetadata: {name: x}\n",
            "bad.yaml:1: Gslb: apiVersion 'k8gb.io/v2': only v1beta1 is known",
        ),
    ],
)
def test_bad_input_is_an_error_at_its_line(text: str, message: str) -> None:
    with pytest.raises(ImportFailure) as caught:
        import_k8gb([("good.yaml", ANNOTATED_INGRESS), ("bad.yaml", text)])
    assert str(caught.value) == message


def test_a_label_selector_that_matches_two_objects_is_an_error() -> None:
    second = (
        "  - {apiVersion: v1, kind: Service, metadata: {name: api-2, namespace: demo, labels: {app: api}}}\n"
    )
    text = (DATA / "eu-cluster.yaml").read_text(encoding="utf-8") + second
    with pytest.raises(ImportFailure) as caught:
        import_k8gb([("eu.yaml", text)])
    assert str(caught.value) == (
        "eu.yaml:72: Gslb/demo/api: spec.resourceRef: a Service in namespace 'demo' with labels "
        "app=api matches Service/demo/api-lb, Service/demo/api-2"
    )


def test_an_item_the_same_gslb_gives_in_every_cluster_is_reported_once() -> None:
    texts = [
        (
            name,
            text.replace(
                "        dnsTtlSeconds: 30\n", "        dnsTtlSeconds: 30\n      serviceHealthPolicy: All\n"
            ),
        )
        for name, text in read("eu-cluster.yaml")
    ]
    texts.append(
        ("us-cluster.yaml", texts[0][1].replace("geoTag: eu", "geoTag: us").replace("10.0.1.", "10.0.2."))
    )
    assert [str(item) for item in import_k8gb(texts).report] == [
        "Gslb/demo/shop: spec.serviceHealthPolicy: 'All': gslbd checks each address, not the pods of the "
        "Services behind a host; give the service a check"
    ]


GATEWAY = """\
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge, namespace: net}
spec: {gatewayClassName: envoy, listeners: [{name: l, port: 443, protocol: TLS}]}
status:
  addresses: [{type: IPAddress, value: 10.7.0.1}, {type: IPAddress, value: "fd00::7"}]
"""


@pytest.mark.parametrize(
    ("route", "annotations"),
    [
        (
            "apiVersion: gateway.networking.k8s.io/v1alpha3\nkind: TLSRoute\n"
            "metadata: {name: r, namespace: demo}\n"
            "spec: {hostnames: [tls.cloud.example.com], parentRefs: [{name: edge, namespace: net}]}\n",
            "{}",
        ),
        (
            "apiVersion: gateway.networking.k8s.io/v1alpha2\nkind: UDPRoute\n"
            "metadata: {name: r, namespace: demo}\n"
            "spec: {parentRefs: [{name: edge, namespace: net}]}\n",
            "{k8gb.io/hostname: tls.cloud.example.com}",
        ),
    ],
)
def test_tls_and_udp_routes_take_their_gateways_addresses(route: str, annotations: str) -> None:
    kind = route.split("kind: ")[1].split("\n", maxsplit=1)[0]
    gslb = (
        "apiVersion: k8gb.io/v1beta1\nkind: Gslb\n"
        f"metadata: {{name: g, namespace: demo, annotations: {annotations}}}\n"
        f"spec: {{resourceRef: {{apiVersion: gateway.networking.k8s.io/v1, kind: {kind}, name: r}}, "
        "strategy: {type: roundRobin}}\nstatus: {geoTag: eu, healthyRecords: {}, serviceHealth: {}}\n"
    )
    result = import_k8gb([("c.yaml", "---\n".join([GATEWAY, route, gslb]))])
    assert result.services == [
        {
            "name": "tls.cloud.example.com.",
            "policy": "round_robin",
            "endpoints": [{"address": "10.7.0.1", "site": "eu"}, {"address": "fd00::7", "site": "eu"}],
        }
    ]
    assert result.report == []


def test_a_service_that_is_not_a_load_balancer_is_reported_and_gives_no_endpoint() -> None:
    text = (
        (DATA / "eu-cluster.yaml")
        .read_text(encoding="utf-8")
        .replace("type: LoadBalancer", "type: ClusterIP")
    )
    result = import_k8gb([("eu.yaml", text)])
    assert "api.cloud.example.com." not in by_name(result.services)
    assert [str(i) for i in result.report] == [
        "Service/demo/api-lb: spec.type: 'ClusterIP': only a LoadBalancer Service has addresses",
        "Gslb/demo/api: status: no address found: its site adds no endpoint",
        "Gslb/demo/api: api.cloud.example.com.: no address in any input: not written",
    ]


def test_a_status_ip_that_is_not_an_ip_address_is_reported_not_taken_for_a_host_name() -> None:
    text = ANNOTATED_INGRESS.replace("- ip: 10.9.0.1", "- ip: 300.9.0.1\n      - ip: 10.9.0.2")
    result = import_k8gb([("blog.yaml", text)])
    assert result.services[0]["endpoints"] == [{"address": "10.9.0.2"}]
    assert str(result.report[0]) == (
        "Ingress/web/blog: status.loadBalancer.ingress[0].ip: '300.9.0.1' is not an IP address"
    )


def with_ref(ref: str) -> str:
    """The eu cluster with the api Gslb's resourceRef replaced and a second Service beside api-lb."""
    text = (DATA / "eu-cluster.yaml").read_text(encoding="utf-8")
    old = "        apiVersion: v1\n        kind: Service\n        matchLabels:\n          app: api\n"
    assert old in text
    other = "  - {apiVersion: v1, kind: Service, metadata: {name: api-canary, namespace: demo, "
    other += "labels: {app: api, "
    other += (
        "track: canary}}, spec: {type: LoadBalancer}, status: {loadBalancer: {ingress: [{ip: 10.0.1.99}]}}}\n"
    )
    return text.replace(old, ref) + other


def test_match_expressions_select_the_referenced_object() -> None:
    ref = (
        "        apiVersion: v1\n        kind: Service\n        matchLabels: {app: api}\n"
        "        matchExpressions: [{key: track, operator: In, values: [canary, beta]}]\n"
    )
    api = by_name(import_k8gb([("eu.yaml", with_ref(ref))]).services)["api.cloud.example.com."]
    assert api["endpoints"] == [{"address": "10.0.1.99", "site": "eu"}]
    ref = "        kind: Service\n        matchExpressions: [{key: track, operator: DoesNotExist}]\n"
    api = by_name(import_k8gb([("eu.yaml", with_ref(ref))]).services)["api.cloud.example.com."]
    assert api["endpoints"] == [{"address": "10.0.1.20", "site": "eu"}]


def test_a_match_expression_with_an_unknown_operator_is_an_error() -> None:
    ref = "        kind: Service\n        matchExpressions: [{key: track, operator: Like, values: [c]}]\n"
    with pytest.raises(ImportFailure) as caught:
        import_k8gb([("eu.yaml", with_ref(ref))])
    assert str(caught.value) == (
        "eu.yaml:72: Gslb/demo/api: spec.resourceRef: matchExpressions[0] needs a key and an operator (In, "
        "NotIn, Exists, DoesNotExist)"
    )
