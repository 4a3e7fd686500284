"""http and https probes against a real aiohttp server on loopback (TLS with a self-signed cert)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from probe_support import Seen, closed_port, endpoint, http_server, self_signed, server_tls, tcp_server

from gslbd.health.probes import get_probe
from gslbd.state.status import ProbeResult
from gslbd.types import CheckType

HTTP = CheckType.HTTP
HTTPS = CheckType.HTTPS


def probe_http(**check: object) -> tuple[ProbeResult, Seen]:
    """Probe the loopback app with an http check built from `check` (port filled in)."""
    seen = Seen()
    address = check.pop("address", "127.0.0.1")
    probe_address = check.pop("probe_address", None)

    async def body() -> ProbeResult:
        async with http_server(seen) as port:
            ep = endpoint(str(address), probe_address=probe_address, type=HTTP, port=port, **check)  # type: ignore[arg-type]
            return await get_probe(HTTP).run(ep, ep.check)  # type: ignore[arg-type]

    return asyncio.run(body()), seen


def test_a_2xx_status_is_healthy_by_default() -> None:
    result, _ = probe_http(path="/ok")
    assert (result.ok, result.detail) == (True, "HTTP 200")
    assert 0 < result.duration < 1


def test_204_is_healthy_by_default_and_503_is_not() -> None:
    assert probe_http(path="/empty")[0].detail == "HTTP 204"
    result, _ = probe_http(path="/fail")
    assert (result.ok, result.detail) == (False, "HTTP 503 (expected 2xx)")


def test_expect_status_lists_the_accepted_codes() -> None:
    result, _ = probe_http(path="/fail", expect_status=(200, 503))
    assert (result.ok, result.detail) == (True, "HTTP 503")
    result, _ = probe_http(path="/empty", expect_status=(200,))
    assert (result.ok, result.detail) == (False, "HTTP 204 (expected 200)")
    result, _ = probe_http(path="/missing", expect_status=(200, 301))
    assert (result.ok, result.detail) == (False, "HTTP 404 (expected 200, 301)")


def test_expect_body_is_a_regular_expression_over_the_body() -> None:
    result, _ = probe_http(path="/ok", expect_body=r"status: (all )?good")
    assert (result.ok, result.detail) == (True, "HTTP 200, body matches")
    result, _ = probe_http(path="/ok", expect_body="^ready$")
    assert (result.ok, result.detail) == (False, "HTTP 200, body does not match '^ready$'")


def test_a_chunked_body_is_reassembled_before_matching() -> None:
    result, _ = probe_http(path="/chunked", expect_body=r"version=1\.2\.3, the end")
    assert (result.ok, result.detail) == (True, "HTTP 200, body matches")


def test_host_defaults_to_the_answered_address_while_probe_address_is_where_it_connects() -> None:
    result, seen = probe_http(path="/ok", address="192.0.2.10", probe_address="127.0.0.1")
    assert result.ok
    host = seen.headers[0]["Host"]
    assert host.startswith("192.0.2.10:")  # not the default port, so it is named
    assert seen.headers[0]["User-Agent"].startswith("gslbd-health/")


def test_host_and_custom_headers_are_sent() -> None:
    result, seen = probe_http(
        path="/ok", host="app.example.com", headers=(("X-Probe", "gslbd"), ("User-Agent", "custom/1"))
    )
    assert result.ok
    assert seen.headers[0]["Host"] == "app.example.com"
    assert seen.headers[0]["X-Probe"] == "gslbd"
    assert seen.headers[0]["User-Agent"] == "custom/1"


def test_a_hostname_endpoint_is_probed_by_resolving_its_name() -> None:
    result, seen = probe_http(path="/ok", address="localhost.")
    assert (result.ok, result.detail) == (True, "HTTP 200")
    assert seen.headers[0]["Host"].startswith("localhost:")


def test_a_closed_port_fails_with_connection_refused() -> None:
    ep = endpoint(type=HTTP, port=closed_port())
    result = asyncio.run(get_probe(HTTP).run(ep, ep.check))  # type: ignore[arg-type]
    assert (result.ok, result.detail) == (False, "connection refused")


def test_a_server_that_does_not_answer_in_time_times_out() -> None:
    result, _ = probe_http(path="/slow", timeout=0.3)
    assert (result.ok, result.detail) == (False, "timeout after 0.3s")
    assert 0.3 <= result.duration < 1.0


def test_a_server_that_does_not_speak_http_fails_clearly() -> None:
    async def greeter(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"SSH-2.0-OpenSSH_9.2\r\n")
        await writer.drain()
        writer.close()

    async def body() -> ProbeResult:
        async with tcp_server(greeter) as port:
            ep = endpoint(type=HTTP, port=port)
            return await get_probe(HTTP).run(ep, ep.check)  # type: ignore[arg-type]

    result = asyncio.run(body())
    assert (result.ok, result.detail) == (False, "not an HTTP response: 'SSH-2.0-OpenSSH_9.2'")


def probe_https(tmp_path: Path, **check: object) -> tuple[ProbeResult, Seen]:
    seen = Seen()
    cert = self_signed(tmp_path)
    if check.pop("trust", False):
        check["ca_file"] = str(cert.cert)

    async def body() -> ProbeResult:
        async with http_server(seen, server_tls(cert, seen)) as port:
            ep = endpoint(type=HTTPS, port=port, **check)
            return await get_probe(HTTPS).run(ep, ep.check)  # type: ignore[arg-type]

    return asyncio.run(body()), seen


def test_https_with_the_ca_file_verifies_and_sends_sni(tmp_path: Path) -> None:
    result, seen = probe_https(tmp_path, path="/ok", host="app.test", trust=True, expect_body="all good")
    assert (result.ok, result.detail) == (True, "HTTP 200, body matches")
    assert seen.server_names == ["app.test"]
    assert seen.headers[0]["Host"] == "app.test"


def test_https_verifies_an_ip_address_endpoint_against_the_certificate(tmp_path: Path) -> None:
    result, seen = probe_https(tmp_path, path="/ok", trust=True)
    assert (result.ok, result.detail) == (True, "HTTP 200")
    assert seen.server_names == [None]  # no SNI for an IP address


def test_https_refuses_an_untrusted_certificate(tmp_path: Path) -> None:
    result, _ = probe_https(tmp_path, path="/ok", host="app.test")
    assert result.ok is False
    assert result.detail == "TLS certificate not accepted: self-signed certificate"


def test_https_refuses_a_certificate_for_another_name(tmp_path: Path) -> None:
    result, seen = probe_https(tmp_path, path="/ok", host="other.test", trust=True)
    assert result.ok is False
    assert result.detail.startswith("TLS certificate not accepted: Hostname mismatch")
    assert seen.server_names == ["other.test"]


def test_https_without_verification_accepts_any_certificate(tmp_path: Path) -> None:
    result, _ = probe_https(tmp_path, path="/ok", host="other.test", tls_verify=False)
    assert (result.ok, result.detail) == (True, "HTTP 200")
