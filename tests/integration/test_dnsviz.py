"""dnsviz (probe + grok) on a signed gslbd zone delegated from a signed parent on NSD, and validating
Unbound and BIND resolvers asked the questions that broke: names made by a wildcard, NSEC and RRSIG.

The zone holds the contents that broke signed answers before (issue 20): static records of several
types, a CNAME, an empty non-terminal, a wildcard service (`*.apps`: names made by it, asked for types it
lacks) and services. dnsviz probes each name with the types it knows plus its own NXDOMAIN and NODATA
probes, walks from the parent's DS, and grok reports every inconsistency: the test fails on any ERROR
(warnings are printed), except the ones about the servers' loopback addresses.

Delegations and DNAME (issue 20 items 2 and 3) join the zone by one line each in `EXTRA_RECORDS`, with
their names in `EXTRA_NAMES`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dns.flags
import dns.rcode
import pytest
from dnssec_support import _GROK as GROK
from dnssec_support import (
    OWN_ANSWERS,
    RESOLVERS,
    Child,
    ValidatingResolver,
    dnsviz_binary,
    ds_of,
    keygen,
    resolver_binary,
    resolver_param,
    resolver_test_marks,
    run,
    running_validating_resolver,
    sets_ad,
    signed_parent,
)
from gslbd_harness import Running, running_gslbd
from nsd_support import Nsd, running_nsd

pytestmark = [
    *resolver_test_marks(),
    pytest.mark.skipif(dnsviz_binary() is None, reason="dnsviz is not installed (scripts/test installs it)"),
]

PARENT = "example.com."
ORIGIN = f"viz.{PARENT}"
# More static records of the zone, as YAML flow mappings: a delegation and a DNAME go here, e.g.
#   "{name: sub, type: NS, value: ns1.sub}", "{name: ns1.sub, type: A, value: 127.0.0.1}",
#   "{name: old, type: DNAME, value: viz.example.com.}"
# A secure delegation to a signed child on NSD (its DS is added in `world`) and a DNAME back into the zone.
EXTRA_RECORDS: list[str] = [
    "{name: sub, type: NS, value: ns1.sub}",
    "{name: ns1.sub, type: A, value: 127.0.0.1}",
    "{name: old, type: DNAME, value: viz.example.com.}",
]
EXTRA_NAMES: list[str] = ["sub", "ns1.sub", "old", "www.old"]  # and their names to probe
CHILD = f"sub.{ORIGIN}"
NAMES = ["@", "www", "info", "mail", "host.deep", "deep", "app", "x.apps", "y.x.apps", "apps", "nothing"]
# Problems grok reports about the test's own network (servers on loopback), not about the answers.
NETWORK_CODES = ("LOOPBACK", "PRIVATE", "NOT_ROUTABLE", "NO_SERVERS")


def config(key: Path, child_ds: str) -> str:
    records = [
        f'{{name: sub, type: DS, value: "{" ".join(child_ds.split()[3:])}"}}',
        "{name: www, type: CNAME, value: app}",
        '{name: info, type: TXT, value: "hello"}',
        '{name: mail, type: MX, value: "10 mx.example.net."}',
        "{name: host.deep, type: A, value: 192.0.2.7}",
        "{name: host.deep, type: AAAA, value: '2001:db8::7'}",
        *EXTRA_RECORDS,
    ]
    listed = "".join(f"      - {r}\n" for r in records)
    return f"""
version: 1
dns: {{listen: @LISTEN@, lame_duck: 0s}}
zones:
  - origin: {ORIGIN}
    ttl: 300
    negative_ttl: 60
    nameservers: [{{name: ns1.{ORIGIN}, address: 127.0.0.1}}]
    dnssec: {{keys: ["{key}"]}}
    records:
{listed}services:
  - name: app.{ORIGIN}
    ttl: 60
    check: none
    endpoints: [{{address: 192.0.2.1}}, {{address: "2001:db8::1"}}]
  - {{name: "*.apps.{ORIGIN}", ttl: 60, check: none, endpoints: [{{address: 198.51.100.1}}]}}
"""


@dataclass
class World:
    gslbd: Running
    nsd: Nsd
    parent_key: Path
    parent_ds: str
    workdir: Path
    resolvers: dict[str, ValidatingResolver]  # the installed ones of RESOLVERS
    child: Nsd  # the delegated child sub.viz.example.com. (unsigned)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("dnsviz")
    keys = base / "keys"
    keys.mkdir()
    key = keygen(ORIGIN, keys)
    child_zone, child_ds = signed_parent(base / "child", [], parent=CHILD)
    zone_text, anchor = signed_parent(
        base / "parent", [Child(ORIGIN, (ds_of(key.with_name(key.name + ".key")),))]
    )
    [parent_key] = (base / "parent").glob("K*.key")
    with (
        running_gslbd(base, config(key, child_ds), zone=ORIGIN) as gslbd,
        running_nsd(base / "nsd", PARENT, zone_text) as nsd,
        running_nsd(base / "child", CHILD, child_zone) as child,
    ):
        forwards = {PARENT: nsd.port, ORIGIN: gslbd.port}
        with contextlib.ExitStack() as stack:
            resolvers = {
                kind: stack.enter_context(
                    running_validating_resolver(kind, base / kind, anchor, forwards, ORIGIN)
                )
                for kind in RESOLVERS
                if resolver_binary(kind) is not None
            }
            yield World(gslbd, nsd, parent_key, anchor, base, resolvers, child)


def grok(world: World, names: list[str]) -> dict[str, object]:
    """`dnsviz probe` of `names` from the parent down (its servers and DS given, nothing asked off the
    machine), then `dnsviz grok` with the parent's key as the trust anchor; grok's JSON."""
    parent = f"127.0.0.1:{world.nsd.port}"
    child = f"127.0.0.1:{world.gslbd.port}"
    ds_rdata = " ".join(world.parent_ds.split()[3:])
    probe = [
        "dnsviz", "probe", "-A", "-a", PARENT,
        "-x", f"{PARENT}:{parent}", "-N", f"{PARENT}:ns1.{PARENT}={parent}", "-D", f"{PARENT}:{ds_rdata}",
        "-x", f"{ORIGIN}:{child}", "-x", f"{CHILD}:127.0.0.1:{world.child.port}",
        "-o", str(world.workdir / "probe.json"), *names,
    ]  # fmt: skip
    run(probe, world.workdir)
    keys = world.workdir / "trusted.keys"
    keys.write_text(
        "".join(ln + "\n" for ln in world.parent_key.read_text().splitlines() if not ln.startswith(";"))
    )
    python = Path(dnsviz_binary() or "").read_text().splitlines()[0].removeprefix("#!").strip()
    argv = [python, "-c", GROK, "-t", str(keys), "-r", str(world.workdir / "probe.json")]
    found: dict[str, object] = json.loads(run(argv, world.workdir))
    return found


def problems(found: object, kind: str, path: str = "") -> list[str]:
    """Every problem of `kind` ("errors" or "warnings") grok reports, with where, but the network's."""
    out: list[str] = []
    if isinstance(found, dict):
        for key, value in found.items():
            if key == kind and isinstance(value, list):
                out.extend(
                    f"{path}: {p.get('code')}: {p.get('description')}"
                    for p in value
                    if isinstance(p, dict) and not any(c in str(p.get("code", "")) for c in NETWORK_CODES)
                )
            else:
                out.extend(problems(value, kind, f"{path}/{key}"))
    elif isinstance(found, list):
        for i, value in enumerate(found):
            out.extend(problems(value, kind, f"{path}[{i}]"))
    return out


def test_dnsviz_finds_no_error_in_a_signed_zone_with_a_wildcard_and_static_records(world: World) -> None:
    names = [ORIGIN if n == "@" else f"{n}.{ORIGIN}" for n in NAMES + EXTRA_NAMES]
    found = grok(world, names)
    warnings = problems(found, "warnings")
    if warnings:
        print("dnsviz warnings:\n" + "\n".join(warnings))
    assert problems(found, "errors") == []
    zone = found[ORIGIN]
    assert isinstance(zone, dict) and zone["delegation"]["status"] == "SECURE"
    assert all(isinstance(found[n], dict) for n in names)  # every name was analysed


# (name, type, rcode, whether the answer section has data): every one validated (AD), none SERVFAIL.
RESOLVED = [
    ("x.apps", "A", "NOERROR", True),
    ("x.apps", "TXT", "NOERROR", False),  # was a denial of the name (NXNAME)
    ("y.x.apps", "AAAA", "NOERROR", False),
    ("app", "NSEC", "NOERROR", True),  # NSEC and RRSIG questions got a self-contradicting NODATA
    ("www", "NSEC", "NOERROR", True),
    ("deep", "NSEC", "NOERROR", True),
    ("x.apps", "NSEC", "NOERROR", True),
    ("nothing", "NSEC", "NXDOMAIN", False),
    ("app", "RRSIG", "NOERROR", True),
    ("x.apps", "RRSIG", "NOERROR", True),
    ("nothing", "RRSIG", "NXDOMAIN", False),
    ("app", "ANY", "NOERROR", True),
]


@pytest.mark.parametrize("resolver", [resolver_param(kind) for kind in RESOLVERS])
@pytest.mark.parametrize(("name", "rtype", "rcode", "has_data"), RESOLVED)
def test_validating_resolvers_accept_wildcard_and_meta_type_answers(
    world: World, resolver: str, name: str, rtype: str, rcode: str, has_data: bool
) -> None:
    reply = world.resolvers[resolver].ask(f"{name}.{ORIGIN}", rtype)
    if (resolver, rtype) in OWN_ANSWERS:  # the resolver's rule, not the zone's answer
        assert dns.rcode.to_text(reply.rcode()) == OWN_ANSWERS[resolver, rtype], reply.to_text()
        return
    assert dns.rcode.to_text(reply.rcode()) == rcode, reply.to_text()
    assert bool(reply.flags & dns.flags.AD) == sets_ad(resolver, rtype, has_data), reply.to_text()
    assert bool(reply.answer) == has_data, reply.to_text()
