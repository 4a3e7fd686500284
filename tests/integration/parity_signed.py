"""The signed zone of the parity test (test_conformance_parity.py): one key for all three servers.

BIND's dnssec-keygen makes one combined signing key; gslbd reads its files and signs online, and
dnssec-signzone signs the same zone content with it (classic NSEC chain) for Knot and NSD, which serve it
as it is. The DNSKEY RRsets are the same; signatures differ in their times and random parts, so the
parity summary writes an RRSIG as its covered type, algorithm, labels, original TTL, key tag and signer
(what a validator checks the RRset against), without the times and the signature.

The zone: the parity zone's static records plus a wildcard (`*.apps`: a wildcard service in gslbd, an A
record in the zone file, both with one address).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from dnssec_support import run
from gslbd_harness import running_gslbd
from knot_support import running_knot
from nsd_support import running_nsd

WILDCARD = ("*.apps", "A", "198.51.100.1", 120)


def gslbd_config(origin: str, records: list[tuple[str, str, str, int]], key: Path) -> str:
    name, _, address, ttl = WILDCARD
    listed = "".join(
        f"      - {{name: {n}, type: {t}, value: '{v}', ttl: {ttl_}}}\n" for n, t, v, ttl_ in records
    )
    return f"""
version: 1
dns: {{listen: @LISTEN@, lame_duck: 0s}}
zones:
  - origin: {origin}
    ttl: 300
    negative_ttl: 60
    soa: {{mname: ns1.{origin}, rname: hostmaster.{origin}, serial: 1}}
    nameservers: [{{name: ns1.{origin}, address: 127.0.0.1}}]
    dnssec: {{keys: ["{key}"]}}
    records:
{listed}services:
  - {{name: "{name}.{origin}", ttl: {ttl}, check: none, endpoints: [{{address: {address}}}]}}
"""


def signed_zone_file(workdir: Path, origin: str, unsigned: str, key: str) -> str:
    """`unsigned` (zone file text) signed by dnssec-signzone with the key `key` (base name in workdir)."""
    (workdir / "zone.unsigned").write_text(unsigned + f"$INCLUDE {key}.key\n")
    run(
        ["dnssec-signzone", "-q", "-z", "-o", origin, "-K", ".", "-f", "zone.signed", "zone.unsigned", key],
        workdir,
    )
    return (workdir / "zone.signed").read_text()


@contextlib.contextmanager
def running_signed(
    tmp: Path,
    origin: str,
    records: list[tuple[str, str, str, int]],
    zone_file: Callable[[str, list[tuple[str, str, str, int]]], str],
    knot_extra: str,
    nsd_extra: str,
) -> Iterator[dict[str, int]]:
    """gslbd, Knot and NSD serving the signed zone `origin` (the ports by server name)."""
    tmp.mkdir(parents=True, exist_ok=True)
    key = run(["dnssec-keygen", "-q", "-a", "ECDSAP256SHA256", "-f", "KSK", "-K", ".", origin], tmp).strip()
    text = signed_zone_file(tmp, origin, zone_file(origin, [*records, WILDCARD]), key)
    (tmp / "gslbd").mkdir()
    with (
        running_gslbd(tmp / "gslbd", gslbd_config(origin, records, tmp / key), zone=origin) as gslbd,
        running_knot(tmp / "knot", origin, text, knot_extra) as knot,
        running_nsd(tmp / "nsd", origin, text, nsd_extra) as nsd,
    ):
        yield {"gslbd": gslbd.port, "Knot": knot.port, "NSD": nsd.port}


def signed_line(line: str) -> str:
    """A record line as the parity summary compares it: an RRSIG without its times and signature."""
    fields = line.split()
    if len(fields) > 4 and fields[3] == "rrsig":
        # owner ttl class RRSIG covered algorithm labels original-ttl expiration inception tag signer sig
        return " ".join([*fields[:8], *fields[10:12]])
    return line
