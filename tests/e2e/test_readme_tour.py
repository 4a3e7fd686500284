"""The README's five-minute tour, run as a user would: the bundled example served by `gslbd serve`,
every dig command of the README run with the dig binary, and each claim of the tour checked."""

from __future__ import annotations

import collections
import re
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from gslbd_harness import Running, gslbd_command, running_gslbd

ROOT = Path(__file__).parents[2]
README = ROOT / "README.md"
EXAMPLE = ROOT / "src" / "gslbd" / "examples" / "example.yaml"
ZONE = "gslb.example.com."

pytestmark = pytest.mark.skipif(shutil.which("dig") is None, reason="dig is not installed (package dnsutils)")


@pytest.fixture(scope="module")
def tour(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    text = EXAMPLE.read_text()
    assert 'listen: ["127.0.0.1:5353"]' in text
    config = text.replace('listen: ["127.0.0.1:5353"]', "listen: @LISTEN@")
    with running_gslbd(tmp_path_factory.mktemp("tour"), config, zone=ZONE) as server:
        yield server


def short(server: Running, *args: str) -> list[str]:
    return server.dig("+short", *args).split()


def readme_dig_commands() -> list[list[str]]:
    """Every `dig @127.0.0.1 -p 5353 ...` command in the README's code blocks, without comments."""
    out = []
    for raw in README.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("dig @127.0.0.1 -p 5353 "):
            out.append(shlex.split(line)[3:])
        elif "dig @127.0.0.1 -p 5353 " in line and line.startswith("for "):
            found = re.search(r"dig @127.0.0.1 -p 5353 ([^;]*);", line)
            assert found
            out.append(shlex.split(found.group(1)))
    return out


def test_every_dig_command_of_the_readme_gets_an_answer(tour: Running) -> None:
    commands = readme_dig_commands()
    assert len(commands) >= 12
    for args in commands:
        output = tour.dig(*args)
        assert "communications error" not in output and "timed out" not in output, (args, output)
        if "+short" not in args:
            assert "status: " in output, (args, output)


def test_round_robin_rotates_three_addresses_and_aaaa_answers_the_ipv6_one(tour: Running) -> None:
    answers = [short(tour, f"app.{ZONE}", "A") for _ in range(3)]
    assert all(sorted(a) == ["192.0.2.10", "198.51.100.10", "203.0.113.10"] for a in answers)
    assert len({a[0] for a in answers}) == 3
    assert short(tour, f"app.{ZONE}", "AAAA") == ["2001:db8::10"]


def test_failover_answers_us_while_eu_is_forced_down(tour: Running) -> None:
    assert short(tour, f"failover.{ZONE}") == ["198.51.100.20"]


def test_geo_answers_by_client_subnet_with_the_scope(tour: Running) -> None:
    eu = tour.dig(f"geo.{ZONE}", "+subnet=10.1.0.0/16")
    us = tour.dig(f"geo.{ZONE}", "+subnet=10.2.0.0/16")
    assert re.search(r"IN\s+A\s+192\.0\.2\.30$", eu, re.M)
    assert re.search(r"IN\s+A\s+198\.51\.100\.30$", us, re.M)
    assert "CLIENT-SUBNET: 10.1.0.0/16/16" in eu
    assert "CLIENT-SUBNET: 10.2.0.0/16/0" in tour.dig(f"app.{ZONE}", "+subnet=10.2.0.0/16")


def test_weighted_splits_70_20_10(tour: Running) -> None:
    import dns.message
    import dns.query

    counts: collections.Counter[str] = collections.Counter()
    query = dns.message.make_query(f"weighted.{ZONE}", "A")
    for _ in range(3000):
        reply = dns.query.udp(query, tour.host, port=tour.port, timeout=2)
        counts[reply.answer[0][0].to_text()] += 1
    shares = {addr: n / 3000 for addr, n in counts.items()}
    assert abs(shares["192.0.2.40"] - 0.70) < 0.03
    assert abs(shares["198.51.100.40"] - 0.20) < 0.03
    assert abs(shares["203.0.113.40"] - 0.10) < 0.03


def test_static_records_nodata_nxdomain_refused_and_ns_glue(tour: Running) -> None:
    assert short(tour, f"info.{ZONE}", "TXT")[0].startswith('"gslbd')
    www = tour.dig(f"www.{ZONE}", "A")
    assert re.search(rf"^www\.{re.escape(ZONE)}\s+\d+\s+IN\s+CNAME\s+app\.{re.escape(ZONE)}$", www, re.M)
    nodata = tour.dig(f"app.{ZONE}", "MX")
    assert "status: NOERROR" in nodata
    assert "ANSWER: 0" in nodata
    assert re.search(r"AUTHORITY SECTION:\n\S+\s+30\s+IN\s+SOA", nodata)
    nx = tour.dig(f"nope.{ZONE}", "A")
    assert "status: NXDOMAIN" in nx
    assert re.search(r"AUTHORITY SECTION:\n\S+\s+30\s+IN\s+SOA", nx)
    assert "status: REFUSED" in tour.dig("example.org", "SOA")
    ns = tour.dig(ZONE, "NS")
    assert re.search(
        r"ADDITIONAL SECTION:\n(?:;.*\n)?ns1\.gslb\.example\.com\.\s+30\s+IN\s+A\s+127\.0\.0\.1", ns
    )


def test_explain_and_check_commands_of_the_tour() -> None:
    out = subprocess.run(
        gslbd_command("explain", "geo.gslb.example.com", "--client", "10.2.3.4"),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "  answer: geo.gslb.example.com. 30 IN A 198.51.100.30" in out.stdout.splitlines()
    checked = subprocess.run(
        gslbd_command("check", "--config", str(EXAMPLE)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert checked.returncode == 0


def test_failback_after_the_admin_lets_eu_obey_again(tmp_path: Path) -> None:
    config = EXAMPLE.read_text().replace('listen: ["127.0.0.1:5353"]', "listen: @LISTEN@")
    with running_gslbd(tmp_path, config, zone=ZONE) as server:
        assert short(server, f"failover.{ZONE}") == ["198.51.100.20"]
        text = server.config_path.read_text()
        assert text.count("admin: down") == 1
        server.config_path.write_text(text.replace("admin: down", "admin: obey"))
        server.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while short(server, f"failover.{ZONE}") != ["192.0.2.20"] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert short(server, f"failover.{ZONE}") == ["192.0.2.20"]
