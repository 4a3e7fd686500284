"""Configurations of Knot Resolver (kresd 5, Debian package knot-resolver) and PowerDNS Recursor
(pdns_recursor 4.8, Debian package pdns-recursor) as validating resolvers for the DNSSEC tests.

Both are kept on the machine and in their temporary directory: they listen on one loopback port, send
each test zone to its server on loopback, trust only the test's signed parent (a DS record), never prime
the root, poll for security updates or refresh a root key (nothing would leave the machine anyway: every
other name is refused or sent to 127.0.0.1), and keep their cache, sockets and control files in the
working directory. dnssec_support.running_validating_resolver starts them.
"""

from __future__ import annotations

import shutil
from pathlib import Path


def kresd_binary() -> str | None:
    return shutil.which("kresd") or ("/usr/sbin/kresd" if Path("/usr/sbin/kresd").exists() else None)


def pdns_binary() -> str | None:
    found = shutil.which("pdns_recursor")
    return found or ("/usr/sbin/pdns_recursor" if Path("/usr/sbin/pdns_recursor").exists() else None)


def _by_depth(forwards: dict[str, int]) -> list[tuple[str, int]]:
    """The zones deepest first (a child zone's rule before its parent's)."""
    return sorted(forwards.items(), key=lambda item: -len(item[0].rstrip(".").split(".")))


def kresd_conf(workdir: Path, port: int, anchor: str, forwards: dict[str, int]) -> str:
    """A Lua configuration for `kresd -n -c FILE WORKDIR`: `anchor` (a DS line) the only trust anchor,
    each zone forwarded to 127.0.0.1@port and validated by kresd (policy.FORWARD, not STUB, which would
    not validate), everything else refused; the root hints point at loopback and the modules that would
    prime the root or probe the clock are unloaded."""
    rules = "".join(
        f"policy.add(policy.suffix(policy.FORWARD({{'127.0.0.1@{fport}'}}), {{todname('{zone}')}}))\n"
        for zone, fport in _by_depth(forwards)
    )
    return f"""\
net.ipv6 = false
net.listen('127.0.0.1', {port}, {{ kind = 'dns' }})
net.outgoing_v4('127.0.0.1')
log_level('info')
for _, name in ipairs({{'priming', 'detect_time_skew', 'detect_time_jump', 'ta_signal_query',
                        'ta_sentinel', 'ta_update'}}) do
    pcall(modules.unload, name)
end
trust_anchors.remove('.')
trust_anchors.add('{anchor}')
modules.load('hints > iterate')
hints.root({{['root.invalid.'] = '127.0.0.1'}})
cache.open(16 * MB, 'lmdb://{workdir}/cache')
cache.min_ttl(0)
cache.max_ttl(1)
{rules}policy.add(policy.all(policy.REFUSE))
"""


def pdns_conf(workdir: Path, port: int, forwards: dict[str, int]) -> str:
    """recursor.conf for `pdns_recursor --config-dir=WORKDIR`: forward-zones (queries without RD, as
    to an authoritative server) to 127.0.0.1:port per zone, validation on with the trust anchor in
    recursor.lua (pdns_lua_conf), no root hints (no priming), no security polling, loopback allowed as
    a server (dont-query empty)."""
    zones = ",".join(f"{zone}=127.0.0.1:{fport}" for zone, fport in _by_depth(forwards))
    return f"""\
local-address=127.0.0.1
local-port={port}
config-dir={workdir}
socket-dir={workdir}
daemon=no
write-pid=no
disable-syslog=yes
loglevel=6
dnssec=validate
dnssec-log-bogus=yes
lua-config-file={workdir}/recursor.lua
forward-zones={zones}
dont-query=
query-local-address=127.0.0.1
hint-file=no
security-poll-suffix=
threads=1
max-cache-ttl=1
max-negative-ttl=1
disable-packetcache=yes
qname-minimization=no
"""


def pdns_lua_conf(anchor: str) -> str:
    """recursor.lua: the root's built-in anchor removed, `anchor` (a DS line) the only one."""
    owner, _, _, tag, alg, dtype, *digest = anchor.split()
    return f"clearTA('.')\naddTA('{owner}', '{tag} {alg} {dtype} {''.join(digest)}')\n"
