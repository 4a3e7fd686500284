"""A ZSK rollover by config reloads (docs/dnssec.md): pre-publish the new ZSK, switch signing to it,
retire the old one, while a validating Unbound is asked throughout and never gives an answer without
the AD bit. A reload with a broken key file is refused and the old keys keep signing."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import dns.dnssec
import dns.exception
import dns.flags
import dns.rdatatype
import pytest
from dnssec_support import Child, ds_of, resolver_test_marks, signed_parent
from gslbd_harness import Running, running_gslbd
from health_app_support import wait_until
from nsd_support import running_nsd
from unbound_support import Resolver, running_validating_unbound

from gslbd.config.dnssec import generate_key_pair

pytestmark = resolver_test_marks()

ORIGIN = "gslb.example.com."
APP = f"app.{ORIGIN}"


def config(keys: list[str]) -> str:
    listed = ", ".join(keys)
    return f"""
version: 1
dns: {{listen: @LISTEN@, lame_duck: 0s}}
zones:
  - origin: {ORIGIN}
    ttl: 1
    negative_ttl: 1
    nameservers: [{{name: ns1.{ORIGIN}, address: 127.0.0.1}}]
    dnssec: {{keys: [{listed}]}}
services:
  - {{name: {APP}, ttl: 1, check: none, endpoints: [{{address: 192.0.2.1}}, {{address: 192.0.2.2}}]}}
"""


@dataclass
class Prober:
    """Asks the resolver for the service (DO set) in a loop; keeps every reply that is not secure."""

    resolver: Resolver
    asked: int = 0
    insecure: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                reply = self.resolver.ask(APP, "A", timeout=2, dnssec=True)
            except dns.exception.Timeout:
                self.insecure.append("timeout")
                continue
            self.asked += 1
            if not reply.flags & dns.flags.AD or not reply.answer:
                self.insecure.append(reply.to_text())
            self.stop.wait(0.02)


def signing_tags(resolver: Resolver) -> set[int]:
    reply = resolver.ask(APP, "A", dnssec=True)
    return {rd.key_tag for r in reply.answer if r.rdtype == dns.rdatatype.RRSIG for rd in r}


def published_tags(resolver: Resolver) -> set[int]:
    reply = resolver.ask(ORIGIN, "DNSKEY", dnssec=True)
    return {dns.dnssec.key_id(rd) for r in reply.answer if r.rdtype == dns.rdatatype.DNSKEY for rd in r}


def tag_of(base: Path) -> int:
    return int(base.name.rsplit("+", 1)[1])


def reload(server: Running, keys: list[str]) -> None:
    server.config_path.write_text(config(keys).replace("@LISTEN@", f"127.0.0.1:{server.port}"))
    server.proc.send_signal(signal.SIGHUP)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[Running, Resolver, dict[str, Path]]]:
    keys = {
        "ksk": generate_key_pair(ORIGIN, 13, True, tmp_path),
        "zsk1": generate_key_pair(ORIGIN, 13, False, tmp_path),
        "zsk2": generate_key_pair(ORIGIN, 13, False, tmp_path),
    }
    zone_text, anchor = signed_parent(
        tmp_path / "parent", [Child(ORIGIN, (ds_of(Path(f"{keys['ksk']}.key")),))]
    )
    with (
        running_gslbd(tmp_path, config([str(keys["ksk"]), str(keys["zsk1"])]), zone=ORIGIN) as gslbd,
        running_nsd(tmp_path / "nsd", "example.com.", zone_text) as nsd,
    ):
        (tmp_path / "unbound").mkdir()
        stubs = {"example.com.": nsd.port, ORIGIN: gslbd.port}
        with running_validating_unbound(tmp_path / "unbound", anchor, stubs, ORIGIN) as unbound:
            yield gslbd, unbound, keys


def test_a_zsk_rollover_keeps_every_answer_secure(world: tuple[Running, Resolver, dict[str, Path]]) -> None:
    gslbd, unbound, keys = world
    ksk, zsk1, zsk2 = str(keys["ksk"]), str(keys["zsk1"]), str(keys["zsk2"])
    old, new = tag_of(keys["zsk1"]), tag_of(keys["zsk2"])
    prober = Prober(unbound)
    thread = threading.Thread(target=prober.run)
    thread.start()
    try:
        assert signing_tags(unbound) == {old}
        # 1. Pre-publish: the new ZSK joins the DNSKEY set, the old one still signs.
        reload(gslbd, [ksk, zsk1, f"{{file: {zsk2}, sign: false}}"])
        wait_until(lambda: new in published_tags(unbound), timeout=15)
        assert signing_tags(unbound) == {old}
        # 2. Switch (after the DNSKEY TTL, here 1 s, which the wait above covers): the new ZSK signs.
        reload(gslbd, [ksk, f"{{file: {zsk1}, sign: false}}", zsk2])
        wait_until(lambda: signing_tags(unbound) == {new}, timeout=15)
        # 3. Retire (after the TTL of the answers signed by the old key): the old ZSK leaves.
        reload(gslbd, [ksk, zsk2])
        wait_until(lambda: old not in published_tags(unbound), timeout=15)
        # A broken key file is refused at reload: the zone stays signed by the keys it had.
        Path(f"{zsk1}.private").write_text("Private-key-format: v1.3\nAlgorithm: 13\nPrivateKey: AAAA\n")
        reload(gslbd, [ksk, zsk1])
        wait_until(lambda: "refused" in gslbd.log(), timeout=15)
        assert signing_tags(unbound) == {new}
        wait_until(lambda: prober.asked >= 20, timeout=15)
    finally:
        prober.stop.set()
        thread.join()
    assert prober.insecure == []
