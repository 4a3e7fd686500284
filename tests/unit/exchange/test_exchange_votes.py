"""The votes channel of peers.quorum: a site's raw verdicts in its exchange zone (TXT under `votes.`),
read back by a peer over AXFR and IXFR, and the peer book's votes and partition state (FakeClock)."""

from __future__ import annotations

import random

import dns.message
import dns.rdatatype
from exchange_support import APP, SERVICES, ZONE, config, env

from gslbd.answer.exchange_names import published, republished
from gslbd.app.reconcile import probed_endpoints, vote_owners
from gslbd.clock import FakeClock
from gslbd.exchange.peerbook import PeerBook
from gslbd.exchange.peerstate import PeerAnswer
from gslbd.exchange.xfrclient import ZoneCopy, _Builder
from gslbd.exchange.xfrserve import ExchangeZones
from gslbd.exchange.xfrwire import AXFR, IXFR, transfer_query
from gslbd.server.build import compile_answers
from gslbd.state.snapshot import Snapshot
from gslbd.wire import Responder
from gslbd.wire.transfer import Framed

APEX = "_gslbd-exchange-eu.gslb.test."
PEER = 0x7F000003  # 127.0.0.3: us's nameserver
T0 = 1_700_000_000.0
QUORUM = (
    "  interval: 5s\n  stale_after: 30s\n  timeout: 1s\n  quorum: {votes: 2}\n  sites:\n"
    '    - {name: us, nameservers: ["127.0.0.3:5300"]}\n'
    '    - {name: ap, nameservers: ["127.0.0.4:5300"]}\n'
)
EU, US = "192.0.2.1", "198.51.100.1"
SERVICES_CHECKED = SERVICES.replace("policy: failover", "policy: failover\n    check: {type: tcp, port: 80}")


def frames(data: bytes) -> list[bytes]:
    assert isinstance(data, Framed)
    out, pos = [], 0
    while pos < len(data):
        size = int.from_bytes(data[pos : pos + 2], "big")
        out.append(data[pos + 2 : pos + 2 + size])
        pos += 2 + size
    return out


def transferred(data: bytes) -> set[tuple[str, str, str]]:
    """(owner, type, rdata) of every record of a framed transfer."""
    return {
        (rrset.name.to_text(), dns.rdatatype.to_text(rrset.rdtype), rd.to_text())
        for message in frames(data)
        for rrset in dns.message.from_wire(message, xfr=True).answer
        for rd in rrset
    }


def read(builder: _Builder, data: bytes, qid: int) -> ZoneCopy:
    for message in frames(data):
        builder.feed(message, qid, None)
    assert builder.done
    return builder.result()


def test_a_sites_votes_are_transferred_and_a_flipped_vote_comes_as_an_ixfr_of_one_string() -> None:
    cfg = config(peers=QUORUM)
    votes = {(APP, EU): True, (APP, US): False}
    snapshot = Snapshot(evaluated_at=T0, health=votes, votes=votes)
    view, table = compile_answers(cfg, snapshot, env(cfg))
    responder = Responder(table, view, random.Random(1))
    before = published(cfg, snapshot)
    assert before[ZONE]["votes-app.gslb.test."] == (f"{EU}=up", f"{US}=down")
    zones = ExchangeZones(cfg, before, T0, lambda *a: None)
    responder.on_exchange = zones.handle

    data = responder.handle(transfer_query(APEX, AXFR, 1), PEER, False, True) or b""
    records = transferred(data)
    assert ("app.votes." + APEX, "TXT", f'"{US}=down"') in records
    copy = read(_Builder(APEX, ZONE, None), data, 1)
    assert copy.votes == {APP: (f"{EU}=up", f"{US}=down")}
    assert copy.targets[APP] == (EU, "2001:db8::1")  # the A/AAAA publication is as before

    flipped = {(APP, EU): True, (APP, US): True}
    after_snapshot = Snapshot(evaluated_at=T0, health=flipped, votes=flipped)
    service = next(s for s in cfg.services if s.name == APP)
    after, changed = republished(before, cfg, after_snapshot, [service])
    assert changed == [ZONE]
    zones.update(after, changed, T0 + 1)
    diff = responder.handle(transfer_query(APEX, IXFR, 2, copy.serial), PEER, False, True) or b""
    builder = _Builder(APEX, ZONE, copy)
    new = read(builder, diff, 2)
    assert builder.kind == "ixfr"
    assert new.votes == {APP: (f"{EU}=up", f"{US}=up")}


def test_a_peer_publishing_no_votes_casts_none_and_a_fresh_one_is_read_by_endpoint() -> None:
    clock = FakeClock()
    book = PeerBook(config(peers=QUORUM), clock)
    book.answer("us", PeerAnswer({APP: (US,)}, clock.wall()))  # an older peer: addresses only
    book.answer("ap", PeerAnswer({}, clock.wall(), votes={APP: (f"{US}=down", f"{EU}=up", "junk")}))
    assert book.votes() == {"ap": {(APP, US): False, (APP, EU): True}}  # "junk" is no vote


def test_a_site_that_hears_no_peer_is_partitioned_and_keeps_their_last_views_past_stale_after() -> None:
    clock = FakeClock()
    book = PeerBook(config(peers=QUORUM), clock)
    book.answer("us", PeerAnswer({APP: (US,)}, clock.wall()))
    book.answer("ap", PeerAnswer({}, clock.wall()))
    assert not book.partitioned
    book.failure("us", "timeout", 1)
    assert not book.partitioned  # it still hears ap: two of three sites
    clock.advance(31)  # past stale_after
    assert book.failure("ap", "timeout", 1)  # partitioned now: a change
    assert book.partitioned
    assert [e.address for e in book.endpoints()[APP]] == [US]  # fail static: us's last view counts
    assert book.answer("ap", PeerAnswer({}, clock.wall()))
    assert not book.partitioned
    book.failure("us", "timeout", 1)
    assert APP not in book.endpoints()  # heard again: us is stale as ever


def test_without_a_quorum_a_site_is_never_partitioned_and_stale_peers_drop_out() -> None:
    clock = FakeClock()
    peers = QUORUM.replace("  quorum: {votes: 2}\n", "")
    book = PeerBook(config(peers=peers), clock)
    book.answer("us", PeerAnswer({APP: (US,)}, clock.wall()))
    clock.advance(31)
    book.failure("us", "timeout", 1)
    book.failure("ap", "timeout", 1)
    assert not book.partitioned
    assert APP not in book.endpoints()


def test_with_a_quorum_every_endpoint_is_probed_here_but_a_remote_push_check_is_not() -> None:
    checked = SERVICES_CHECKED
    cfg = config("eu", services=checked, peers=QUORUM)
    probed = probed_endpoints(cfg)
    assert sorted(address for _, address in probed) == [
        "192.0.2.1",
        "198.51.100.1",
        "2001:db8::1",
        "203.0.113.1",
    ]
    owners = vote_owners(cfg, probed.values())
    assert owners[(APP, US)] == "us" and owners[(APP, EU)] == "eu"
    pushed = config(
        "eu", services=checked.replace("{type: tcp, port: 80}", "{type: push, ttl: 30s}"), peers=QUORUM
    )
    assert sorted(address for _, address in probed_endpoints(pushed)) == ["192.0.2.1", "2001:db8::1"]
    without = config("eu", services=checked, peers=QUORUM.replace("  quorum: {votes: 2}\n", ""))
    assert sorted(address for _, address in probed_endpoints(without)) == ["192.0.2.1", "2001:db8::1"]


def test_with_a_quorum_a_stale_peers_checked_endpoints_are_left_to_the_votes() -> None:
    clock = FakeClock()
    book = PeerBook(config(services=SERVICES_CHECKED, peers=QUORUM), clock)
    book.answer("us", PeerAnswer({APP: (US, "198.51.100.77")}, clock.wall()))  # .77 is not configured
    book.answer("ap", PeerAnswer({}, clock.wall()))
    clock.advance(31)  # us is stale; ap answers: a majority is heard
    book.failure("us", "timeout", 1)
    book.answer("ap", PeerAnswer({}, clock.wall()))
    assert not book.partitioned
    # us's checked endpoint stays a candidate (every site votes on it); the unchecked one is gone
    assert [e.address for e in book.endpoints()[APP]] == [US]
