"""The configuration the DNS integration tests serve (placeholders filled by gslbd_harness)."""

from __future__ import annotations

ZONE = "gslb.example.com."
BIG_COUNT = 60  # AAAA endpoints of big.gslb.example.com.: about 1,700 bytes, more than any UDP limit

_BIG = "\n".join(f'      - {{address: "2001:db8::{0x100 + i:x}", site: eu}}' for i in range(BIG_COUNT))

CONFIG = f"""
version: 1
site:
  name: eu
  locality: {{region: europe-west1, zone: europe-west1-b}}
dns:
  listen: @LISTEN@
  max_udp_payload: 1232
  tcp_idle_timeout: 1s
zones:
  - origin: {ZONE}
    ttl: 30
    negative_ttl: 45
    soa: {{mname: ns1.{ZONE}, rname: hostmaster.example.com., serial: 1}}  # a fixed serial to compare
    nameservers:
      - {{name: ns1.{ZONE}, address: 192.0.2.53}}
      - {{name: ns2.{ZONE}, address: "2001:db8::53"}}
      - {{name: ns.example.net.}}
    records:
      - {{name: info, type: TXT, value: "hello from gslbd"}}
      - {{name: www, type: CNAME, value: app.{ZONE}}}
sites:
  eu: {{locality: {{region: europe-west1, zone: europe-west1-b}}, coordinates: [50.4, 3.8]}}
  us: {{locality: {{region: us-east1, zone: us-east1-b}}, coordinates: [39.0, -77.5]}}
topology:
  networks:
    - {{cidr: 10.1.0.0/16, site: eu}}
    - {{cidr: 10.2.0.0/16, site: us}}
  use_client_subnet: true
services:
  - name: app.{ZONE}
    policy: round_robin
    ttl: 20
    check: none
    endpoints:
      - {{address: 192.0.2.1, site: eu}}
      - {{address: 192.0.2.2, site: us}}
  - name: dual.{ZONE}
    check: none
    endpoints:
      - {{address: 192.0.2.10}}
      - {{address: "2001:db8::10"}}
  - name: alias.{ZONE}
    check: none
    endpoints:
      - {{address: target.example.net.}}
  - name: leaf.deep.{ZONE}
    check: none
    endpoints:
      - {{address: 192.0.2.20}}
  - name: geo.{ZONE}
    policy: geo
    check: none
    endpoints:
      - {{address: 192.0.2.31, site: eu}}
      - {{address: 198.51.100.32, site: us}}
  - name: big.{ZONE}
    max_answers: {BIG_COUNT}
    check: none
    endpoints:
{_BIG}
"""
