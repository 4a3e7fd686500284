"""Whatever the input, an import either fails with a located error or writes lines that gslbd's own
services-file reader loads without an error: the importers check names and addresses by gslbd's rules,
and report what they leave out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from importer_support import load_with_gslbd

from gslbd.importers.k8gb import import_k8gb
from gslbd.importers.octodns import import_octodns
from gslbd.importers.result import ImportFailure

MAIN = """\
site: {name: eu}
zones:
  - origin: cloud.example.com.
    nameservers: [{name: ns1, address: 127.0.0.2}]
topology:
  networks: [{cidr: 192.0.2.0/24, site: eu}]
"""

HOSTS = st.sampled_from(
    ["a.cloud.example.com", "*.b.cloud.example.com", "C.cloud.example.com.", "bad host.cloud.example.com",
     "d..cloud.example.com", "x" * 64 + ".cloud.example.com", "e_f.cloud.example.com"]
)  # fmt: skip
ADDRESSES = st.sampled_from(
    ["10.0.0.1", "10.0.0.2", "2001:db8::1", "300.1.1.1", "lb.example.net", "lb.example.net.", "-", "", "a b"]
)
TAGS = st.sampled_from(["eu", "us", "EU West", "", "!!", "ap-1"])
TYPES = st.sampled_from(["roundRobin", "failover", "weightRoundRobin", "geoip", "random"])


@st.composite
def cluster(draw: st.DrawFn, n: int) -> str:
    hosts = draw(st.lists(HOSTS, min_size=1, max_size=3))
    ingress = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": "ing", "namespace": "demo"},
        "spec": {"rules": [{"host": h} for h in hosts]},
        "status": {
            "loadBalancer": {
                "ingress": [
                    {draw(st.sampled_from(["ip", "hostname"])): a}
                    for a in draw(st.lists(ADDRESSES, max_size=3))
                ]
            }
        },
    }
    strategy: dict[str, Any] = {"type": draw(TYPES)}
    if draw(st.booleans()):
        strategy["primaryGeoTag"] = draw(TAGS)
    if draw(st.booleans()):
        strategy["weight"] = {draw(TAGS): draw(st.integers(-5, 2000)) for _ in range(2)}
    if draw(st.booleans()):
        strategy["dnsTtlSeconds"] = draw(st.sampled_from([0, 30, -1, "x", 2**40]))
    gslb = {
        "apiVersion": draw(st.sampled_from(["k8gb.io/v1beta1", "k8gb.absa.oss/v1beta1"])),
        "kind": "Gslb",
        "metadata": {"name": "g", "namespace": "demo"},
        "spec": {"resourceRef": {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "name": "ing"},
                 "strategy": strategy},
        "status": {"geoTag": draw(TAGS)} if draw(st.booleans()) else {},
    }  # fmt: skip
    return yaml.safe_dump_all([ingress, gslb])


def loads_without_error(tmp_path: Path, lines: str) -> None:
    for line in lines.splitlines():
        json.loads(line)
    config, problems = load_with_gslbd(tmp_path, lines, MAIN)
    errors = [str(p) for p in problems if p.severity == "error"]
    assert config is not None and errors == [], (lines, errors)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(0, 100), min_size=1, max_size=3).flatmap(lambda ns: st.tuples(*map(cluster, ns))))
def test_every_k8gb_import_loads_in_gslbd_or_fails_located(tmp_path: Path, texts: tuple[str, ...]) -> None:
    try:
        result = import_k8gb([(f"c{i}.yaml", t) for i, t in enumerate(texts)])
    except ImportFailure as exc:
        assert exc.source.startswith("c") and exc.line is not None
        return
    loads_without_error(tmp_path, result.lines())


VALUES = st.sampled_from(
    ["192.0.2.1", "192.0.2.2", "2001:db8::2", "a.example.net.", "a.example.net", "1.2.3", "x y."]
)


@st.composite
def zone_file(draw: st.DrawFn) -> str:
    pools = {
        name: {"values": [{"value": v, "weight": draw(st.integers(-1, 1001)),
                           "status": draw(st.sampled_from(["up", "down", "obey", "maybe"]))}
                          for v in draw(st.lists(VALUES, min_size=1, max_size=3))]}
        for name in draw(st.lists(st.sampled_from(["eu", "US", "ap_1", "w"]), min_size=1, max_size=3,
                                  unique=True))
    }  # fmt: skip
    names = list(pools)
    for name in names:
        if draw(st.booleans()):
            pools[name]["fallback"] = draw(st.sampled_from([*names, "nowhere"]))
    rules: list[dict[str, Any]] = [
        {
            "pool": draw(st.sampled_from(names)),
            "geos": draw(st.lists(st.sampled_from(["EU", "NA-US-CA", "AS"]))),
        }
        for _ in range(draw(st.integers(1, 3)))
    ]
    records = {
        draw(st.sampled_from(["www", "*.apps", "a b", ""])): {
            "type": rtype,
            "ttl": draw(st.sampled_from([60, "x"])),
            "dynamic": {"pools": pools, "rules": rules},
            "values": draw(st.lists(VALUES, max_size=2)),
        }
        for rtype in draw(
            st.lists(st.sampled_from(["A", "AAAA", "CNAME"]), min_size=1, max_size=2, unique=True)
        )
    }
    return yaml.safe_dump(records)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(zone_file())
def test_every_octodns_import_loads_in_gslbd(tmp_path: Path, text: str) -> None:
    loads_without_error(tmp_path, import_octodns("cloud.example.com.yaml", text, "cloud.example.com").lines())


def test_fallback_values_of_an_a_and_a_cname_record_of_one_name_load(tmp_path: Path) -> None:
    """Hypothesis found these: a CNAME's two spellings of one hostname, and an A record's addresses with a
    CNAME's hostname, both gave a `fallback` the config refuses."""
    dynamic = {"pools": {"p": {"values": [{"value": "192.0.2.1"}]}}, "rules": [{"pool": "p"}]}
    cname = {"pools": {"p": {"values": [{"value": "b.example.net."}]}}, "rules": [{"pool": "p"}]}
    text = yaml.safe_dump(
        {
            "one": {"type": "CNAME", "dynamic": cname, "values": ["a.example.net.", "a.example.net"]},
            "two": [
                {"type": "A", "dynamic": dynamic, "values": ["192.0.2.9"]},
                {"type": "CNAME", "dynamic": cname, "values": ["a.example.net."]},
            ],
        }
    )
    result = import_octodns("z.yaml", text, "cloud.example.com")
    loads_without_error(tmp_path, result.lines())
