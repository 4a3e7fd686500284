"""What a site publishes (localtargets-*, heartbeat-*) and what its policies run on (the merged view)."""

from __future__ import annotations

import random
from types import MappingProxyType

from exchange_support import APP, config, env

from gslbd.answer import Rr, build_view
from gslbd.answer.exchange_names import changed_zones, heartbeat_name, localtargets_name, published
from gslbd.clock import FakeClock
from gslbd.exchange import PeerAnswer, PeerBook
from gslbd.model.config import Config
from gslbd.state.snapshot import Snapshot
from gslbd.types import AdminState, Rcode


def ask(cfg: Config, snapshot: Snapshot, name: str, rtype: str = "A") -> tuple[int, list[str]]:
    view = build_view(cfg, snapshot, env(cfg))
    answer = view.resolve(name, rtype, 0, False, random.Random(1), 0)
    return answer.rcode, [rr.rdata for rr in answer.answer]


def with_peers(cfg: Config, **views: dict[str, tuple[str, ...]]) -> Snapshot:
    book = PeerBook(cfg, FakeClock())
    for peer, targets in views.items():
        book.answer(peer, PeerAnswer(targets))
    return Snapshot(version=2, peer_endpoints=book.endpoints())


def test_localtargets_answer_this_sites_healthy_endpoints_per_family() -> None:
    cfg = config()
    assert ask(cfg, Snapshot(), "localtargets-app.gslb.test.", "A") == (Rcode.NOERROR, ["192.0.2.1"])
    assert ask(cfg, Snapshot(), "localtargets-app.gslb.test.", "AAAA") == (Rcode.NOERROR, ["2001:db8::1"])


def test_localtargets_leave_out_endpoints_that_are_down_or_of_other_sites() -> None:
    cfg = config()
    # web: 192.0.2.3 is admin down in the config; app's us and ap endpoints are not this site's.
    assert ask(cfg, Snapshot(), "localtargets-web.gslb.test.") == (Rcode.NOERROR, ["192.0.2.2"])
    down = Snapshot(health=MappingProxyType({(APP, "192.0.2.1"): False}))
    assert ask(cfg, down, "localtargets-app.gslb.test.", "A") == (Rcode.NOERROR, [])  # NODATA: AAAA is up
    assert ask(cfg, down, "localtargets-app.gslb.test.", "AAAA") == (Rcode.NOERROR, ["2001:db8::1"])


def test_localtargets_name_does_not_exist_when_the_site_has_no_healthy_endpoint() -> None:
    cfg = config()
    admin = {(APP, "192.0.2.1"): AdminState.DOWN, (APP, "2001:db8::1"): AdminState.DOWN}
    snapshot = Snapshot(admin=MappingProxyType(admin))
    assert ask(cfg, snapshot, "localtargets-app.gslb.test.") == (Rcode.NXDOMAIN, [])
    # A site with no endpoint of its own for a service publishes nothing for it.
    us = config("us")
    us_admin = {(APP, "198.51.100.1"): AdminState.DOWN}
    assert ask(us, Snapshot(admin=MappingProxyType(us_admin)), "localtargets-app.gslb.test.") == (
        Rcode.NXDOMAIN,
        [],
    )


def test_heartbeat_is_a_txt_record_with_the_whole_unix_seconds_of_the_last_evaluation() -> None:
    cfg = config()
    view = build_view(cfg, Snapshot(evaluated_at=1_700_000_123.9), env(cfg))
    answer = view.resolve("heartbeat-eu.gslb.test.", "TXT", 0, False, random.Random(1), 0)
    assert answer.answer == (Rr("heartbeat-eu.gslb.test.", "TXT", 0, '"1700000123"'),)
    other = view.resolve("heartbeat-us.gslb.test.", "TXT", 0, False, random.Random(1), 0)
    assert other.rcode == Rcode.NXDOMAIN  # a site publishes only its own heartbeat


def test_publication_names_follow_k8gb() -> None:
    cfg = config()
    assert localtargets_name(cfg.services[0]) == "localtargets-app.gslb.test."
    assert heartbeat_name("eu", "gslb.test.") == "heartbeat-eu.gslb.test."


def test_published_and_changed_zones_tell_when_to_notify() -> None:
    cfg = config()
    before = published(cfg, Snapshot())
    assert before == {
        "gslb.test.": {
            "localtargets-app.gslb.test.": ("192.0.2.1", "2001:db8::1"),
            "localtargets-web.gslb.test.": ("192.0.2.2",),
        }
    }
    # The first build's shortcut (no verdict, no override) publishes what the general rule does.
    unrelated = Snapshot(health=MappingProxyType({("other.gslb.test.", "192.0.2.9"): True}))
    assert not unrelated.plain and published(cfg, unrelated) == before
    after = published(cfg, Snapshot(health=MappingProxyType({(APP, "192.0.2.1"): False})))
    assert changed_zones(before, after) == ["gslb.test."]
    assert changed_zones(before, published(cfg, Snapshot(version=9))) == []


def test_endpoints_of_peer_sites_count_only_while_their_site_publishes_them() -> None:
    cfg = config("ap")  # ap's own endpoint is last in failover order
    assert ask(cfg, Snapshot(), APP) == (Rcode.NOERROR, ["203.0.113.1"])
    assert ask(cfg, with_peers(cfg, us={APP: ("198.51.100.1",)}), APP) == (Rcode.NOERROR, ["198.51.100.1"])


def test_failover_answers_the_first_site_in_order_that_publishes_anything() -> None:
    cfg = config("ap")
    both = with_peers(cfg, eu={APP: ("192.0.2.1",)}, us={APP: ("198.51.100.1",)})
    assert ask(cfg, both, APP) == (Rcode.NOERROR, ["192.0.2.1"])
    eu_gone = with_peers(cfg, eu={}, us={APP: ("198.51.100.1",)})
    assert ask(cfg, eu_gone, APP) == (Rcode.NOERROR, ["198.51.100.1"])


def test_without_peers_endpoints_of_other_sites_are_candidates_as_configured() -> None:
    admin = {(APP, "192.0.2.1"): AdminState.DOWN, (APP, "2001:db8::1"): AdminState.DOWN}
    snapshot = Snapshot(admin=MappingProxyType(admin))
    alone = config("eu", peers="")
    assert alone.peers is None
    assert ask(alone, snapshot, APP) == (Rcode.NOERROR, ["198.51.100.1"])
    # With peers, us's endpoint is a candidate only once us publishes it.
    assert ask(config("eu"), snapshot, APP) == (Rcode.NOERROR, [])
