"""A running server with its services in a `services_file`: a reload that edits, adds and removes lines
answers the new services at once and the others as before; a broken line is refused with the file, the
line and the field, and the old answers stay."""

from __future__ import annotations

import json
from pathlib import Path

import dns.rcode
from gslbd_harness import free_port, running_gslbd
from health_app_support import http_get

ZONE = "svc.example."
TOKEN = "t0k3n"


def main_config(api_port: int) -> str:
    return f"""\
site: {{name: eu}}
dns: {{listen: @LISTEN@, lame_duck: 0s}}
api: {{listen: "127.0.0.1:{api_port}", token: {TOKEN}}}
zones:
  - origin: {ZONE}
    nameservers: [{{name: ns1.{ZONE}, address: 127.0.0.1}}]
services_file: services.jsonl
"""


def line(i: int, address: str | None = None) -> str:
    endpoints = [{"address": address or f"10.0.{i >> 8}.{i & 255}"}]
    return json.dumps({"name": f"s{i}", "policy": "round_robin", "endpoints": endpoints})


def addresses(reply: dns.message.Message) -> list[str]:
    return sorted(rd.to_text() for rrset in reply.answer for rd in rrset)


def test_a_reload_of_the_services_file_applies_edits_and_refuses_a_broken_line(tmp_path: Path) -> None:
    api_port = free_port()
    api = f"http://127.0.0.1:{api_port}"
    services = tmp_path / "services.jsonl"
    lines = [line(i) for i in range(300)]
    services.write_text("\n".join(lines) + "\n")
    with running_gslbd(tmp_path, main_config(api_port), zone=ZONE) as server:
        assert addresses(server.ask(f"s5.{ZONE}")) == ["10.0.0.5"]

        lines[5] = line(5, "192.0.2.55")  # edited
        lines.append(line(300))  # added
        del lines[7]  # removed
        services.write_text("\n".join(lines) + "\n")
        assert http_get(f"{api}/api/v1/reload", TOKEN, "POST") == (200, {"applied": True, "errors": []})
        assert addresses(server.ask(f"s5.{ZONE}")) == ["192.0.2.55"]
        assert addresses(server.ask(f"s300.{ZONE}")) == ["10.0.1.44"]
        assert server.ask(f"s7.{ZONE}").rcode() == dns.rcode.NXDOMAIN
        assert addresses(server.ask(f"s6.{ZONE}")) == ["10.0.0.6"]
        assert addresses(server.ask(f"localtargets-s5.{ZONE}")) == ["192.0.2.55"]

        lines[9] = line(10, "not-an-address")  # line 10 of the file: a bad address
        services.write_text("\n".join(lines) + "\n")
        status, body = http_get(f"{api}/api/v1/reload", TOKEN, "POST")
        assert status == 422, body
        assert any(f"{services}:10: endpoints[0].address:" in error for error in body["errors"]), body
        assert addresses(server.ask(f"s5.{ZONE}")) == ["192.0.2.55"]
        assert addresses(server.ask(f"s10.{ZONE}")) == ["10.0.0.10"]
        assert "Traceback" not in server.log()
