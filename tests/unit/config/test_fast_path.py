"""The fast path of service validation (config/fast.py) against the located validator: for valid and
broken services alike, a service the fast path makes is the very service the located validator makes
(with no problem at all), and a whole configuration gives the same Config and the same located problems
with the fast path as without it, inline (YAML) and in a services file (JSON Lines). The C reader of the
commonest shape (config/_cshape.c) makes what the Python fast path makes, or leaves the service to it."""

from __future__ import annotations

import copy
import dataclasses
import functools
import ipaddress
import json
import shutil
import socket
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gslbd.config import check_config, check_config_text, service_file, services, validate
from gslbd.config import fast as fastpath
from gslbd.config.fast import _IPV4, fast_service, ipv6_text
from gslbd.config.fields import MapReader, Report
from gslbd.config.loader import Map
from gslbd.config.service_context import ServiceContext
from gslbd.config.service_file import forget, sites_named
from gslbd.config.yaml_fast import FastServices
from gslbd.errors import Problem
from gslbd.model.config import Config
from gslbd.model.service import MinHealthy, Service
from gslbd.types import Select

BASE = """\
site: {name: eu, locality: {region: europe-west1}}
sites:
  us: {locality: {region: us-east1, zone: us-east1-b}}
  ap: {}
zones:
  - origin: gslb.example.com.
    ttl: 60
    nameservers: [{name: ns1, address: 127.0.0.2}]
    records: [{name: static, type: A, value: 192.0.2.200}]
  - origin: deep.gslb.example.com.
    nameservers: [{name: ns1.gslb.example.com.}]
checks:
  web: {type: http, port: 8080}
topology:
  networks: [{cidr: 10.1.0.0/16, site: eu}]
"""
BROKEN_PROFILE = BASE.replace("checks:\n", "checks:\n  broken: {type: http, port: 0}\n")
ONE_ZONE = """\
site: {name: eu}
zones:
  - origin: gslb.example.com.
    nameservers: [{name: ns1, address: 127.0.0.2}]
peers:
  sites: [{name: far, nameservers: ['127.0.0.3:53']}]
"""

SITES = ["eu", "us", "ap"]
BAD_SITES = ["zz", "EU", "bad site", "", 7, None]
NAMES = [
    "s1.gslb.example.com.",
    "S2.Gslb.Example.COM.",
    "*.apps.gslb.example.com.",
    "x.deep.gslb.example.com.",
]
BAD_NAMES = [
    "s4",
    " s3.gslb.example.com. ",
    "a.*.gslb.example.com.",
    "deep.gslb.example.com.",
    "gslb.example.com.",
    "static.gslb.example.com.",
    "localtargets-a.gslb.example.com.",
    "elsewhere.example.org.",
    "a" * 60 + ".gslb.example.com.",
    "bad_name!.gslb.example.com.",
    "@",
    "",
    5,
    None,
]
GOOD_ADDRESSES = st.one_of(
    st.ip_addresses(v=4).map(str),
    st.ip_addresses(v=6).map(str),
    st.ip_addresses(v=6).map(lambda a: a.exploded),
    st.sampled_from(["192.0.2.1", "2001:db8::0:1", "::1:2:3:4:5:6:7", "1:2:3:4:5:6:7::"]),
)
HOSTNAMES = st.sampled_from(["a.example.net.", "b.example.net.", "Host.Example.NET."])
BAD_ADDRESSES = st.one_of(
    st.ip_addresses(v=6).map(lambda a: str(a).upper()),
    st.sampled_from(
        [
            *[" 192.0.2.2", "010.0.0.1", "::ffff:192.0.2.1", "fe80::1%eth0", "host", ".", "", "1.2.3.4.5"],
            *["1:2:3:4:5:6::7:8", "::1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8::", "192.0.2.1\x00"],
        ]
    ),
    st.sampled_from([None, 42, ["192.0.2.1"]]),
)
BAD_INTS = st.sampled_from([-1, 1001, True, 2**31, 2**63, 1.5, "5", "5m", None])
BAD_CHECKS = st.sampled_from(["broken", "nope", {"type": "tcp", "port": 80}, 3, None])
POLICIES = ["round_robin", "failover", "weighted", "geo", "random", "hash"]


@st.composite
def endpoints(draw: st.DrawFn) -> dict[str, Any]:
    """A valid endpoint (against BASE), or with one mutation."""
    out: dict[str, Any] = {"address": draw(GOOD_ADDRESSES | GOOD_ADDRESSES | HOSTNAMES)}
    if draw(st.booleans()):
        out["site"] = draw(st.sampled_from(SITES))
    optional = {
        "weight": st.integers(0, 1000),
        "priority": st.integers(0, 10),
        "check": st.sampled_from(["none", "web"]),
        "probe_address": GOOD_ADDRESSES,
        "admin": st.sampled_from(["obey", "up", "down"]),
        "tags": st.lists(st.sampled_from(["canary", "rack-1", "eu.west:2", "A_b"]), max_size=3),
    }
    for key, values in optional.items():
        if draw(st.integers(0, 4)) == 0:
            out[key] = draw(values)
    mutations = {
        "address": st.one_of(BAD_ADDRESSES, HOSTNAMES),
        "site": st.sampled_from(BAD_SITES),
        "weight": BAD_INTS,
        "priority": BAD_INTS,
        "check": BAD_CHECKS,
        "probe_address": st.one_of(BAD_ADDRESSES, HOSTNAMES),
        "admin": st.sampled_from(["bogus", "drain", None, 1]),
        "tags": st.sampled_from(["canary", [""], ["-x"], ["a b"], [1], ["x" * 64], [None], {}, [["x"]]]),
        "locality": st.sampled_from([{"region": "r1"}, {}, "r1"]),
        "wieght": st.just(1),
    }
    if draw(st.integers(0, 20)) == 0:
        key = draw(st.sampled_from(sorted(mutations)))
        out[key] = draw(mutations[key])
    if draw(st.integers(0, 50)) == 0:
        out.pop("address")
    return out


@st.composite
def service_objects(draw: st.DrawFn) -> dict[str, Any]:
    """A valid service (against BASE), or with one or two mutations; its endpoints may have theirs."""
    policy = draw(st.sampled_from(POLICIES))
    out: dict[str, Any] = {"name": draw(st.sampled_from(NAMES))}
    if policy != "round_robin" or draw(st.booleans()):
        out["policy"] = policy
    items = draw(st.lists(endpoints(), min_size=1, max_size=5, unique_by=lambda e: str(e.get("address"))))
    used = sorted({item.get("site", "eu") for item in items if item.get("site", "eu") in SITES} or {"eu"})
    if policy == "failover":
        out["failover_order"] = draw(st.lists(st.sampled_from(used), min_size=1, max_size=3, unique=True))
    if policy == "weighted":
        out["weights"] = draw(
            st.dictionaries(st.sampled_from(used), st.integers(0, 2) | st.integers(0, 1000), min_size=1)
        )
    optional = {
        "ttl": st.integers(0, 3600),
        "max_answers": st.integers(1, 16),
        "all_down": st.sampled_from(["serve_all", "nxdomain", "servfail", "nodata"]),
        "locality_names": st.booleans(),
        "check": st.sampled_from(["none", "web"]),
        "min_healthy": st.one_of(
            st.integers(1, 6), st.sampled_from([0.5, 1.0, 0.34, "50%", "100%", " 25 %"])
        ),
    }
    for key, values in optional.items():
        if draw(st.integers(0, 3)) == 0:
            out[key] = draw(values)
    if draw(st.integers(0, 6)) == 0:
        out["all_down"] = "fallback"
        out["fallback"] = draw(
            st.one_of(st.lists(GOOD_ADDRESSES, min_size=1, max_size=3), HOSTNAMES.map(lambda host: [host]))
        )
    out["endpoints"] = items
    mutations = {
        "name": st.sampled_from(BAD_NAMES),
        "policy": st.sampled_from([*POLICIES, "nope", 1, None]),
        "failover_order": st.one_of(st.lists(st.sampled_from(SITES + BAD_SITES), max_size=4), st.just("eu")),
        "weights": st.one_of(
            st.dictionaries(
                st.sampled_from(["eu", "us", "zz", "B!"]), st.one_of(st.integers(0, 2), BAD_INTS)
            ),
            st.just([1]),
        ),
        "ttl": st.one_of(BAD_INTS, st.just(2**31)),
        "max_answers": st.one_of(BAD_INTS, st.just(0)),
        "all_down": st.sampled_from(["fallback", "x", None]),
        "fallback": st.one_of(
            st.lists(st.one_of(GOOD_ADDRESSES, BAD_ADDRESSES, HOSTNAMES), max_size=3), HOSTNAMES
        ),
        "locality_names": st.sampled_from(["yes", None, True]),
        "check": BAD_CHECKS,
        "min_healthy": st.sampled_from(
            [0, -1, 1.5, 0.0, 2.0, "0%", "150%", "x%", "half", "2", True, None, [1]]
        ),
        "zone": st.sampled_from(["gslb.example.com.", "deep.gslb.example.com", "nope."]),
        "https": st.just({"alpn": ["h2"]}),
        "srv": st.just({"name": "_http._tcp", "port": 443}),
        "extra": st.just(1),
        "endpoints": st.one_of(
            st.sampled_from([[], None, {}, "x"]),
            GOOD_ADDRESSES.map(lambda a: [{"address": a}, {"address": a}]),
            st.tuples(GOOD_ADDRESSES, HOSTNAMES).map(lambda p: [{"address": p[0]}, {"address": p[1]}]),
        ),
    }
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):
        key = draw(st.sampled_from(sorted(mutations)))
        out[key] = draw(mutations[key])
    if draw(st.integers(0, 30)) == 0:
        out.pop(draw(st.sampled_from(sorted(out))))
    return out


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    forget()
    yield
    forget()


def context(base: str = BASE) -> ServiceContext:
    """A fresh context services of `base` are validated in (as build_config makes it): a copy of the one
    captured once per base, with its own records of the sites and profiles used and no lookups made."""
    made = _captured(base)
    checks = copy.copy(made.checks)
    checks.used = set(made.checks.used)
    return dataclasses.replace(
        made, sites_used=dict(made.sites_used), checks=checks, served=None, fast_index=None
    )


@functools.cache
def _captured(base: str) -> ServiceContext:
    made: list[ServiceContext] = []
    original = validate.read_services

    def capture(ctx: ServiceContext, root: MapReader, fast: FastServices | None = None) -> list[Service]:
        made.append(dataclasses.replace(ctx, sites_used=dict(ctx.sites_used)))  # before any service
        return original(ctx, root, fast)

    validate.read_services = capture
    try:
        check_config_text(base, "gslbd.yaml")
    finally:
        validate.read_services = original
    return made[0]


def located(ctx: ServiceContext, obj: object) -> tuple[Service | None, list[Problem]]:
    """The located validator's verdict on one service, as the services file decodes it."""
    node = service_file._nodes(1).decode(json.dumps(obj))
    assert isinstance(node, Map)
    ctx.rep = Report("services.jsonl", Path("."))
    service = services.read_service(ctx, MapReader(ctx.rep, node, "", 1))
    return service, ctx.rep.problems


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(service_objects(), st.sampled_from([BASE, BROKEN_PROFILE, ONE_ZONE]))
def test_a_service_the_fast_path_makes_is_the_located_validators_without_a_problem(
    obj: dict[str, Any], base: str
) -> None:
    fast_ctx, slow_ctx = context(base), context(base)
    sites_before, used_before = dict(fast_ctx.sites_used), set(fast_ctx.checks.used)
    fast = fast_service(fast_ctx, obj)
    slow, problems = located(slow_ctx, obj)
    if fast is None:  # given up: nothing of the context is changed
        assert fast_ctx.sites_used == sites_before and list(fast_ctx.sites_used) == list(sites_before)
        assert fast_ctx.checks.used == used_before
        return
    assert problems == []
    assert fast[0] == slow
    assert slow is not None and fast[1] == sites_named(slow)
    assert list(fast_ctx.sites_used) == list(slow_ctx.sites_used)
    assert fast_ctx.checks.used == slow_ctx.checks.used


def _keys_of(obj: dict[str, Any]) -> int:
    """How many keys the JSON text of `obj` has (what the services file passes as `keys`)."""
    count = len(obj)
    items, weights = obj.get("endpoints"), obj.get("weights")
    if isinstance(items, list):
        count += sum(len(item) for item in items if isinstance(item, dict))
    return count + (len(weights) if isinstance(weights, dict) else 0)


def _common(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` with its endpoints cut to the commonest shape (address and site), where they are mappings."""
    items = obj.get("endpoints")
    if isinstance(items, list):
        cut = [
            {k: v for k, v in e.items() if k in ("address", "site")} if isinstance(e, dict) else e
            for e in items
        ]
        obj = {**obj, "endpoints": cut}
    return obj


needs_c = pytest.mark.skipif(not fastpath.native_reader(), reason="gslbd.config._cshape is not compiled here")


def test_the_c_reader_is_built_where_a_compiler_exists() -> None:
    """setup.py builds it optionally (-Werror): a warning must fail here rather than skip the tests below."""
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip("no C compiler")
    assert fastpath._cshape is not None


@needs_c
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(service_objects(), service_objects().map(_common)),
    st.sampled_from([BASE, BROKEN_PROFILE, ONE_ZONE]),
    st.sampled_from([None, 0, 0, 1]),
)
def test_the_c_reader_makes_what_the_python_fast_path_makes_or_leaves_the_service_to_it(
    obj: dict[str, Any], base: str, extra_keys: int | None
) -> None:
    keys = None if extra_keys is None else _keys_of(obj) + extra_keys
    c_ctx, py_ctx = context(base), context(base)
    reader = fastpath._index(c_ctx).common
    assert reader is not None
    before = (list(c_ctx.sites_used), set(c_ctx.checks.used))
    made = reader(obj, keys)
    if made is None:  # left to the Python fast path: nothing of the context is changed
        assert (list(c_ctx.sites_used), set(c_ctx.checks.used)) == before
        return
    try:
        expected = fastpath._service(py_ctx, obj, keys)
    except (fastpath._Slow, TypeError):
        pytest.fail(f"the C reader made a service the Python fast path gives up on: {made!r}")
    assert made == expected and repr(made) == repr(expected) and hash(made[0]) == hash(expected[0])
    assert all(type(e) is type(x) for e, x in zip(made[0].endpoints, expected[0].endpoints, strict=True))
    assert list(c_ctx.sites_used) == list(py_ctx.sites_used)
    assert c_ctx.checks.used == py_ctx.checks.used


@needs_c
def test_the_c_reader_refuses_a_model_class_whose_slots_it_does_not_know() -> None:
    class Other:
        __slots__ = ("name", "zone")

    ctx = context()
    index = fastpath._index(ctx)
    spec = fastpath._reader_spec(ctx, index)
    spec.service_type = Other
    with pytest.raises(TypeError, match="slots"):
        fastpath._cshape.Reader(spec)


def test_gslbd_native_0_reads_every_service_in_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GSLBD_NATIVE", "0")
    assert fastpath._index(context()).common is None


@pytest.mark.parametrize("policy", ["round_robin", "failover", "weighted", "geo", "random", "hash"])
def test_the_common_shape_takes_the_fast_path(policy: str) -> None:
    obj: dict[str, Any] = {"name": "s1.gslb.example.com.", "policy": policy, "check": "none"}
    if policy == "failover":
        obj["failover_order"] = ["eu", "us", "ap"]
    if policy == "weighted":
        obj["weights"] = {"eu": 70, "us": 20, "ap": 10}
    obj["endpoints"] = [
        {"address": "10.10.0.1", "site": "eu"},
        {"address": "10.11.0.1", "site": "us"},
        {"address": "10.12.0.1", "site": "ap"},
        {"address": "2001:db8::0:1", "site": "eu"},
    ]
    made = fast_service(context(), obj)
    assert made is not None
    assert made[0] == located(context(), obj)[0]
    if fastpath.native_reader():  # and the commonest shape is read in C
        reader = fastpath._index(context()).common
        assert reader is not None and reader(obj, None) == made


EP = [{"address": "192.0.2.1", "site": "us"}]
TO_DEFER = [
    ({"policy": "geo", "endpoints": EP}, ONE_ZONE, "geo policy, but topology has no networks"),
    ({"fallback": ["192.0.2.9"], "endpoints": EP}, BASE, "fallback is only used with all_down: fallback"),
    ({"all_down": "fallback", "endpoints": EP}, BASE, "required when all_down is fallback"),
    ({"policy": "weighted", "weights": {"us": 0}, "endpoints": EP}, BASE, "every weight is 0"),
    ({"weights": {"us": 1}, "endpoints": EP}, BASE, "weights are only used by the weighted policy"),
    (
        {"policy": "failover", "failover_order": ["us", "ap"], "endpoints": EP},
        BASE,
        "no endpoint has site 'ap'",
    ),
    (
        {"policy": "failover", "failover_order": ["us", "us"], "endpoints": EP},
        BASE,
        "site 'us' is listed twice",
    ),
    ({"endpoints": [*EP, {"address": "a.example.net."}]}, BASE, "mixes hostname and IP endpoints"),
    ({"endpoints": [*EP, {"address": "192.0.2.1"}]}, BASE, "duplicate endpoint address 192.0.2.1"),
    ({"endpoints": []}, BASE, "the service has no endpoints"),
    (
        {"locality_names": True, "endpoints": [{"address": "192.0.2.1", "site": "ap"}]},
        BASE,
        "no endpoint has a region",
    ),
    ({"name": "static.gslb.example.com.", "endpoints": EP}, BASE, "is also a static record"),
    (
        {"name": "S1.gslb.example.com", "endpoints": EP},
        BASE,
        "relative name 'S1.gslb.example.com' needs a zone",
    ),
    ({"endpoints": [{"address": "192.0.2.1", "check": "nope"}]}, BASE, "unknown check profile 'nope'"),
    ({"endpoints": [{"address": "192.0.2.1", "weight": True}]}, BASE, "expected an integer, got true"),
    ({"min_healthy": 1.5, "endpoints": EP}, BASE, "a share must be more than 0 and at most 1, got 1.5"),
    (
        {"min_healthy": 2, "endpoints": EP},
        BASE,
        "min_healthy 2 is more than any site has endpoints (at most 1)",
    ),
    ({"ttl": "5m", "endpoints": EP}, BASE, None),  # valid, but a duration the fast path leaves to the other
]


@pytest.mark.parametrize(("given", "base", "problem"), TO_DEFER)
def test_what_the_located_validator_would_report_takes_the_located_path(
    given: dict[str, Any], base: str, problem: str | None
) -> None:
    obj = {"name": "s1.gslb.example.com.", **given}
    assert fast_service(context(base), obj) is None
    _, problems = located(context(base), obj)
    if problem is None:
        assert problems == []
    else:
        assert any(problem in p.message for p in problems), problems


def test_a_key_given_twice_takes_the_located_path() -> None:
    obj = {"name": "s1.gslb.example.com.", "endpoints": [{"address": "192.0.2.1"}]}
    assert fast_service(context(), obj, 3) is not None  # name, endpoints, address
    assert fast_service(context(), obj, 4) is None  # the text has one key more than the object


SIX = st.sampled_from(["0", "1", "a", "F", "ffff", "0db8", "00000"])


@given(
    st.one_of(
        st.ip_addresses(v=6).map(str),
        st.ip_addresses(v=6).map(lambda a: a.exploded.upper()),
        st.lists(SIX, min_size=1, max_size=9).map(":".join),
        st.tuples(st.lists(SIX, max_size=8), st.lists(SIX, max_size=8)).map(
            lambda p: ":".join(p[0]) + "::" + ":".join(p[1])
        ),
        st.text("0123456789abcdefABCDEF:.%", max_size=40),
    )
)
def test_ipv6_text_is_what_ipaddress_writes(text: str) -> None:
    quick = ipv6_text(text)
    if quick is not None:
        assert quick == str(ipaddress.IPv6Address(text))


IPV4ISH = st.one_of(
    st.ip_addresses(v=4).map(str),
    st.text("0123456789.", max_size=20),
    st.lists(st.integers(0, 300).map(str), min_size=3, max_size=5).map(".".join),
    st.sampled_from(
        ["010.0.0.1", "1.2.3.04", "0.0.0.0", "255.255.255.255", "256.1.1.1", "1.2.3.4 ", "1.2.3.4\x00"]
    ),
    st.sampled_from(["1.2.3.4\n", "\u0661.2.3.4", "1.2.3", "1..2.3", ".1.2.3.4", "1.2.3.4.", "0x1.2.3.4"]),
)


@settings(max_examples=300, deadline=None)
@given(IPV4ISH)
def test_the_common_shape_reads_an_ipv4_address_as_the_located_validator_does(text: str) -> None:
    def pton(value: str) -> bool:
        try:
            socket.inet_pton(socket.AF_INET, value)
        except (OSError, ValueError):
            return False
        return True

    assert pton(text) == (_IPV4.match(text) is not None)  # exactly the normal form ipaddress writes
    obj = {"name": "s1.gslb.example.com.", "endpoints": [{"address": text, "site": "us"}]}
    fast = fast_service(context(), obj)
    slow, problems = located(context(), obj)
    if fast is not None:
        assert problems == []
        assert fast[0] == slow
    if pton(text):
        assert fast is not None and fast[0].endpoints[0].address == str(ipaddress.IPv4Address(text))


# The whole configuration, with and without the fast path.


def no_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(services, "fast_service", lambda *args: None)
    monkeypatch.setattr(service_file, "fast_service", lambda *args: None)


def both_ways(
    monkeypatch: pytest.MonkeyPatch, load: Any
) -> tuple[tuple[Config | None, list[Problem]], tuple[Config | None, list[Problem]]]:
    forget()
    fast = load()
    forget()
    with monkeypatch.context() as m:
        no_fast_path(m)
        slow = load()
    forget()
    return fast, slow


def inline_yaml(objs: list[dict[str, Any]]) -> str:
    return BASE + "services:\n" + "".join(f"  - {json.dumps(obj)}\n" for obj in objs)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(service_objects(), min_size=1, max_size=4))
def test_inline_services_give_the_same_config_and_problems_either_way(
    monkeypatch: pytest.MonkeyPatch, objs: list[dict[str, Any]]
) -> None:
    text = inline_yaml(objs)
    fast, slow = both_ways(monkeypatch, lambda: check_config_text(text, "gslbd.yaml"))
    assert [str(p) for p in fast[1]] == [str(p) for p in slow[1]]
    assert fast[0] == slow[0]


LINES = st.one_of(
    service_objects().map(lambda obj: json.dumps(obj, separators=(",", ":"))),
    service_objects().map(json.dumps),
    st.sampled_from(
        [
            '{"name":"d1.gslb.example.com.","name":"d2.gslb.example.com.","endpoints":[{"address":"192.0.2.1"}]}',
            '{"name": "d3.gslb.example.com.", "endpoints": [{"address": "192.0.2.1", "address" : "::1"}]}',
            '{"name":"d4.gslb.example.com.","endpoints":[{"address":"192.0.2.1"}],"x\\":":1}',
            '{"name":"s1.gslb.example.com.","endpoints":[{"address":"192.0.2.9"}]}',
            "",
            "# a comment",
            "[1]",
            "{not json",
        ]
    ),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(LINES, min_size=1, max_size=5), st.booleans())
def test_a_services_file_gives_the_same_config_and_problems_either_way(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory, lines: list[str], inline: bool
) -> None:
    folder = tmp_path_factory.mktemp("fast")
    (folder / "services.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    main = inline_yaml([{"name": "s1.gslb.example.com.", "endpoints": [{"address": "192.0.2.8"}]}])
    path = folder / "gslbd.yaml"
    path.write_text((main if inline else BASE) + "services_file: services.jsonl\n", encoding="utf-8")
    path.chmod(0o600)
    fast, slow = both_ways(monkeypatch, lambda: check_config(path))
    assert [str(p) for p in fast[1]] == [str(p) for p in slow[1]]
    assert fast[0] == slow[0]


def test_a_reload_keeps_the_very_objects_of_unchanged_lines(tmp_path: Path) -> None:
    lines = [
        json.dumps({"name": f"s{i}.gslb.example.com.", "endpoints": [{"address": f"192.0.2.{i}"}]})
        for i in range(1, 6)
    ]
    jsonl = tmp_path / "services.jsonl"
    jsonl.write_text("\n".join(lines) + "\n", encoding="utf-8")
    path = tmp_path / "gslbd.yaml"
    path.write_text(BASE + "services_file: services.jsonl\n", encoding="utf-8")
    path.chmod(0o600)
    first, _ = check_config(path)
    lines[2] = json.dumps({"name": "s3.gslb.example.com.", "endpoints": [{"address": "192.0.2.99"}]})
    jsonl.write_text("\n".join(lines) + "\n", encoding="utf-8")
    second, _ = check_config(path)
    assert first is not None and second is not None
    kept = [a is b for a, b in zip(first.services, second.services, strict=True)]
    assert kept == [True, True, False, True, True]
    assert second.services[2].endpoints[0].address == "192.0.2.99"


@pytest.mark.parametrize(
    ("given", "made"),
    [(2, MinHealthy(count=2)), (0.5, MinHealthy(share=0.5)), ("50%", MinHealthy(share=0.5))],
)
def test_min_healthy_takes_the_fast_path_in_python_and_in_c(given: object, made: MinHealthy) -> None:
    obj: dict[str, Any] = {
        "name": "s1.gslb.example.com.",
        "min_healthy": given,
        "endpoints": [{"address": "10.10.0.1", "site": "eu"}, {"address": "10.10.0.2", "site": "eu"}],
    }
    found = fast_service(context(), obj)
    assert found is not None and found[0].min_healthy == made
    assert found[0] == located(context(), obj)[0]
    if fastpath.native_reader():
        reader = fastpath._index(context()).common
        assert reader is not None and reader(obj, None) == found
        without = reader({k: v for k, v in obj.items() if k != "min_healthy"}, None)
        assert without is not None and without[0].min_healthy is None
        # what the located validator reports (an error, a warning) the C reader leaves to it
        assert reader({**obj, "min_healthy": 1.5}, None) is None
        assert reader({**obj, "min_healthy": 3}, None) is None


def test_a_services_file_reads_min_healthy_and_locates_a_bad_one(tmp_path: Path) -> None:
    lines = [
        {"name": "s1.gslb.example.com.", "min_healthy": "50%", "endpoints": [{"address": "192.0.2.1"}]},
        {"name": "s2.gslb.example.com.", "min_healthy": 1, "endpoints": [{"address": "192.0.2.2"}]},
        {"name": "s3.gslb.example.com.", "min_healthy": 1.5, "endpoints": [{"address": "192.0.2.3"}]},
    ]
    (tmp_path / "services.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    path = tmp_path / "gslbd.yaml"
    path.write_text(BASE + "services_file: services.jsonl\n", encoding="utf-8")
    path.chmod(0o600)
    config, problems = check_config(path)
    assert config is None
    assert [str(p) for p in problems if p.severity == "error"] == [
        f"{tmp_path / 'services.jsonl'}:3: min_healthy: a share must be more than 0 and at most 1, "
        "got 1.5; give a share (0 < share <= 1, such as 0.5, or a percentage such as '50%') or a count "
        "(an integer >= 1)"
    ]
    lines.pop()
    (tmp_path / "services.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    forget()
    config, problems = check_config(path)
    assert config is not None and not [p for p in problems if p.severity == "error"]
    assert [s.min_healthy for s in config.services] == [MinHealthy(share=0.5), MinHealthy(count=1)]


def test_giving_up_keeps_no_traceback_on_the_shared_exception() -> None:
    """The fast path raises one _Slow instance; a traceback left on it grows with every raise (a leak of
    about 2 kB per service given up on)."""
    obj = {"name": "s1.gslb.example.com.", "fallback": ["192.0.2.9"], "endpoints": [{"address": "192.0.2.1"}]}
    for _ in range(3):
        assert fast_service(context(), obj) is None
    assert fastpath._SLOW.__traceback__ is None


def test_tags_take_the_python_fast_path_and_the_c_reader_leaves_them_to_it() -> None:
    obj: dict[str, Any] = {
        "name": "s1.gslb.example.com.",
        "endpoints": [{"address": "10.10.0.1", "site": "eu", "tags": ["canary", "r1", "canary"]}],
    }
    found = fast_service(context(), obj)
    assert found is not None and found[0].endpoints[0].tags == ("canary", "r1")
    assert found[0] == located(context(), obj)[0]
    bad = {**obj, "endpoints": [{"address": "10.10.0.1", "tags": ["a b"]}]}
    assert fast_service(context(), bad) is None  # left to the located reader, which names the fault
    if fastpath.native_reader():
        reader = fastpath._index(context()).common
        assert reader is not None and reader(obj, None) is None
        plain = reader({**obj, "endpoints": [{"address": "10.10.0.1", "site": "eu"}]}, None)
        assert plain is not None and plain[0].endpoints[0].tags == ()


def test_a_services_file_reads_tags_and_locates_a_bad_one(tmp_path: Path) -> None:
    lines = [
        {"name": "s1.gslb.example.com.", "endpoints": [{"address": "192.0.2.1", "tags": ["canary"]}]},
        {"name": "s2.gslb.example.com.", "endpoints": [{"address": "192.0.2.2", "tags": "canary"}]},
    ]
    (tmp_path / "services.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    path = tmp_path / "gslbd.yaml"
    path.write_text(BASE + "services_file: services.jsonl\n", encoding="utf-8")
    path.chmod(0o600)
    config, problems = check_config(path)
    assert config is None
    assert [str(p) for p in problems if p.severity == "error"] == [
        f"{tmp_path / 'services.jsonl'}:2: endpoints[0].tags: expected a list, got the string 'canary'"
    ]
    lines.pop()
    (tmp_path / "services.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    forget()
    config, problems = check_config(path)
    assert config is not None and config.services[0].endpoints[0].tags == ("canary",)


def test_a_geo_bias_is_left_to_the_located_validator_and_read_there() -> None:
    obj: dict[str, Any] = {
        "name": "s1.gslb.example.com.",
        "policy": "geo",
        "bias": {"eu": 10, "us": -20},
        "endpoints": [{"address": "10.10.0.1", "site": "eu"}, {"address": "10.10.0.2", "site": "us"}],
    }
    assert fast_service(context(), obj) is None
    assert located(context(), obj)[0].bias == (("eu", 10), ("us", -20))


def test_select_is_left_to_the_located_validator_and_read_there() -> None:
    obj: dict[str, Any] = {
        "name": "s1.gslb.example.com.",
        "policy": "failover",
        "select": "first_n",
        "endpoints": [{"address": "10.10.0.1", "site": "eu"}, {"address": "10.10.0.2", "site": "us"}],
    }
    assert fast_service(context(), obj) is None
    assert located(context(), obj)[0].select is Select.FIRST_N
