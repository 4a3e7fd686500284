"""The composition root in-process: App binds, answers, swaps snapshots and configs, and stops."""

from __future__ import annotations

import asyncio
import random

import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import pytest
from dns_config import CONFIG, ZONE
from health_app_support import wait_for

from gslbd.app import App
from gslbd.clock import FakeClock
from gslbd.config import load_config_text
from gslbd.metrics import REGISTRY
from gslbd.server import build as answer_build
from gslbd.state.status import EndpointStatus
from gslbd.types import AdminState
from gslbd.wire import ctable, wire_key

TEXT = CONFIG.replace("@LISTEN@", '["127.0.0.1:0"]')


def ask(port: int, name: str, rtype: str = "A", *, tcp: bool = False) -> dns.message.Message:
    query = dns.message.make_query(name, dns.rdatatype.from_text(rtype))
    if tcp:
        return dns.query.tcp(query, "127.0.0.1", port=port, timeout=3)
    return dns.query.udp(query, "127.0.0.1", port=port, timeout=3)


def addresses(reply: dns.message.Message) -> list[str]:
    return sorted(rd.to_text() for rrset in reply.answer for rd in rrset)


def port_of(app: App) -> int:
    return int(app.bound[0].rsplit(":", 1)[1])


def test_app_answers_and_applies_snapshots_and_reloads() -> None:
    async def body() -> None:
        app = App(load_config_text(TEXT), FakeClock(), random.Random(7))
        await app.start()
        try:
            assert app.running
            port = port_of(app)
            assert app.bound == [f"udp://127.0.0.1:{port}", f"tcp://127.0.0.1:{port}"]
            first = await asyncio.to_thread(ask, port, f"app.{ZONE}")
            assert addresses(first) == ["192.0.2.1", "192.0.2.2"]

            # An admin forces one endpoint down: the very next answer leaves it out.
            await app.set_admin(f"app.{ZONE}", "192.0.2.1", AdminState.DOWN)
            assert app.snapshot.admin == {(f"app.{ZONE}", "192.0.2.1"): AdminState.DOWN}
            for tcp in (False, True):
                reply = await asyncio.to_thread(ask, port, f"app.{ZONE}", tcp=tcp)
                assert addresses(reply) == ["192.0.2.2"]

            # Verdicts: both down -> all_down serve_all answers those not forced down.
            await app.set_admin(f"app.{ZONE}", "192.0.2.1", AdminState.OBEY)
            for address in ("192.0.2.1", "192.0.2.2"):
                app.book.record((f"app.{ZONE}", address), EndpointStatus(healthy=False))
            app.refresh()
            both = app.snapshot
            assert addresses(await asyncio.to_thread(ask, port, f"app.{ZONE}")) == ["192.0.2.1", "192.0.2.2"]

            # A new config keeps the verdicts and answers its own records.
            app.reload(load_config_text(TEXT.replace("hello from gslbd", "new config")))
            txt = await asyncio.to_thread(ask, port, f"info.{ZONE}", "TXT")
            assert [rd.to_text() for rd in txt.answer[0]] == ['"new config"']
            assert app.snapshot.admin == both.admin
            assert app.generation.number > 1
        finally:
            await app.stop()
        assert not app.running
        assert app.bound == []
        assert app.stats.udp_queries == 4
        assert app.stats.tcp_queries == 1

    asyncio.run(body())


def test_app_views_are_ready_before_start_for_explain() -> None:
    app = App(load_config_text(TEXT), FakeClock(), random.Random(1))
    assert not app.running
    answer = app.view.resolve(f"geo.{ZONE}", "A", 0x0A020304, False, random.Random(1), 0)
    assert answer.rcode == dns.rcode.NOERROR
    assert [rr.rdata for rr in answer.answer] == ["198.51.100.32"]


def test_app_start_fails_cleanly_when_an_address_cannot_be_bound() -> None:
    async def body() -> None:
        app = App(load_config_text(CONFIG.replace("@LISTEN@", '["127.0.0.1:0", "192.0.2.1:53"]')))
        with pytest.raises(OSError):
            await app.start()
        assert not app.running

    asyncio.run(body())


def test_a_large_views_services_are_answered_before_they_are_built_then_built_in_steps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past EAGER_NAMES names the first view defers most plain services (answer/build.py Deferred):
    the app answers them over DNS at once (the slow path builds a service's names when asked), an
    admin change to a deferred service reaches its answer, and the event loop builds and compiles the
    rest until the view and the table are whole and every service is counted."""
    monkeypatch.setattr(answer_build, "EAGER_NAMES", 0)
    services = "\n".join(
        f"  - {{name: p{i}, endpoints: [{{address: 192.0.2.{10 + i}}}, {{address: 192.0.2.{50 + i}}}]}}"
        for i in range(12)
    )
    text = TEXT.replace("services:\n", f"services:\n{services}\n", 1)

    async def body() -> None:
        app = App(load_config_text(text), FakeClock(), random.Random(7))
        deferred = app.generation.view.deferred
        assert deferred is not None and f"p11.{ZONE}" in deferred.services
        assert len(app.generation.counts) < len(app.config.services)
        await app.start()
        try:
            port = port_of(app)
            reply = await asyncio.to_thread(ask, port, f"p11.{ZONE}")
            assert addresses(reply) == ["192.0.2.21", "192.0.2.61"]
            await app.set_admin(f"p10.{ZONE}", "192.0.2.20", AdminState.DOWN)
            reply = await asyncio.to_thread(ask, port, f"p10.{ZONE}")
            assert addresses(reply) == ["192.0.2.60"]
            await wait_for(lambda: app.generation.view.deferred is None and not app.generation.table.partial)
            assert len(app.generation.counts) == len(app.config.services)
            assert app.generation.counts[f"p10.{ZONE}"].up == 1
            assert REGISTRY.get_sample_value("gslbd_dns_names_pending") == 0
            reply = await asyncio.to_thread(ask, port, f"p11.{ZONE}")
            assert addresses(reply) == ["192.0.2.21", "192.0.2.61"]
        finally:
            await app.stop()

    asyncio.run(body())


def test_a_large_view_is_compiled_in_steps_on_the_event_loop_after_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past EAGER_NAMES names the first table leaves the services' names out (server/build.py): the
    app answers them from the view at once and compiles them between other work until none is left."""
    monkeypatch.setattr(answer_build, "EAGER_NAMES", 0)

    async def body() -> None:
        app = App(load_config_text(TEXT), FakeClock(), random.Random(7))
        assert app.generation.table.partial
        key = wire_key(f"app.{ZONE}")
        assert key not in app.generation.table.names
        first = app.generation.number
        await app.start()
        try:
            await wait_for(lambda: not app.generation.table.partial)
            assert REGISTRY.get_sample_value("gslbd_dns_names_pending") == 0
            assert app.generation.number > first
            assert app.responder.table is app.generation.table
            assert key in app.responder.table.names
            reply = await asyncio.to_thread(ask, port_of(app), f"app.{ZONE}")
            assert addresses(reply) == ["192.0.2.1", "192.0.2.2"]
        finally:
            await app.stop()

    asyncio.run(body())


@pytest.mark.parametrize("built", [True, False], ids=["c-table", "pure-python"])
def test_without_the_c_extension_the_start_says_once_that_it_answers_in_pure_python(
    built: bool, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    if built and not ctable.AVAILABLE:
        pytest.skip("gslbd.wire._cfast is not compiled here")
    monkeypatch.setattr(ctable, "AVAILABLE", built)
    monkeypatch.delenv(ctable.ENV_SWITCH, raising=False)

    async def body() -> None:
        app = App(load_config_text(TEXT), FakeClock(), random.Random(7))
        await app.start()
        try:
            reply = await asyncio.to_thread(ask, port_of(app), f"app.{ZONE}")  # answered either way
            assert addresses(reply) == ["192.0.2.1", "192.0.2.2"]
            assert (app.responder.native is not None) == built
        finally:
            await app.stop()

    with caplog.at_level("WARNING", logger="gslbd.app.core"):
        asyncio.run(body())
    said = [r.getMessage() for r in caplog.records if "pure Python" in r.getMessage()]
    expected = (
        "the C extension gslbd.wire._cfast is not built here (no C compiler when gslbd was installed): "
        "every query is answered in pure Python, slowly; install a C compiler and reinstall gslbd"
    )
    assert said == ([] if built else [expected])
