"""Locality names are compiled into the fast path's tables: answered without the slow path, byte for
byte as the slow path would, and changed by a rebuild after a health change."""

from __future__ import annotations

import random

import dns.edns
import dns.flags
import dns.message
import dns.rdatatype

from gslbd.answer import View, build_view
from gslbd.config import load_config_text
from gslbd.model.config import Config
from gslbd.policy.locate import build_env
from gslbd.state.snapshot import Snapshot
from gslbd.wire import Responder, compile_table, slow_response

ORIGIN = "gslb.example.com."
APP = f"app.{ORIGIN}"
ZB = f"app.zone-b.region-1.{ORIGIN}"
ZC = f"app.zone-c.region-1.{ORIGIN}"
R1 = f"app.region-1.{ORIGIN}"
STICKY_ZB = f"sticky.zone-b.region-1.{ORIGIN}"
CLIENT = (0xCB007105, False)  # 203.0.113.5

CONFIG = f"""
version: 1
site: {{name: eu, locality: {{region: region-1, zone: zone-b}}}}
zones:
  - origin: {ORIGIN}
    negative_ttl: 45
    nameservers: [{{name: ns1.{ORIGIN}, address: 127.0.0.1}}]
services:
  - name: app
    ttl: 20
    locality_names: true
    endpoints:
      - {{address: 192.0.2.1}}
      - {{address: 2001:db8::1}}
      - {{address: 192.0.2.2, locality: {{region: region-1, zone: zone-c}}}}
      - {{address: 192.0.2.3, locality: {{region: region-1, zone: zone-c}}}}
  - name: sticky
    policy: hash
    locality_names: true
    endpoints:
      - {{address: 198.51.100.1}}
      - {{address: 198.51.100.2}}
      - {{address: 198.51.100.3, locality: {{region: region-1, zone: zone-c}}}}
"""


def make_view(config: Config, down: tuple[str, ...] = ()) -> View:
    health = {(s.name, e.address): False for s in config.services for e in s.endpoints if e.address in down}
    return build_view(config, Snapshot(1, health), build_env(config, random.Random(1)))


def responder_for(view: View) -> Responder:
    return Responder(
        compile_table(view, max_udp_payload=1232, use_client_subnet=True), view, random.Random(3)
    )


def query(name: str, rtype: str, ecs: str | None = None) -> bytes:
    msg = dns.message.make_query(name, dns.rdatatype.from_text(rtype), use_edns=0 if ecs else None)
    msg.id = 77
    msg.flags &= ~dns.flags.RD
    if ecs is not None:
        msg.use_edns(0, 0, 1232, options=[dns.edns.ECSOption.from_text(ecs)])
    return msg.to_wire()


def answer_lines(wire: bytes | None) -> list[str]:
    assert wire is not None
    msg = dns.message.from_wire(wire)
    return [line for rrset in msg.answer for line in rrset.to_text().splitlines()]


def test_every_locality_name_is_answered_by_the_fast_path_exactly_as_the_slow_path_answers() -> None:
    config = load_config_text(CONFIG)
    for down in ((), ("192.0.2.1", "2001:db8::1"), ("192.0.2.1", "192.0.2.2", "192.0.2.3", "2001:db8::1")):
        view = make_view(config, down)
        names = [
            n
            for n in view.names
            if n.count(".") > ORIGIN.count(".") + 1 and n.split(".")[0] in ("app", "sticky")
        ]
        assert set(names) == {
            ZB,
            ZC,
            R1,
            STICKY_ZB,
            f"sticky.zone-c.region-1.{ORIGIN}",
            f"sticky.region-1.{ORIGIN}",
        }
        responder = responder_for(view)
        for name in names:
            for rtype in ("A", "AAAA", "CNAME", "MX", "ANY"):
                for ecs in (None, "10.1.2.0/24"):
                    wire = query(name, rtype, ecs)
                    # A fresh responder's first answer (query counter 0) is what the slow path
                    # answers with seq 0.
                    fast = responder_for(view).handle(wire, *CLIENT)
                    slow = slow_response(
                        wire,
                        view,
                        *CLIENT,
                        tcp=False,
                        max_udp_payload=1232,
                        use_client_subnet=True,
                        rng=random.Random(3),
                        seq=0,
                    )
                    assert fast == slow, (name, rtype, ecs, down)
                    assert responder.handle(wire, *CLIENT) is not None
        assert responder.slow_count == 0, down


def test_a_rebuild_after_a_health_change_changes_the_zone_answer_on_the_fast_path() -> None:
    config = load_config_text(CONFIG)
    view = make_view(config)
    responder = responder_for(view)
    assert answer_lines(responder.handle(query(ZB, "A"), *CLIENT)) == [f"{ZB} 20 IN A 192.0.2.1"]
    # The zone's shard fails: the next table answers the CNAME chain to the region's shards.
    down = make_view(config, ("192.0.2.1", "2001:db8::1"))
    responder.swap(compile_table(down, max_udp_payload=1232, use_client_subnet=True), down)
    assert answer_lines(responder.handle(query(ZB, "A"), *CLIENT)) == [
        f"{ZB} 20 IN CNAME {R1}",
        f"{R1} 20 IN A 192.0.2.2",
        f"{R1} 20 IN A 192.0.2.3",
    ]
    assert answer_lines(responder.handle(query(ZB, "A"), *CLIENT))[1:] == [
        f"{R1} 20 IN A 192.0.2.3",
        f"{R1} 20 IN A 192.0.2.2",
    ]
    # It recovers: its own address again.
    responder.swap(compile_table(view, max_udp_payload=1232, use_client_subnet=True), view)
    assert answer_lines(responder.handle(query(ZB, "A"), *CLIENT)) == [f"{ZB} 20 IN A 192.0.2.1"]
    assert responder.slow_count == 0


def test_ecs_scope_is_the_source_prefix_for_hash_levels_and_zero_for_others() -> None:
    config = load_config_text(CONFIG)
    responder = responder_for(make_view(config))

    def scope(name: str) -> int:
        wire = responder.handle(query(name, "A", "10.1.2.0/24"), *CLIENT)
        assert wire is not None
        (option,) = dns.message.from_wire(wire).options
        assert isinstance(option, dns.edns.ECSOption)
        return option.scopelen

    assert scope(STICKY_ZB) == 24
    assert scope(ZB) == 0
    assert responder.slow_count == 0
