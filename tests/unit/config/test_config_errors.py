"""Invalid configurations: each is rejected with the exact file:line, dotted path and message."""

from __future__ import annotations

import pytest

from gslbd.config import check_config_text, load_config_text
from gslbd.errors import ConfigError

# Three lines every case starts with (a valid zone), so line numbers below count from 4.
ZONE = """\
zones:
  - origin: gslb.example.com.
    nameservers: [{name: ns1, address: 127.0.0.2}]
"""


PEERS = "peers:\n  sites: [{name: us, nameservers: ['127.0.0.3']}]\n  tsig:\n"


def errors_of(text: str) -> list[str]:
    config, problems = check_config_text(text, "c.yaml")
    errors = [str(p) for p in problems if p.severity == "error"]
    assert (config is None) == bool(errors)
    return errors


INVALID: list[tuple[str, str, list[str]]] = [
    (
        "unknown top-level key, with a suggestion",
        ZONE + "servics: []\n",
        ["c.yaml:4: servics: unknown key 'servics'; did you mean 'services'?"],
    ),
    (
        "unknown key without a close match lists the valid ones",
        "site: {name: eu, colour: blue}\n" + ZONE,
        ["c.yaml:1: site.colour: unknown key 'colour'; valid keys: locality, name"],
    ),
    (
        "unsupported version",
        "version: 2\n" + ZONE,
        ["c.yaml:1: version: unsupported version 2; this gslbd reads version 1"],
    ),
    (
        "unknown policy lists every policy",
        ZONE + "services:\n  - name: app\n    policy: fast\n    endpoints: [{address: 192.0.2.1}]\n",
        [
            "c.yaml:6: services[0].policy: unknown policy 'fast'; "
            "valid: round_robin | weighted | failover | geo | random | hash"
        ],
    ),
    (
        "unknown check type lists every type",
        ZONE + "checks:\n  web: {type: htp}\n",
        [
            "c.yaml:5: checks.web.type: unknown check type 'htp'; "
            "valid: http | https | tcp | dns | grpc | icmp | exec | push"
        ],
    ),
    (
        "unknown all_down mode",
        ZONE + "services:\n  - name: app\n    all_down: panic\n",
        [
            "c.yaml:6: services[0].all_down: unknown all_down mode 'panic'; "
            "valid: serve_all | nxdomain | servfail | nodata | fallback"
        ],
    ),
    (
        "admin state of the wrong type",
        ZONE + "services:\n  - name: app\n    endpoints:\n      - {address: 192.0.2.1, admin: off}\n",
        ["c.yaml:7: services[0].endpoints[0].admin: admin state must be one of obey | up | down, got false"],
    ),
    (
        "endpoint address that is not an IP",
        ZONE + "services:\n  - name: app\n    endpoints:\n      - address: 300.1.1.1\n",
        [
            "c.yaml:7: services[0].endpoints[0].address: "
            "'300.1.1.1' is neither an IP address nor a hostname ending in a dot"
        ],
    ),
    (
        "hostname endpoint without the trailing dot",
        ZONE + "services:\n  - name: app\n    endpoints:\n      - address: app.example.com\n",
        [
            "c.yaml:7: services[0].endpoints[0].address: "
            "'app.example.com' is neither an IP address nor a hostname ending in a dot"
        ],
    ),
    (
        "duplicate endpoint addresses are compared normalized",
        ZONE
        + "services:\n  - name: app\n    endpoints:\n"
        + "      - address: 2001:db8::1\n      - address: 2001:DB8:0::1\n",
        [
            "c.yaml:8: services[0].endpoints[1].address: "
            "duplicate endpoint address 2001:db8::1 (also services[0].endpoints[0])"
        ],
    ),
    (
        "endpoint weight out of range",
        ZONE + "services:\n  - name: app\n    endpoints:\n      - {address: 192.0.2.1, weight: 1001}\n",
        ["c.yaml:7: services[0].endpoints[0].weight: must be between 0 and 1000, got 1001"],
    ),
    (
        "a geo bias out of range",
        ZONE + "services:\n  - name: app\n    policy: geo\n    bias:\n      eu: 100\n"
        "    endpoints: [{address: 192.0.2.1, site: eu}]\n",
        ["c.yaml:8: services[0].bias.eu: must be between -99 and 99, got 100"],
    ),
    (
        "an unknown select",
        ZONE + "services:\n  - name: app\n    policy: failover\n    select: first\n"
        "    endpoints: [{address: 192.0.2.1, site: eu}]\n",
        ["c.yaml:7: services[0].select: unknown select 'first'; valid: rotate | first_n"],
    ),
    (
        "endpoint site name with capitals",
        ZONE + "services:\n  - name: app\n    endpoints:\n      - {address: 192.0.2.1, site: EU}\n",
        ["c.yaml:7: services[0].endpoints[0].site: invalid site name 'EU'; must match [a-z0-9-]+"],
    ),
    (
        "misspelt endpoint key",
        ZONE + "services:\n  - name: app\n    endpoints:\n      - {adress: 192.0.2.1}\n",
        [
            "c.yaml:7: services[0].endpoints[0].adress: unknown key 'adress'; did you mean 'address'?",
            "c.yaml:7: services[0].endpoints[0].address: required key is missing",
        ],
    ),
    (
        "all_down fallback without a fallback",
        ZONE + "services:\n  - name: app\n    all_down: fallback\n    endpoints: [{address: 192.0.2.1}]\n",
        ["c.yaml:5: services[0].fallback: required when all_down is fallback"],
    ),
    (
        "fallback mixing addresses and a hostname",
        ZONE
        + "services:\n  - name: app\n    all_down: fallback\n"
        + "    fallback: [192.0.2.9, sorry.example.com.]\n    endpoints: [{address: 192.0.2.1}]\n",
        ["c.yaml:7: services[0].fallback: give either IP addresses or exactly one hostname"],
    ),
    (
        "check timeout not shorter than interval",
        ZONE + "checks:\n  web:\n    type: http\n    interval: 2s\n    timeout: 2000ms\n",
        ["c.yaml:8: checks.web.timeout: timeout (2s) must be shorter than interval (2s)"],
    ),
    (
        "expect_status outside 100..599",
        ZONE + "checks:\n  web: {type: http, expect_status: [200, 700]}\n",
        ["c.yaml:5: checks.web.expect_status: item 1: must be between 100 and 599, got 700"],
    ),
    (
        "expect_body that is not a regular expression",
        ZONE + "checks:\n  web: {type: http, expect_body: '(ok'}\n",
        [
            "c.yaml:5: checks.web.expect_body: not a valid regular expression '(ok': "
            "missing ), unterminated subpattern at position 0"
        ],
    ),
    (
        "exec check with an empty command",
        ZONE + "checks:\n  script: {type: exec, command: []}\n",
        ["c.yaml:5: checks.script.command: must not be empty: give the program and its arguments"],
    ),
    (
        "a key of another check type",
        ZONE + "checks:\n  db:\n    type: tcp\n    port: 5432\n    path: /health\n",
        ["c.yaml:8: checks.db.path: 'path' does not apply to type tcp (it is for http, https)"],
    ),
    (
        "tcp check without a port",
        ZONE + "checks:\n  db:\n    type: tcp\n",
        ["c.yaml:5: checks.db.port: required key is missing (type tcp has no default port)"],
    ),
    (
        "unknown check profile, with a suggestion",
        ZONE
        + "checks:\n  web: {type: http}\n"
        + "services:\n  - name: app\n    check: wbe\n    endpoints: [{address: 192.0.2.1}]\n",
        ["c.yaml:8: services[0].check: unknown check profile 'wbe'; did you mean 'web'?"],
    ),
    (
        "inline check validated like a profile",
        ZONE + "services:\n  - name: app\n    check: {type: http, port: 0}\n",
        ["c.yaml:6: services[0].check.port: must be between 1 and 65535, got 0"],
    ),
    (
        "service outside every served zone",
        ZONE + "services:\n  - name: app.example.org.\n",
        ["c.yaml:5: services[0].name: 'app.example.org.' is not inside any served zone"],
    ),
    (
        "relative service name with several zones",
        ZONE
        + "  - origin: other.example.org.\n    nameservers: [{name: ns1, address: 127.0.0.3}]\n"
        + "services:\n  - name: app\n",
        [
            "c.yaml:7: services[0].name: relative name 'app' needs a zone: there are several zones; "
            "write it absolute or set zone"
        ],
    ),
    (
        "service at a static record's name",
        ZONE
        + "    records: [{name: app, type: TXT, value: hi}]\n"
        + "services:\n  - name: app\n    endpoints: [{address: 192.0.2.1}]\n",
        ["c.yaml:6: services[0].name: 'app.gslb.example.com.' is also a static record (zones[0].records[0])"],
    ),
    (
        "duplicate service names",
        ZONE
        + "services:\n  - name: app\n    endpoints: [{address: 192.0.2.1}]\n"
        + "  - name: app.gslb.example.com.\n    endpoints: [{address: 192.0.2.2}]\n",
        ["c.yaml:7: services[1].name: duplicate service 'app.gslb.example.com.' (also services[0])"],
    ),
    (
        "CNAME beside other data",
        ZONE
        + "    records:\n      - {name: www, type: CNAME, value: app}\n"
        + "      - {name: www, type: TXT, value: hi}\n",
        [
            "c.yaml:6: zones[0].records[1].value: 'www.gslb.example.com.' has a CNAME and other data "
            "(zones[0].records[0]); a CNAME stands alone"
        ],
    ),
    (
        "record value that does not parse as its type",
        ZONE + "    records:\n      - {name: www, type: A, value: 1.2.3}\n",
        ["c.yaml:5: zones[0].records[0].value: invalid A value '1.2.3': Text input is malformed."],
    ),
    (
        "unknown record type",
        ZONE + "    records:\n      - {name: www, type: BOGUS, value: x}\n",
        ["c.yaml:5: zones[0].records[0].type: unknown record type 'BOGUS'"],
    ),
    (
        "record outside its zone",
        ZONE + "    records:\n      - {name: www.example.org., type: A, value: 192.0.2.1}\n",
        ["c.yaml:5: zones[0].records[0].name: 'www.example.org.' is not inside the zone 'gslb.example.com.'"],
    ),
    (
        "in-zone nameserver without glue",
        "zones:\n  - origin: gslb.example.com.\n    nameservers:\n      - name: ns1\n",
        [
            "c.yaml:4: zones[0].nameservers[0].address: 'ns1.gslb.example.com.' is inside the zone, "
            "so it needs an address (glue)"
        ],
    ),
    (
        "IPv6 listen address without brackets",
        ZONE + "dns:\n  listen: ['::1:5353']\n",
        ["c.yaml:5: dns.listen[0]: '::1:5353': write IPv6 addresses in brackets, like [::1]:53"],
    ),
    (
        "max_udp_payload below 512",
        ZONE + "dns:\n  max_udp_payload: 100\n",
        ["c.yaml:5: dns.max_udp_payload: must be between 512 and 65535, got 100"],
    ),
    (
        "invalid duration",
        ZONE + "dns:\n  tcp_idle_timeout: 5 sec\n",
        [
            "c.yaml:5: dns.tcp_idle_timeout: invalid duration '5 sec'; "
            "use seconds or a number with a unit: 500ms, 5s, 2m, 1h"
        ],
    ),
    (
        "api token and token_file together",
        ZONE + "api:\n  listen: 127.0.0.1:8080\n  token: abc\n  token_file: /etc/gslbd/token\n",
        ["c.yaml:7: api.token_file: give either token or token_file, not both"],
    ),
    (
        "missing geoip database",
        ZONE + "topology:\n  geoip: {database: /nonexistent/GeoLite2-City.mmdb}\n",
        [
            "c.yaml:5: topology.geoip.database: "
            "GeoIP database '/nonexistent/GeoLite2-City.mmdb' is not a file that exists"
        ],
    ),
    (
        "network with host bits set",
        ZONE + "topology:\n  networks:\n    - {cidr: 10.1.0.5/16, site: eu}\n",
        ["c.yaml:6: topology.networks[0].cidr: invalid network '10.1.0.5/16': 10.1.0.5/16 has host bits set"],
    ),
    (
        "latitude out of range",
        ZONE + "sites:\n  us: {coordinates: [100, -77.5]}\n",
        ["c.yaml:5: sites.us.coordinates: latitude must be between -90 and 90, got 100"],
    ),
    (
        "redis URL with an unsupported scheme",
        ZONE + "cluster:\n  redis: {url: 'http://127.0.0.1:6379'}\n",
        [
            "c.yaml:5: cluster.redis.url: unsupported URL scheme 'http' in 'http://127.0.0.1:6379'; "
            "valid: redis | rediss | unix | redis+sentinel"
        ],
    ),
    (
        "peers stale_after not longer than interval",
        ZONE
        + "peers:\n  interval: 10s\n  stale_after: 5s\n  sites: [{name: us, nameservers: ['127.0.0.3']}]\n",
        ["c.yaml:6: peers.stale_after: stale_after (5s) must be longer than interval (10s)"],
    ),
    (
        "this site listed as a peer",
        "site: {name: eu}\n" + ZONE + "peers:\n  sites:\n    - {name: eu, nameservers: ['127.0.0.3:53']}\n",
        ["c.yaml:7: peers.sites[0].name: 'eu' is this site (site.name); a site is not its own peer"],
    ),
    (
        "peers.tsig with both secret and secret_file",
        ZONE + PEERS + "    name: k\n    secret: c2VjcmV0\n    secret_file: k.key\n",
        ["c.yaml:8: peers.tsig.secret: give exactly one of secret and secret_file"],
    ),
    (
        "peers.tsig secret that is not base64",
        ZONE + PEERS + "    name: k\n    secret: 'not base64!'\n",
        ["c.yaml:8: peers.tsig.secret: the TSIG secret is not base64: Only base64 data is allowed"],
    ),
    (
        "peers.tsig with an unknown algorithm lists the known ones",
        ZONE + PEERS + "    name: k\n    algorithm: hmac-sha3\n    secret: c2VjcmV0\n",
        [
            "c.yaml:8: peers.tsig.algorithm: unknown TSIG algorithm 'hmac-sha3' (known: hmac-sha256, "
            "hmac-sha512, hmac-sha384, hmac-sha224, hmac-sha1, hmac-md5)"
        ],
    ),
    (
        "peers.tsig without a name",
        ZONE + PEERS + "    secret: c2VjcmV0\n",
        ["c.yaml:6: peers.tsig.name: required key is missing"],
    ),
    (
        "peers.tsig secret_file that does not exist",
        ZONE + PEERS + "    name: k\n    secret_file: /nonexistent/k.key\n",
        [
            "c.yaml:8: peers.tsig.secret_file: cannot read key file '/nonexistent/k.key': "
            "No such file or directory"
        ],
    ),
    (
        "wrong value type",
        ZONE + "dns:\n  workers: two\n",
        ["c.yaml:5: dns.workers: expected an integer, got the string 'two'"],
    ),
    (
        "dns.threads past the limit",
        ZONE + "dns:\n  threads: 65\n",
        ["c.yaml:5: dns.threads: must be between 1 and 64, got 65"],
    ),
    (
        "dns.threads zero",
        ZONE + "dns:\n  workers: 2\n  threads: 0\n",
        ["c.yaml:6: dns.threads: must be between 1 and 64, got 0"],
    ),
    (
        "section of the wrong shape",
        ZONE + "services: {name: app}\n",
        ["c.yaml:4: services: expected a list, got a mapping"],
    ),
    (
        "duplicate mapping key",
        ZONE + "dns:\n  workers: 1\n  workers: 2\n",
        ["c.yaml:6: dns.workers: duplicate key 'workers' (first on line 5)"],
    ),
    (
        "invalid YAML",
        ZONE + "dns:\n  listen: [127.0.0.1:53\n",
        [
            "c.yaml:6: invalid YAML: while parsing a flow sequence: "
            "expected ',' or ']', but got '<stream end>'"
        ],
    ),
    (
        "min_healthy: a share above 1, a zero count, a bad percentage, a boolean",
        ZONE + "services:\n"
        "  - {name: a, min_healthy: 1.5, endpoints: [{address: 192.0.2.1}]}\n"
        "  - {name: b, min_healthy: 0, endpoints: [{address: 192.0.2.1}]}\n"
        "  - {name: c, min_healthy: 150%, endpoints: [{address: 192.0.2.1}]}\n"
        "  - {name: d, min_healthy: half, endpoints: [{address: 192.0.2.1}]}\n"
        "  - {name: e, min_healthy: true, endpoints: [{address: 192.0.2.1}]}\n",
        [
            "c.yaml:5: services[0].min_healthy: a share must be more than 0 and at most 1, got 1.5; give a "
            "share (0 < share <= 1, such as 0.5, or a percentage such as '50%') or a count (an integer >= 1)",
            "c.yaml:6: services[1].min_healthy: a count must be at least 1, got 0; give a share "
            "(0 < share <= 1, such as 0.5, or a percentage such as '50%') or a count (an integer >= 1)",
            "c.yaml:7: services[2].min_healthy: a percentage must be more than 0% and at most 100%, "
            "got '150%'",
            "c.yaml:8: services[3].min_healthy: expected a share or a count, got the string 'half'; give a "
            "share (0 < share <= 1, such as 0.5, or a percentage such as '50%') or a count (an integer >= 1)",
            "c.yaml:9: services[4].min_healthy: expected a share or a count, got true; give a share "
            "(0 < share <= 1, such as 0.5, or a percentage such as '50%') or a count (an integer >= 1)",
        ],
    ),
    (
        "a configuration that is not a mapping",
        "- zones\n",
        ["c.yaml:1: the configuration must be a mapping of sections, got a list"],
    ),
]


@pytest.mark.parametrize(
    ("text", "expected"), [(t, e) for _, t, e in INVALID], ids=[i for i, _, _ in INVALID]
)
def test_invalid_config_is_reported_exactly(text: str, expected: list[str]) -> None:
    assert errors_of(text) == expected


def test_the_error_table_covers_at_least_25_configs() -> None:
    assert len(INVALID) >= 25


def test_every_error_is_reported_at_once_in_line_order() -> None:
    text = """\
version: 1
dns:
  workers: 0
zones:
  - origin: gslb.example.com.
    ttl: -5
    nameservers: [{name: ns1, address: 127.0.0.2}]
services:
  - name: app
    policy: fast
    endpoints:
      - {address: 192.0.2.1, weight: -1}
      - {address: nope}
"""
    with pytest.raises(ConfigError) as caught:
        load_config_text(text, "multi.yaml")
    assert [str(p) for p in caught.value.problems] == [
        "multi.yaml:3: dns.workers: must be between 1 and 1024, got 0",
        "multi.yaml:6: zones[0].ttl: must be between 0 and 2147483647, got -5",
        "multi.yaml:10: services[0].policy: unknown policy 'fast'; "
        "valid: round_robin | weighted | failover | geo | random | hash",
        "multi.yaml:12: services[0].endpoints[0].weight: must be between 0 and 1000, got -1",
        "multi.yaml:13: services[0].endpoints[1].address: 'nope' is neither an IP address nor a hostname "
        "ending in a dot",
    ]
    assert str(caught.value).splitlines()[0] == "multi.yaml:3: dns.workers: must be between 1 and 1024, got 0"


def test_errors_come_before_warnings() -> None:
    text = ZONE + (
        "services:\n"
        "  - name: app\n"
        "    policy: round_robin\n"
        "    weights: {eu: 1}\n"
        "    endpoints: [{address: 192.0.2.1, site: eu}]\n"
        "  - name: bad\n"
        "    max_answers: 0\n"
    )
    config, problems = check_config_text(text, "c.yaml")
    assert config is None
    assert [(p.severity, str(p)) for p in problems] == [
        ("error", "c.yaml:10: services[1].max_answers: must be at least 1, got 0"),
        (
            "warning",
            "c.yaml:7: services[0].weights: weights are only used by the weighted policy "
            "(policy is round_robin)",
        ),
        ("warning", "c.yaml:9: services[1].endpoints: the service has no endpoints"),
    ]
