"""Load figures in the exchange zone: a site publishes the used figure (and whether shedding keeps it
out) of each own endpoint as TXT under `load.`, a peer reads them back over AXFR and IXFR, and the peer
book hands them to the learned endpoints (FakeClock). Garbled strings are counted and ignored."""

from __future__ import annotations

import logging
import random

import pytest
from exchange_support import APP, SERVICES, ZONE, config, env
from test_exchange_votes import APEX, PEER, QUORUM, T0, US, read, transferred

from gslbd.answer.exchange_names import load_rdata, published, read_load, republished
from gslbd.clock import FakeClock
from gslbd.exchange.peerbook import PeerBook
from gslbd.exchange.peerstate import PeerAnswer
from gslbd.exchange.xfrclient import _Builder
from gslbd.exchange.xfrserve import ExchangeZones
from gslbd.exchange.xfrwire import AXFR, IXFR, transfer_query
from gslbd.metrics import PEER_LOAD_GARBAGE
from gslbd.model.load import LoadState
from gslbd.server.build import compile_answers
from gslbd.state.book import HealthBook
from gslbd.state.snapshot import Snapshot
from gslbd.wire import Responder

EU, EU6 = "192.0.2.1", "2001:db8::1"
PEERS = QUORUM.replace("  quorum: {votes: 2}\n", "")  # us at 127.0.0.3 (PEER), ap; no quorum
LOADED = SERVICES.replace(
    "policy: failover\n    failover_order: [eu, us, ap]",
    "policy: weighted\n    weight_from: load\n    load: {url: 'http://{address}:9100/load'}",
)


@pytest.mark.parametrize(
    ("address", "used", "out", "text"),
    [
        ("192.0.2.10", 0.42, False, "192.0.2.10=0.420"),
        ("192.0.2.11", 0.9504, True, "192.0.2.11=0.950,out"),
        ("2001:db8::1", 1.7, False, "2001:db8::1=1.700"),
        ("192.0.2.12", 0.0, False, "192.0.2.12=0.000"),
    ],
)
def test_a_load_figure_is_published_with_three_decimals_and_read_back(
    address: str, used: float, out: bool, text: str
) -> None:
    assert load_rdata(address, used, out) == text
    assert read_load(text) == (address, LoadState(used=round(used, 3), out=out))


@pytest.mark.parametrize(
    "text",
    [
        "junk",
        "=0.5",
        "192.0.2.10=",
        "192.0.2.10",
        "192.0.2.10=-0.5",
        "192.0.2.10=nan",
        "192.0.2.10=inf",
        "192.0.2.10=1e3",
        "192.0.2.10= 0.5",
        "192.0.2.10=0.5,in",
        "192.0.2.10=0.5,out,out",
        "192.0.2.10=0x10",
        "192.0.2.10=0.5,",
    ],
)
def test_a_garbled_load_string_is_not_a_figure(text: str) -> None:
    assert read_load(text) is None


def test_own_figures_are_transferred_and_a_moved_figure_comes_as_an_ixfr_of_one_string() -> None:
    cfg = config(services=LOADED, peers=PEERS)
    loads = {(APP, EU): LoadState(used=0.3), (APP, EU6): LoadState(used=0.95, out=True)}
    # a peer site's endpoint (us) has a figure here only as learned: it is not this site's to publish
    snapshot = Snapshot(evaluated_at=T0, loads={**loads, (APP, US): LoadState(used=0.5)})
    view, table = compile_answers(cfg, snapshot, env(cfg))
    responder = Responder(table, view, random.Random(1))
    before = published(cfg, snapshot)
    assert before[ZONE]["loads-app.gslb.test."] == (f"{EU}=0.300", f"{EU6}=0.950,out")
    zones = ExchangeZones(cfg, before, T0, lambda *a: None)
    responder.on_exchange = zones.handle

    data = responder.handle(transfer_query(APEX, AXFR, 1), PEER, False, True) or b""
    records = transferred(data)
    assert ("app.load." + APEX, "TXT", f'"{EU}=0.300"') in records
    copy = read(_Builder(APEX, ZONE, None), data, 1)
    assert copy.loads == {APP: (f"{EU}=0.300", f"{EU6}=0.950,out")}
    assert copy.targets[APP] == (EU, EU6)

    moved = {**loads, (APP, EU): LoadState(used=0.4)}
    service = next(s for s in cfg.services if s.name == APP)
    after, changed = republished(before, cfg, Snapshot(evaluated_at=T0, loads=moved), [service])
    assert changed == [ZONE]
    zones.update(after, changed, T0 + 1)
    diff = responder.handle(transfer_query(APEX, IXFR, 2, copy.serial), PEER, False, True) or b""
    builder = _Builder(APEX, ZONE, copy)
    new = read(builder, diff, 2)
    assert builder.kind == "ixfr"
    assert new.loads == {APP: (f"{EU}=0.400", f"{EU6}=0.950,out")}


def test_a_figure_inside_the_dead_band_does_not_step_the_exchange_serial() -> None:
    # the used figure only moves past the dead band (policy/load.py); what is published is that figure
    cfg = config(services=LOADED, peers=PEERS)
    service = next(s for s in cfg.services if s.name == APP)
    snapshot = Snapshot(evaluated_at=T0, loads={(APP, EU): LoadState(smoothed=0.3, used=0.3, raw=0.3)})
    before = published(cfg, snapshot)
    zones = ExchangeZones(cfg, before, T0, lambda *a: None)
    serial = zones.serial(ZONE)
    noisy = Snapshot(evaluated_at=T0, loads={(APP, EU): LoadState(smoothed=0.303, used=0.3, raw=0.31)})
    after, changed = republished(before, cfg, noisy, [service])
    assert changed == [] and after == before
    zones.update(after, changed, T0 + 1)
    assert zones.serial(ZONE) == serial


def test_a_peers_figures_go_with_its_learned_endpoints_and_garbage_is_counted_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    book = PeerBook(config(services=LOADED, peers=PEERS), clock)
    garbage = PEER_LOAD_GARBAGE.labels(peer="us")
    counted = garbage._value.get()
    texts = (f"{US}=0.800", "junk", "203.0.113.9=nan")
    with caplog.at_level(logging.WARNING, logger="gslbd.exchange.peerbook"):
        assert book.answer("us", PeerAnswer({APP: (US,)}, clock.wall(), loads={APP: texts}))
        book.answer("us", PeerAnswer({APP: (US,)}, clock.wall(), loads={APP: texts}))  # unchanged
    assert book.loads() == {(APP, US): LoadState(used=0.8)}
    assert garbage._value.get() - counted == 2
    lines = [r.getMessage() for r in caplog.records if "load figures" in r.getMessage()]
    assert lines == ["peer us publishes 2 load figures this site cannot read (ignored), e.g. 'junk'"]

    # a figure for an address the peer does not publish is no learned endpoint's
    assert book.answer("us", PeerAnswer({APP: (US,)}, clock.wall(), loads={APP: (f"{US}=0.950,out",)}))
    assert book.loads() == {(APP, US): LoadState(used=0.95, out=True)}

    # stale: its endpoints leave, and their figures with them
    clock.advance(31)
    assert book.evaluate()
    assert book.loads() == {}


def test_peer_figures_touch_their_service_and_survive_a_retain_of_own_loads() -> None:
    book = HealthBook()
    book.set_peer_loads({(APP, US): LoadState(used=0.8)})
    assert book.snapshot().loads[(APP, US)] == LoadState(used=0.8)
    book.retain_loads(set())  # a reload that keeps no own load source
    assert book.snapshot().loads[(APP, US)] == LoadState(used=0.8)
    book.set_peer_loads({})
    assert (APP, US) not in book.snapshot().loads
