"""Hot reload of a running `gslbd serve` process: SIGHUP and POST /api/v1/reload apply a valid file with
the health of unchanged endpoints carried over, and refuse an invalid one while the old config serves."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from gslbd_harness import Running, free_port, start_gslbd
from health_app_support import APP, ZONE, ThreadedBackend, health_config, http_get, wait_until

TOKEN = "t0k3n"


@pytest.fixture
def backends() -> Iterator[tuple[ThreadedBackend, ThreadedBackend]]:
    eu, us = ThreadedBackend(), ThreadedBackend()
    try:
        yield eu, us
    finally:
        eu.close()
        us.close()


def config_text(eu: ThreadedBackend, us: ThreadedBackend, api_port: int, txt: str = "one") -> str:
    api = f'api: {{listen: "127.0.0.1:{api_port}", token: {TOKEN}}}'
    return health_config("@LISTEN@", eu.port, us.port, extra=api, txt=txt)


def eu_endpoint(api: str) -> dict[str, object]:
    status, body = http_get(f"{api}/api/v1/services/{APP}")
    assert status == 200, body
    endpoint: dict[str, object] = body["endpoints"][0]
    assert endpoint["address"] == "192.0.2.10"
    return endpoint


def answer(server: Running) -> list[str]:
    return sorted(rd.to_text() for rrset in server.ask(APP).answer for rd in rrset)


def txt(server: Running) -> str:
    return str(server.ask(f"info.{ZONE}", "TXT").answer[0][0].to_text())


def errors(path: Path) -> list[str]:
    return [
        f"{path}:3: services[0].name: 'x.gslb.example.com.' is not inside any served zone",
        f"{path}:3: services[0].policy: unknown policy 'sideways'; "
        "valid: round_robin | weighted | failover | geo | random | hash",
    ]


def test_sighup_applies_a_valid_config_and_keeps_the_health_of_unchanged_endpoints(
    tmp_path: Path, backends: tuple[ThreadedBackend, ThreadedBackend]
) -> None:
    eu, us = backends
    api_port = free_port()
    api = f"http://127.0.0.1:{api_port}"
    server = start_gslbd(tmp_path, config_text(eu, us, api_port), zone=ZONE)
    try:
        wait_until(lambda: eu_endpoint(api)["health"] == "up")
        eu.healthy = False
        wait_until(lambda: eu_endpoint(api)["health"] == "down")
        down = eu_endpoint(api)["last_change"]
        assert answer(server) == ["198.51.100.10"]

        text = config_text(eu, us, api_port, txt="two").replace("@LISTEN@", f'["127.0.0.1:{server.port}"]')
        server.config_path.write_text(text)
        server.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: txt(server) == '"two"')
        # The new config answers at once with eu still down: its verdict was carried over, not re-probed.
        assert answer(server) == ["198.51.100.10"]
        assert eu_endpoint(api)["last_change"] == down
        assert f"reloaded {server.config_path}" in server.log()

        # The same through the API.
        server.config_path.write_text(text.replace('value: "two"', 'value: "three"'))
        assert http_get(f"{api}/api/v1/reload", TOKEN, "POST") == (200, {"applied": True, "errors": []})
        assert txt(server) == '"three"'
        assert eu_endpoint(api)["last_change"] == down
    finally:
        server.kill()


def test_an_invalid_config_is_refused_with_its_errors_logged_and_the_old_one_keeps_serving(
    tmp_path: Path, backends: tuple[ThreadedBackend, ThreadedBackend]
) -> None:
    eu, us = backends
    api_port = free_port()
    api = f"http://127.0.0.1:{api_port}"
    server = start_gslbd(tmp_path, config_text(eu, us, api_port), zone=ZONE)
    try:
        wait_until(lambda: eu_endpoint(api)["health"] == "up")
        broken = "version: 1\nservices:\n  - {name: x.gslb.example.com., policy: sideways}\n"
        server.config_path.write_text(broken)
        server.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: "refused" in server.log())
        log = server.log()
        for line in errors(server.config_path):
            assert line in log
        assert f"reload of {server.config_path} refused (2 errors); still serving the previous config" in log
        assert server.alive()
        assert txt(server) == '"one"'
        assert answer(server) == ["192.0.2.10"]

        status, body = http_get(f"{api}/api/v1/reload", TOKEN, "POST")
        assert status == 422
        assert body["applied"] is False
        assert body["errors"] == errors(server.config_path)
        assert txt(server) == '"one"'
        assert http_get(f"{api}/readyz")[0] == 200
    finally:
        server.kill()
