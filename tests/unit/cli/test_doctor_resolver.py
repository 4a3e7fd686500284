"""`gslbd doctor` without a resolver that can find the parent zone: a sentence that says what is wrong
with this machine's resolver and what to pass instead, never dnspython's raw "There is no SOA RR at the
DNS root name. This should never happen!"."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator

import dns.message
import dns.rcode
import dns.resolver
import pytest

from gslbd.cli.doctor import _parent_servers
from gslbd.cli.doctor_checks import Result
from gslbd.config import load_config_text

CONFIG = "version: 1\nzones: [{origin: gslb.example.com., nameservers: [{name: ns1, address: 127.0.0.2}]}]\n"
HINT = "pass --parent-server HOST[:PORT] (a nameserver of the parent zone)"


@pytest.fixture
def empty_resolver() -> Iterator[int]:
    """A resolver on 127.0.0.1 that answers every question NXDOMAIN without an SOA (as a captive or
    sandboxed resolver does): dnspython walks up to the root and raises NoRootSOA. Its port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        sock.settimeout(0.1)
        while not stop.is_set():
            try:
                data, peer = sock.recvfrom(4096)
            except TimeoutError:
                continue
            reply = dns.message.make_response(dns.message.from_wire(data))
            reply.set_rcode(dns.rcode.NXDOMAIN)
            sock.sendto(reply.to_wire(), peer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield sock.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        sock.close()


def resolver_at(port: int) -> Callable[[], dns.resolver.Resolver]:
    def make() -> dns.resolver.Resolver:
        resolver = dns.resolver.Resolver(configure=False)
        resolver.nameservers = ["127.0.0.1"]
        resolver.port = port
        return resolver

    return make


def parent_lookup(system_resolver: Callable[[], dns.resolver.Resolver]) -> object:
    zone = load_config_text(CONFIG).zones[0]
    return _parent_servers(zone, None, 0.3, system_resolver)


def test_a_resolver_that_finds_no_soa_at_all_is_named_in_a_sentence(empty_resolver: int) -> None:
    found = parent_lookup(resolver_at(empty_resolver))
    assert found == Result(
        False,
        "delegation of gslb.example.com.: the nameservers of the parent zone of gslb.example.com. were not "
        "found: this machine's resolver (127.0.0.1) answered no SOA record for any name, not even the "
        "root's: it is not reachable, or not a resolver that reaches the internet",
        HINT,
    )


def test_a_resolver_that_does_not_answer_is_a_timeout_in_words() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:  # bound, never read
        silent.bind(("127.0.0.1", 0))
        found = parent_lookup(resolver_at(silent.getsockname()[1]))
    assert isinstance(found, Result) and not found.ok
    assert found.text.endswith("this machine's resolver (127.0.0.1) did not answer in time")


def test_no_resolver_configured_says_so() -> None:
    def unconfigured() -> dns.resolver.Resolver:
        raise dns.resolver.NoResolverConfiguration("no nameservers")

    found = parent_lookup(unconfigured)
    assert isinstance(found, Result)
    assert found.text.endswith("this machine has no resolver configured (no nameserver in /etc/resolv.conf)")
