"""A served world for the wire tests (zones, services, a snapshot) and helpers to ask it questions."""

from __future__ import annotations

import ipaddress
import random
from dataclasses import replace
from typing import Any

import dns.edns
import dns.flags
import dns.message
import dns.name
import dns.rdataclass
import dns.rdatatype

from gslbd.answer import View, build_view
from gslbd.model.check import Check
from gslbd.model.config import Config
from gslbd.model.service import Endpoint, HttpsRecord, Service, TtlRange
from gslbd.model.zone import Nameserver, Soa, StaticRecord, Zone
from gslbd.policy.base import NoLocator, PolicyEnv
from gslbd.state.snapshot import Snapshot
from gslbd.state.status import EndpointStatus
from gslbd.types import AllDown, CheckType, EndpointKind, PolicyName
from gslbd.wire import AnswerTable, Responder, compile_table, slow_response
from gslbd.wire import ctable as ct
from gslbd.wire.compile import wire_key
from gslbd.wire.fastpath import slow_answer
from gslbd.wire.precheck import error_response, scan

ORIGIN = "gslb.example.com."
INNER = "inner.gslb.example.com."
OTHER = "example.org."
SOA_TEXT = "ns1.gslb.example.com. hostmaster.example.com. 2024010101 3600 600 604800 60"
CLIENT = "203.0.113.5"


def _soa(origin: str) -> Soa:
    del origin
    return Soa("ns1.gslb.example.com.", "hostmaster.example.com.", 2024010101, minimum=60)


ZONE = Zone(
    ORIGIN,
    ttl=300,
    negative_ttl=60,
    soa=_soa(ORIGIN),
    nameservers=(
        Nameserver("ns1.gslb.example.com.", ("192.0.2.53", "2001:db8::53")),
        Nameserver("ns.example.net.", ("198.51.100.53",)),
    ),
    records=(
        StaticRecord("www.gslb.example.com.", "CNAME", "app.gslb.example.com.", 120),
        StaticRecord("info.gslb.example.com.", "TXT", '"hello"', 120),
        StaticRecord("info.gslb.example.com.", "TXT", '"world"', 120),
        StaticRecord("mail.gslb.example.com.", "MX", "10 mx.example.net.", 120),
        StaticRecord("x.deep.gslb.example.com.", "A", "192.0.2.99", 120),
        # In-zone CNAME chains (answer/chain.py): to a policy, NXDOMAIN, SERVFAIL, a loop, too long.
        StaticRecord("to-sticky.gslb.example.com.", "CNAME", "sticky.gslb.example.com.", 120),
        StaticRecord("to-info.gslb.example.com.", "CNAME", "info.gslb.example.com.", 120),
        StaticRecord("dangling.gslb.example.com.", "CNAME", "missing.gslb.example.com.", 120),
        StaticRecord("to-sf.gslb.example.com.", "CNAME", "sf.gslb.example.com.", 120),
        StaticRecord("to-nx.gslb.example.com.", "CNAME", "nx.gslb.example.com.", 120),
        StaticRecord("to-inner.gslb.example.com.", "CNAME", "svc.inner.gslb.example.com.", 120),
        StaticRecord("loop1.gslb.example.com.", "CNAME", "loop2.gslb.example.com.", 120),
        StaticRecord("loop2.gslb.example.com.", "CNAME", "loop1.gslb.example.com.", 120),
        *(
            StaticRecord(f"c{i}.gslb.example.com.", "CNAME", f"c{i + 1}.gslb.example.com.", 120)
            for i in range(10)
        ),
        StaticRecord("c10.gslb.example.com.", "A", "192.0.2.110", 120),
    ),
)
INNER_ZONE = Zone(
    INNER,
    ttl=30,
    negative_ttl=45,
    soa=Soa("ns1.gslb.example.com.", "hostmaster.example.com.", 7, minimum=45),
    nameservers=(Nameserver("ns1.gslb.example.com."),),
)
OTHER_ZONE = Zone(
    OTHER,
    ttl=30,
    negative_ttl=30,
    soa=Soa("ns.example.org.", "hostmaster.example.org.", 1),
    nameservers=(Nameserver("ns.example.org.", ("192.0.2.54",)),),
)


def ep(service: str, address: str, site: str = "eu") -> Endpoint:
    kind = (
        EndpointKind.HOSTNAME
        if address.endswith(".")
        else EndpointKind.IPV6
        if ":" in address
        else EndpointKind.IPV4
    )
    return Endpoint(service, address, kind, site)


def svc(label: str, *addresses: str, zone: str = ORIGIN, **changes: Any) -> Service:
    name = f"{label}.{zone}"
    endpoints = tuple(ep(name, a) for a in addresses)
    return replace(Service(name, zone, label, ttl=20, endpoints=endpoints), **changes)


SERVICES = (
    svc("app", "192.0.2.1", "192.0.2.2", "192.0.2.3", "2001:db8::1", "2001:db8::2"),
    svc("solo", "192.0.2.9"),
    svc("big", *(f"10.0.0.{i}" for i in range(1, 41)), max_answers=40),
    svc("alias", "lb.example.net."),
    svc(
        "sticky",
        *(f"198.51.100.{i}" for i in range(1, 5)),
        "2001:db8::5",
        "2001:db8::6",
        policy=PolicyName.HASH,
        https=HttpsRecord(("h2", "h3"), 8443),  # hints picked per client, like the A/AAAA answers
    ),
    svc("shuffled", "192.0.2.21", "192.0.2.22", "192.0.2.23", policy=PolicyName.RANDOM),
    svc("split", "192.0.2.31", "192.0.2.32", policy=PolicyName.WEIGHTED),
    svc("primary", "192.0.2.41", "192.0.2.42", policy=PolicyName.FAILOVER),
    svc("near", "192.0.2.51", "192.0.2.52", policy=PolicyName.GEO),
    svc("sf", "192.0.2.60", all_down=AllDown.SERVFAIL),
    svc("nx", "192.0.2.61", all_down=AllDown.NXDOMAIN),
    svc("nd", "192.0.2.62", all_down=AllDown.NODATA),
    svc(
        "fb",
        "192.0.2.63",
        "2001:db8::63",
        all_down=AllDown.FALLBACK,
        fallback=("198.51.100.200", "2001:db8::200"),
    ),
    svc("serveall", "192.0.2.64", "192.0.2.65"),
    svc("svc", "192.0.2.70", "2001:db8::70", zone=INNER),
    # Hostname endpoints inside our zones: the policy's CNAME, then the target's own policy.
    svc("chase", "sticky.gslb.example.com.", "shuffled.gslb.example.com.", "lb.example.net."),
    svc("fbchase", "192.0.2.66", all_down=AllDown.FALLBACK, fallback=("app.gslb.example.com.",)),
    # A health-driven TTL (answer/ttl.py): 8 under make_snapshot (see ADAPTIVE_STATUS).
    replace(
        svc("adaptive", "192.0.2.81", "192.0.2.82"),
        endpoints=tuple(
            replace(ep("adaptive.gslb.example.com.", a), check=Check("c", CheckType.HTTP, interval=5.0))
            for a in ("192.0.2.81", "192.0.2.82")
        ),
        ttl=300,
        ttl_range=TtlRange(5, 300),
    ),
)
DEAD = ("sf", "nx", "nd", "fb", "serveall", "fbchase")
CONFIG = Config(zones=(ZONE, INNER_ZONE, OTHER_ZONE), services=SERVICES)


TAKEN_AT = 1_700_000_000.0
# adaptive's endpoints: up with 1 of their fall 3 failures, checked 2.5 s before the snapshot, so
# TTL = (fall - failures) x interval - whole seconds since the check = (3 - 1) x 5 - 2 = 8.
ADAPTIVE_STATUS = EndpointStatus(healthy=True, failures=1, history=1, last_check=TAKEN_AT - 2.5)


def make_snapshot() -> Snapshot:
    """Every endpoint of the DEAD services is probed down; adaptive's endpoints are up, one with a
    failure in its window (its TTL is 8, answer/ttl.py)."""
    health = {e.key: False for s in SERVICES if s.label in DEAD for e in s.endpoints}
    adaptive = next(s for s in SERVICES if s.label == "adaptive")
    statuses = {e.key: ADAPTIVE_STATUS for e in adaptive.endpoints}
    health.update({e.key: True for e in adaptive.endpoints})
    return Snapshot(version=1, health=health, taken_at=TAKEN_AT, statuses=statuses)


def make_view(config: Config = CONFIG, snapshot: Snapshot | None = None) -> View:
    env = PolicyEnv(NoLocator(), {}, random.Random(1))
    return build_view(config, snapshot if snapshot is not None else make_snapshot(), env)


def make_responder(
    view: View | None = None, *, max_udp_payload: int = 1232, use_client_subnet: bool = True, seed: int = 7
) -> Responder:
    view = view if view is not None else make_view()
    table = compile_table(view, max_udp_payload=max_udp_payload, use_client_subnet=use_client_subnet)
    return Responder(table, view, random.Random(seed))


def query(
    name: str,
    rtype: str | int = "A",
    *,
    edns: int | None = None,
    payload: int = 1232,
    ecs: str | None = None,
    options: tuple[dns.edns.Option, ...] = (),
    rd: bool = True,
    cd: bool = False,
    dnssec_ok: bool = False,
    qid: int = 4242,
    rdclass: int = dns.rdataclass.IN,
) -> bytes:
    """A query's wire form. `edns` is the EDNS version (None: no OPT); `ecs` is "address/prefix"."""
    msg = dns.message.Message(id=qid)
    msg.flags = dns.flags.Flag((dns.flags.RD if rd else 0) | (dns.flags.CD if cd else 0))
    msg.find_rrset(
        msg.question,
        dns.name.from_text(name),
        dns.rdataclass.RdataClass.make(rdclass),
        dns.rdatatype.RdataType.make(rtype),
        create=True,
        force_unique=True,
    )
    opts = list(options)
    if ecs is not None:
        opts.append(dns.edns.ECSOption.from_text(ecs))
    if edns is not None or opts or dnssec_ok:
        msg.use_edns(edns or 0, dns.flags.DO if dnssec_ok else 0, payload, options=opts)
    return msg.to_wire()


def client(text: str) -> tuple[int, bool]:
    addr = ipaddress.ip_address(text)
    return int(addr), addr.version == 6


def ask_wire(responder: Responder, wire: bytes, *, src: str = CLIENT, tcp: bool = False) -> bytes | None:
    ip, v6 = client(src)
    return responder.handle(wire, ip, v6, tcp)


def ask(responder: Responder, wire: bytes, *, src: str = CLIENT, tcp: bool = False) -> dns.message.Message:
    """Send a query and parse the response (which must exist)."""
    out = ask_wire(responder, wire, src=src, tcp=tcp)
    assert out is not None
    return dns.message.from_wire(out)


def texts(msg: dns.message.Message, section: str = "answer") -> list[str]:
    """A section's records as presentation lines, in wire order."""
    return [line for rrset in getattr(msg, section) for line in rrset.to_text().splitlines()]


def fast_and_slow(responder: Responder, wire: bytes, *, seed: int = 1, fast_only: bool = True) -> bytes:
    """The responder's response to `wire`, after checking that the slow path (dnspython) writes the
    same bytes for it (with the table's identity and the config's version). `fast_only`: the C table
    must have answered it itself (where it is built), but for what C leaves to Python by design."""
    before = responder.slow_count
    fast = ask_wire(responder, wire)
    if fast_only and responder.native is not None:
        assert responder.slow_count == before or left_to_python(responder.table, wire)
    ip, v6 = client("203.0.113.5")
    slow = slow_response(
        wire,
        responder.view,
        ip,
        v6,
        tcp=False,
        max_udp_payload=1232,
        use_client_subnet=True,
        rng=random.Random(seed),
        seq=0,
        identity=responder.table.identity,
        version=responder.view.config.dns.version,
    )
    assert fast is not None
    assert fast == slow
    return fast


def oracle(
    view: View,
    table: AnswerTable,
    wire: bytes,
    ip: int,
    v6: bool = False,
    tcp: bool = False,
    *,
    seq: int = 0,
    rng: random.Random | None = None,
) -> bytes | None:
    """What Python answers to `wire` (Responder.handle without the C table, hook and guard): the slow
    path with the table's settings for the policy count `seq` and `rng`'s draws, or precheck's answer
    to a message whose structure breaks. The oracle the C table is held to byte for byte."""
    found = scan(wire)
    if not found[0]:
        return error_response(wire, found, table.max_udp_payload)
    return slow_answer(table, view, wire, ip, v6, tcp, rng=rng or random.Random(1), seq=seq)


def left_to_python(table: AnswerTable, wire: bytes) -> bool:
    """Whether C leaves `wire` to Python by design: an entry of the kind K_PYTHON (C writes NSID), or a
    name the table does not hold below a wildcard's parent (the slow path synthesizes its answer) or
    below a zone cut or DNAME of no referral C holds (answer/dname.py)."""
    question = dns.message.from_wire(wire).question[0]
    key = wire_key(question.name.to_text())
    if table.names.get(key) is not None:
        return entry_kind(table, wire) == ct.K_PYTHON
    suffixes = [key[at:] for at in label_offsets(key)[1:]]
    return any(b"\x01*" + s in table.names or s in table.delegated for s in suffixes)


def label_offsets(key: bytes) -> list[int]:
    """The offsets of a wire name's labels (the root left out)."""
    out, at = [], 0
    while key[at]:
        out.append(at)
        at += key[at] + 1
    return out


def well_formed(packet: bytes) -> bool:
    """Whether a packet is a plain query C may answer: flags without QR, TC or another opcode than QUERY,
    one question of class IN and no records but at most an OPT of version 0 whose options are ECS,
    COOKIE or NSID (dnspython reads it)."""
    try:
        msg = dns.message.from_wire(packet)
    except Exception:
        return False
    return (
        not packet[2] & 0xFA
        and len(msg.question) == 1
        and msg.question[0].rdclass == 1
        and not (msg.answer or msg.authority or msg.additional)
        and msg.edns <= 0
        and all(o.otype in (3, 8, 10) for o in msg.options)
    )


def entry_kind(table: AnswerTable, wire: bytes) -> int:
    """The C kind of the entry that answers `wire` (K_PYTHON: C leaves it to Python by design)."""
    question = dns.message.from_wire(wire).question[0]
    node = table.names.get(wire_key(question.name.to_text()))
    assert node is not None
    entry = node.types.get(question.rdtype, node.default)
    kind: int = ct._entry_spec(entry, 0, ct._Locators())[0]
    return kind


class FixedDraw(random.Random):
    """A random source whose every draw is `value` (the C table is given the same draw)."""

    def __init__(self, value: float) -> None:
        super().__init__(0)
        self.value = value

    def random(self) -> float:
        return self.value


def next_count(table: AnswerTable, wire: bytes) -> int:
    """The `seq` a new responder's slow path takes for `wire` (Responder._policy_seq): the next count of the
    table entry that answers the question, read without advancing it; 0 (the responder's own sequence)
    when no entry with a plan answers it."""
    question = dns.message.from_wire(wire).question[0]
    node = table.names.get(wire_key(question.name.to_text()))
    if node is None:
        return 0
    entry = node.types.get(question.rdtype, node.default)
    return int(repr(entry.counter)[6:-1]) if entry.pick is not None else 0
