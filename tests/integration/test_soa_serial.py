"""The public SOA serial of a running gslbd: the Unix time it started serving the zone's data, the same
after a reload with the same zone data, larger (RFC 1982) after a reload that changes it, and a
configured `soa.serial` served as it is (app/serials.py, docs/configuration.md)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from gslbd_harness import Running, running_gslbd
from health_app_support import wait_until

ZONE = "serial.test."
CONFIG = f"""
version: 1
dns: {{listen: @LISTEN@, lame_duck: 0s}}
zones:
  - origin: {ZONE}
    nameservers: [{{name: ns1.{ZONE}, address: 127.0.0.1}}]
    @SOA@
    records: [{{name: info, type: TXT, value: "@TXT@"}}]
  - origin: fixed.test.
    soa: {{serial: 2024010101}}
    nameservers: [{{name: ns1.fixed.test., address: 127.0.0.1}}]
"""


def serial(server: Running, zone: str = ZONE) -> int:
    return int(server.ask(zone, "SOA").answer[0][0].serial)


def txt(server: Running) -> str:
    return str(server.ask(f"info.{ZONE}", "TXT").answer[0][0].to_text())


def reload(server: Running, text: str) -> None:
    """Write the config, SIGHUP, and wait until the log says it was applied once more."""
    before = server.log().count("reloaded ")
    server.config_path.write_text(text.replace("@LISTEN@", f'["127.0.0.1:{server.port}"]'))
    server.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: server.log().count("reloaded ") > before)


def config(value: str, soa: str = "") -> str:
    return CONFIG.replace("@TXT@", value).replace("@SOA@", soa)


def test_the_serial_grows_when_the_zone_data_changes_and_stays_when_it_does_not(tmp_path: Path) -> None:
    started = int(time.time())
    with running_gslbd(tmp_path, config("one"), zone=ZONE) as server:
        first = serial(server)
        assert started <= first <= int(time.time())
        assert serial(server, "fixed.test.") == 2024010101

        reload(server, config("one"))  # the same zone data: the same serial
        assert serial(server) == first

        reload(server, config("two"))  # a changed record: a larger serial, at once with the data
        assert txt(server) == '"two"'
        second = serial(server)
        assert 0 < (second - first) % 2**32 < 2**31
        assert serial(server, "fixed.test.") == 2024010101

        reload(server, config("two", f"soa: {{serial: {second + 5}}}"))  # configured: served as is
        assert serial(server) == second + 5
        reload(server, config("two"))  # automatic again: never backwards
        assert 0 < (serial(server) - (second + 5)) % 2**32 < 2**31
