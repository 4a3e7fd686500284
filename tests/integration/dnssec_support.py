"""A signed test parent and validating resolvers for the DNSSEC tests.

`signed_parent` writes the parent zone `example.com.` with delegations (NS + DS) to child zones that
gslbd serves, makes its key with BIND's dnssec-keygen and signs it with dnssec-signzone; NSD serves it
(nsd_support.py). Its DS is the trust anchor of the validating resolvers, one `ValidatingResolver` of
each kind in RESOLVERS, started by `running_validating_resolver`: Unbound
(unbound_support.running_validating_unbound), BIND named (here), Knot Resolver and PowerDNS Recursor
(kresd_pdns_support.py), each sending every zone to its server on loopback. `delv` validates a name
itself with the same anchor. `signature_breaking_proxy` sits between a resolver and gslbd and breaks the
signatures of one name.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dns.exception
import dns.message
import dns.name
import dns.query
import dns.rdatatype
import dns.rrset
import pytest
from bind_harness import find_named
from daemon_support import daemon
from dns_proxy_support import Proxy, dns_proxy, zone_route
from gslbd_harness import free_port
from kresd_pdns_support import kresd_binary, kresd_conf, pdns_binary, pdns_conf, pdns_lua_conf
from nsd_support import nsd_binary
from unbound_support import running_validating_unbound, unbound_binary

PARENT = "example.com."
STARTUP_TIMEOUT = 20.0


def tools_missing() -> list[str]:
    """The BIND tools these tests need that are not installed."""
    tools = ("dnssec-keygen", "dnssec-signzone", "dnssec-dsfromkey", "delv")
    missing = [t for t in tools if shutil.which(t) is None]
    return missing + ([] if find_named() else ["named"])


def resolver_test_marks() -> list[pytest.MarkDecorator]:
    """The `pytestmark` of a module that runs a signed parent on NSD and validating resolvers: an
    integration test, skipped where one of the tools is missing."""
    missing = bool(tools_missing()) or unbound_binary() is None or nsd_binary() is None
    reason = "needs bind9, bind9-dnsutils (delv), unbound and nsd (scripts/test installs them)"
    return [pytest.mark.integration, pytest.mark.skipif(missing, reason=reason)]


def run(argv: list[str], cwd: Path) -> str:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return done.stdout


def keygen(zone: str, directory: Path, *extra: str) -> Path:
    """A key pair made by `gslbd dnssec keygen`; its base path."""
    out = subprocess.run(
        [sys.executable, "-m", "gslbd", "dnssec", "keygen", "--zone", zone, "--dir", str(directory), *extra],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip())


def ds_of(key_file: Path) -> str:
    """The SHA-256 DS record of a BIND .key file, by dnssec-dsfromkey (one line of presentation form)."""
    return run(["dnssec-dsfromkey", "-2", str(key_file)], key_file.parent).strip()


@dataclass(frozen=True)
class Child:
    """A delegation in the parent: the child zone, its DS lines (none: an insecure delegation) and its
    nameservers as (name, address) (none: ns1.<zone> at 127.0.0.1)."""

    zone: str
    ds: tuple[str, ...] = ()
    nameservers: tuple[tuple[str, str], ...] = ()


def signed_parent(workdir: Path, children: list[Child], parent: str = PARENT) -> tuple[str, str]:
    """(signed zone text of `parent`, its DS as the trust anchor)."""
    workdir.mkdir(parents=True, exist_ok=True)
    key = run(
        ["dnssec-keygen", "-q", "-a", "ECDSAP256SHA256", "-f", "KSK", "-K", ".", parent], workdir
    ).strip()
    lines = [
        "$TTL 300",
        f"{parent} IN SOA ns1.{parent} hostmaster.{parent} 1 3600 600 604800 60",
        f"{parent} IN NS ns1.{parent}",
        f"ns1.{parent} IN A 127.0.0.1",
        f"$INCLUDE {key}.key",
    ]
    for child in children:
        for name, address in child.nameservers or ((f"ns1.{child.zone}", "127.0.0.1"),):
            lines.append(f"{child.zone} IN NS {name}")
            lines.append(f"{name} IN A {address}")
        lines.extend(ds.replace(" IN DS ", " 300 IN DS ", 1) for ds in child.ds)
    (workdir / "parent.unsigned").write_text("\n".join(lines) + "\n")
    run(
        [
            "dnssec-signzone",
            "-q",
            "-z",
            "-o",
            parent,
            "-K",
            ".",
            "-f",
            "parent.signed",
            "parent.unsigned",
            key,
        ],
        workdir,
    )
    anchor = ds_of(workdir / f"{key}.key")
    return (workdir / "parent.signed").read_text(), anchor


RESOLVERS = ("unbound", "bind", "kresd", "pdns")  # every validating resolver the tests run


def resolver_binary(kind: str) -> str | None:
    """The binary of resolver `kind` (RESOLVERS), None where it is not installed."""
    found = {"unbound": unbound_binary, "bind": find_named, "kresd": kresd_binary, "pdns": pdns_binary}
    return found[kind]()


def resolver_param(kind: str) -> object:
    """`kind` as a pytest parameter, skipped with the Debian package to install where it is missing."""
    package = {"unbound": "unbound", "bind": "bind9", "kresd": "knot-resolver", "pdns": "pdns-recursor"}
    reason = f"{kind} is not installed (scripts/test installs the Debian package {package[kind]})"
    return pytest.param(kind, marks=pytest.mark.skipif(resolver_binary(kind) is None, reason=reason))


# Questions a resolver answers by its own rule, without asking the server (seen here: no query goes
# out for them), whatever the zone holds: PowerDNS Recursor 4.8 answers every RRSIG question SERVFAIL
# (with CD too) and Knot Resolver 5.6 every ANY question.
OWN_ANSWERS = {("pdns", "RRSIG"): "SERVFAIL", ("kresd", "ANY"): "SERVFAIL"}


def sets_ad(kind: str, rtype: str, has_data: bool) -> bool:
    """Whether resolver `kind` sets AD on a validated answer to an `rtype` question: Unbound never on
    RRSIG records (they carry no signature of their own), Knot Resolver on no RRSIG answer at all (it
    does not validate that question type)."""
    return rtype != "RRSIG" or (kind == "unbound" and not has_data) or kind == "bind"


@dataclass
class ValidatingResolver:
    """A validating resolver (`kind`, one of RESOLVERS) on 127.0.0.1:`port`."""

    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path
    kind: str = "bind"

    def ask(self, name: str, rtype: str = "A", timeout: float = 5.0) -> dns.message.Message:
        """A recursive query with DO, as a validating stub sends it."""
        query = dns.message.make_query(name, dns.rdatatype.from_text(rtype), want_dnssec=True)
        return dns.query.udp(query, "127.0.0.1", port=self.port, timeout=timeout)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


BindResolver = ValidatingResolver


def _wait_until_resolving(resolver: ValidatingResolver, ready_zone: str) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while True:
        if resolver.proc.poll() is not None:
            raise RuntimeError(f"{resolver.kind} exited with {resolver.proc.returncode}:\n{resolver.log()}")
        with contextlib.suppress(dns.exception.DNSException, OSError):
            if resolver.ask(ready_zone, "SOA", timeout=0.5).answer:
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{resolver.kind} did not resolve SOA {ready_zone}:\n{resolver.log()}")
        time.sleep(0.05)


@contextlib.contextmanager
def running_validating_resolver(
    kind: str, workdir: Path, anchor: str, forwards: dict[str, int], ready_zone: str
) -> Iterator[ValidatingResolver]:
    """Start resolver `kind` (RESOLVERS) in `workdir`, validating from `anchor` (a DS line) and sending
    each zone to 127.0.0.1:port; waits until it resolves SOA `ready_zone`; stopped when the block ends."""
    if kind == "bind":
        with running_bind_resolver(workdir, anchor, forwards, ready_zone) as resolver:
            yield resolver
        return
    binary = resolver_binary(kind)
    if binary is None:
        raise RuntimeError(f"{kind} is not installed (scripts/test installs it)")
    workdir.mkdir(parents=True, exist_ok=True)
    if kind == "unbound":
        with running_validating_unbound(workdir, anchor, dict(forwards), ready_zone) as unbound:
            yield ValidatingResolver(unbound.proc, unbound.port, unbound.log_path, kind)
        return
    port = free_port()
    log_path = workdir / f"{kind}.log"
    with contextlib.ExitStack() as stack:
        if kind == "kresd":
            # kresd 5 sends a forwarded request's every lookup (the parent's DNSKEY, the DS) to one
            # address: a router on loopback sends each to its zone's server, as a stub zone would.
            router = stack.enter_context(dns_proxy(zone_route(forwards)))
            conf = workdir / "kresd.conf"
            conf.write_text(kresd_conf(workdir, port, anchor, dict.fromkeys(forwards, router.port)))
            argv = [binary, "-n", "-c", str(conf), str(workdir)]
        else:
            (workdir / "recursor.conf").write_text(pdns_conf(workdir, port, forwards))
            (workdir / "recursor.lua").write_text(pdns_lua_conf(anchor))
            argv = [binary, f"--config-dir={workdir}"]
        proc = stack.enter_context(daemon(argv, log_path))
        resolver = ValidatingResolver(proc, port, log_path, kind)
        _wait_until_resolving(resolver, ready_zone)
        yield resolver


def _static_ds(anchor: str) -> str:
    """BIND's trust-anchors statement for a DS line "owner IN DS tag alg digest-type digest"."""
    owner, _, _, tag, alg, dtype, *digest = anchor.split()
    return f'trust-anchors {{ {owner} static-ds {tag} {alg} {dtype} "{"".join(digest)}"; }};'


def bind_resolver_conf(workdir: Path, port: int, anchor: str, forwards: dict[str, int]) -> str:
    zones = "".join(
        f'zone "{zone}" {{ type forward; forward only; forwarders {{ 127.0.0.1 port {fport}; }}; }};\n'
        for zone, fport in forwards.items()
    )
    return f"""\
options {{
    directory "{workdir}";
    pid-file "{workdir}/named.pid";
    session-keyfile "{workdir}/session.key";
    managed-keys-directory "{workdir}";
    listen-on port {port} {{ 127.0.0.1; }};
    listen-on-v6 {{ none; }};
    recursion yes;
    allow-query {{ any; }};
    allow-recursion {{ any; }};
    dnssec-validation yes;
    qname-minimization off;
    notify no;
    max-cache-ttl 1;
    max-ncache-ttl 1;
}};
controls {{ }};
{_static_ds(anchor)}
{zones}"""


@contextlib.contextmanager
def running_bind_resolver(
    workdir: Path, anchor: str, forwards: dict[str, int], ready_zone: str
) -> Iterator[ValidatingResolver]:
    """Start named as a validating resolver that forwards each zone to 127.0.0.1:port."""
    named = find_named()
    if named is None:
        raise RuntimeError("named is not installed (scripts/test installs bind9)")
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    conf = workdir / "named.conf"
    conf.write_text(bind_resolver_conf(workdir, port, anchor, forwards))
    log_path = workdir / "named.log"
    with daemon([named, "-g", "-n", "1", "-4", "-c", str(conf)], log_path) as proc:
        resolver = ValidatingResolver(proc, port, log_path, "bind")
        _wait_until_resolving(resolver, ready_zone)
        yield resolver


def delv(
    anchor_file: Path, server_port: int, name: str, rtype: str = "A"
) -> subprocess.CompletedProcess[str]:
    """`delv` asking the resolver at 127.0.0.1:port and validating itself from the anchor file."""
    argv = ["delv", "-a", str(anchor_file), "+root=" + PARENT, "-p", str(server_port), "@127.0.0.1"]
    argv += [name, rtype]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)


def delv_anchor_file(path: Path, anchor: str) -> Path:
    path.write_text(_static_ds(anchor) + "\n")
    return path


def dnsviz_binary() -> str | None:
    return shutil.which("dnsviz")


# Debian bookworm's dnsviz 0.9.4 checks for `pygraphviz.release`, which its pygraphviz 1.10 no longer
# has, and refuses `grok -t`; this runs grok with that module supplied (the check is all it is used for).
_GROK = """
import sys, types
import pygraphviz
release = types.ModuleType("pygraphviz.release")
release.version = getattr(pygraphviz, "__version__", "1.10")
pygraphviz.release = release
sys.modules["pygraphviz.release"] = release
from dnsviz.commands import grok
grok.main(["grok", *sys.argv[1:]])
"""


def dnsviz_grok(
    workdir: Path, zone: str, server_port: int, ds: str, anchor_key: Path, names: list[str]
) -> dict[str, object]:
    """`dnsviz probe` of `names` at the authoritative server 127.0.0.1:port (delegated with the DS
    line `ds`), then `dnsviz grok` with the zone's KSK as trusted key; grok's JSON."""
    import json

    server = f"127.0.0.1:{server_port}"
    rdata = " ".join(ds.split()[3:])
    probe = [
        "dnsviz", "probe", "-A", "-x", f"{zone}:{server}", "-N", f"{zone}:ns1.{zone}={server}",
        "-D", f"{zone}:{rdata}", "-o", str(workdir / "probe.json"), *names,
    ]  # fmt: skip
    run(probe, workdir)
    keys = workdir / "trusted.keys"
    keys.write_text(
        "".join(ln + "\n" for ln in anchor_key.read_text().splitlines() if not ln.startswith(";"))
    )
    python = Path(dnsviz_binary() or "").read_text().splitlines()[0].removeprefix("#!").strip()
    out = run([python, "-c", _GROK, "-P", "-t", str(keys), "-r", str(workdir / "probe.json")], workdir)
    found: dict[str, object] = json.loads(out)
    return found


def grok_problems(found: object, path: str = "") -> list[str]:
    """Every error and warning grok reports, with where."""
    out: list[str] = []
    if isinstance(found, dict):
        for key, value in found.items():
            if key in ("errors", "warnings") and value:
                out.append(f"{path}/{key}: {value}")
            out.extend(grok_problems(value, f"{path}/{key}"))
    elif isinstance(found, list):
        for i, value in enumerate(found):
            out.extend(grok_problems(value, f"{path}[{i}]"))
    return out


def break_signatures(wire: bytes, owner: dns.name.Name) -> tuple[bytes, int]:
    """The DNS message `wire` with one byte flipped in the signature field of every RRSIG owned by
    `owner` in its answer section (the rest re-rendered as it was), and how many it broke."""
    message = dns.message.from_wire(wire, ignore_trailing=True)
    broken = 0
    for i, rrset in enumerate(message.answer):
        if rrset.rdtype == dns.rdatatype.RRSIG and rrset.name == owner:
            flipped = [
                rd.replace(signature=rd.signature[:8] + bytes([rd.signature[8] ^ 0x5A]) + rd.signature[9:])
                for rd in rrset
            ]
            message.answer[i] = dns.rrset.from_rdata_list(rrset.name, rrset.ttl, flipped)
            broken += len(flipped)
    return (message.to_wire() if broken else wire), broken


SignatureBreaker = Proxy  # a forwarder on 127.0.0.1:`port`; `broken`: RRSIGs broken


@contextlib.contextmanager
def signature_breaking_proxy(upstream_port: int, owner: str) -> Iterator[SignatureBreaker]:
    """Forward every query to 127.0.0.1:`upstream_port` and hand back its answer with the RRSIGs of
    `owner` broken (break_signatures): a man in the middle for one name (dns_proxy_support)."""
    target = dns.name.from_text(owner)
    with dns_proxy(lambda _: upstream_port, lambda reply: break_signatures(reply, target)) as proxy:
        yield proxy
