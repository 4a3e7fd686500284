"""A running server with its services inline in the YAML file: a reload that edits, adds and removes
items answers the new services at once and the others as before (only the items whose lines changed
are read again, config/yaml_reload.py); a broken item is refused with the file, the line and the
dotted field, and the old answers stay."""

from __future__ import annotations

from pathlib import Path

import dns.rcode
from gslbd_harness import free_port, running_gslbd
from health_app_support import http_get

ZONE = "svc.example."
TOKEN = "t0k3n"


def head(api_port: int) -> str:
    return f"""\
site: {{name: eu}}
dns: {{listen: @LISTEN@, lame_duck: 0s}}
api: {{listen: "127.0.0.1:{api_port}", token: {TOKEN}}}
zones:
  - origin: {ZONE}
    nameservers: [{{name: ns1.{ZONE}, address: 127.0.0.1}}]
services:
"""


def item(i: int, address: str | None = None) -> str:
    if i % 2:  # block style and flow style, mixed
        return f"  - name: s{i}\n    endpoints:\n      - address: {address or f'10.0.{i >> 8}.{i & 255}'}\n"
    return f"  - {{name: s{i}, endpoints: [{{address: {address or f'10.0.{i >> 8}.{i & 255}'}}}]}}\n"


def addresses(reply: dns.message.Message) -> list[str]:
    return sorted(rd.to_text() for rrset in reply.answer for rd in rrset)


def test_a_reload_of_inline_services_applies_edits_and_refuses_a_broken_item(tmp_path: Path) -> None:
    api_port = free_port()
    api = f"http://127.0.0.1:{api_port}"
    items = [item(i) for i in range(300)]
    tail = "topology: {networks: [{cidr: 10.9.0.0/16, site: eu}]}\n"
    with running_gslbd(tmp_path, head(api_port) + "".join(items) + tail, zone=ZONE) as server:
        top = server.config_path.read_text().split("services:\n")[0] + "services:\n"
        assert addresses(server.ask(f"s5.{ZONE}")) == ["10.0.0.5"]

        items[5] = item(5, "192.0.2.55")  # edited (block style)
        items[6] = item(6, "192.0.2.66")  # edited (flow style)
        items.append(item(300))  # added
        del items[7]  # removed
        server.config_path.write_text(top + "".join(items) + tail)
        assert http_get(f"{api}/api/v1/reload", TOKEN, "POST") == (200, {"applied": True, "errors": []})
        assert addresses(server.ask(f"s5.{ZONE}")) == ["192.0.2.55"]
        assert addresses(server.ask(f"s6.{ZONE}")) == ["192.0.2.66"]
        assert addresses(server.ask(f"s300.{ZONE}")) == ["10.0.1.44"]
        assert server.ask(f"s7.{ZONE}").rcode() == dns.rcode.NXDOMAIN
        assert addresses(server.ask(f"s8.{ZONE}")) == ["10.0.0.8"]

        items[9] = item(10, "not-an-address")  # services[9], flow style: a bad address
        server.config_path.write_text(top + "".join(items) + tail)
        line = (top + "".join(items[:9])).count("\n") + 1
        status, body = http_get(f"{api}/api/v1/reload", TOKEN, "POST")
        assert status == 422, body
        assert any(
            f"{server.config_path}:{line}: services[9].endpoints[0].address:" in error
            for error in body["errors"]
        ), body
        assert addresses(server.ask(f"s5.{ZONE}")) == ["192.0.2.55"]
        assert addresses(server.ask(f"s10.{ZONE}")) == ["10.0.0.10"]
        assert "Traceback" not in server.log()
