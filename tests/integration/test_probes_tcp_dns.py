"""tcp and dns probes against real loopback servers (an asyncio TCP server, a dnspython-answered UDP
server, and a gslbd process)."""

from __future__ import annotations

import asyncio

from gslbd_harness import Running
from probe_support import closed_port, dns_server, endpoint, tcp_server

from gslbd.health.probes import get_probe
from gslbd.model.service import Endpoint
from gslbd.state.status import ProbeResult
from gslbd.types import CheckType

TCP = CheckType.TCP
DNS = CheckType.DNS


async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Greets, then echoes one line in upper case."""
    writer.write(b"+OK ready\r\n")
    line = await reader.readline()
    writer.write(line.upper())
    await writer.drain()
    writer.close()


def run(ep: Endpoint) -> ProbeResult:
    assert ep.check is not None
    return asyncio.run(get_probe(ep.check.type).run(ep, ep.check))


def probe_echo(**check: object) -> ProbeResult:
    async def body() -> ProbeResult:
        async with tcp_server(echo) as port:
            ep = endpoint(type=TCP, port=port, **check)
            assert ep.check is not None
            return await get_probe(TCP).run(ep, ep.check)

    return asyncio.run(body())


def test_tcp_connect_alone_is_healthy() -> None:
    assert (probe_echo().ok, probe_echo().detail) == (True, "connected")


def test_tcp_expect_reads_the_reply_until_the_text_appears() -> None:
    result = probe_echo(expect="+OK")
    assert (result.ok, result.detail) == (True, "reply contains '+OK'")


def test_tcp_send_then_expect_checks_the_answer_to_what_was_sent() -> None:
    result = probe_echo(send="ping\n", expect="PING")
    assert (result.ok, result.detail) == (True, "reply contains 'PING'")


def test_tcp_a_reply_without_the_expected_text_fails() -> None:
    result = probe_echo(send="ping\n", expect="PONG")
    assert (result.ok, result.detail) == (False, "reply does not contain 'PONG'")


def test_tcp_a_closed_port_fails_with_connection_refused() -> None:
    result = run(endpoint(type=TCP, port=closed_port()))
    assert (result.ok, result.detail) == (False, "connection refused")


def test_tcp_a_silent_server_times_out_waiting_for_the_expected_text() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(5)

    async def body() -> ProbeResult:
        async with tcp_server(silent) as port:
            ep = endpoint(type=TCP, port=port, expect="+OK", timeout=0.2)
            assert ep.check is not None
            return await get_probe(TCP).run(ep, ep.check)

    result = asyncio.run(body())
    assert (result.ok, result.detail) == (False, "timeout after 0.2s")


def probe_dns(silent: bool = False, **check: object) -> ProbeResult:
    async def body() -> ProbeResult:
        async with dns_server(silent) as port:
            ep = endpoint(type=DNS, port=port, **check)
            assert ep.check is not None
            return await get_probe(DNS).run(ep, ep.check)

    return asyncio.run(body())


def test_dns_noerror_with_an_answer_is_healthy() -> None:
    result = probe_dns(query="www.example.test.")
    assert (result.ok, result.detail) == (True, "rcode NOERROR, 1 answer")


def test_dns_expect_answer_must_appear_in_an_answer_record() -> None:
    result = probe_dns(query="www.example.test.", expect_answer="192.0.2.7")
    assert (result.ok, result.detail) == (True, "rcode NOERROR, answer contains '192.0.2.7'")
    result = probe_dns(query="www.example.test.", expect_answer="192.0.2.8")
    assert (result.ok, result.detail) == (False, "rcode NOERROR, no answer contains '192.0.2.8'")


def test_dns_an_unexpected_rcode_fails_and_an_expected_one_passes() -> None:
    result = probe_dns(query="nope.example.test.")
    assert (result.ok, result.detail) == (False, "rcode NXDOMAIN (expected NOERROR)")
    result = probe_dns(query="nope.example.test.", expect_rcode="NXDOMAIN")
    assert (result.ok, result.detail) == (True, "rcode NXDOMAIN, 0 answers")


def test_dns_without_query_asks_for_the_service_name() -> None:
    result = probe_dns()  # app.gslb.example.com. is not in the test server's zone
    assert (result.ok, result.detail) == (False, "rcode REFUSED (expected NOERROR)")


def test_dns_a_server_that_never_answers_times_out() -> None:
    result = probe_dns(silent=True, query="www.example.test.", timeout=0.3)
    assert (result.ok, result.detail) == (False, "timeout after 0.3s")


def test_dns_probe_of_a_running_gslbd(server: Running) -> None:
    zone = server.zone
    ep = endpoint(server.host, type=DNS, port=server.port, query=zone, qtype="SOA", expect_answer=zone)
    result = run(ep)
    assert result.ok is True, result.detail
    assert result.detail == f"rcode NOERROR, answer contains '{zone}'"
