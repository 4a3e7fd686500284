"""One probe per distinct target: endpoints of any services that share the probed address, port and
check settings share one probe (and so one verdict); exec checks see the service, so they do not."""

from __future__ import annotations

from gslbd.app.reconcile import probe_targets, probed_endpoints
from gslbd.config import load_config_text

CONFIG = """\
site: {name: eu}
dns: {listen: ["127.0.0.1:5353"]}
zones:
  - origin: gslb.test.
    nameservers: [{name: ns1.gslb.test., address: 127.0.0.1}]
checks:
  web: {type: http, port: 8080, path: /healthz}
  web2: {type: http, port: 8080, path: /healthz}
  other: {type: http, port: 8080, path: /other}
  script: {type: exec, command: [/bin/true]}
services:
"""


def service(i: int, address: str, check: str) -> str:
    return f"  - {{name: s{i}, endpoints: [{{address: {address}, check: {check}}}]}}\n"


def test_services_sharing_a_backend_and_check_settings_share_one_probe() -> None:
    text = CONFIG + "".join(service(i, f"192.0.2.{i % 3 + 1}", "web") for i in range(30))
    text += service(30, "192.0.2.1", "web2")  # another name, the same settings: the same probe
    text += service(31, "192.0.2.1", "other")  # another path: another probe
    config = load_config_text(text)
    targets = probe_targets(probed_endpoints(config).values())
    assert len(targets) == 4
    first = targets[("s0.gslb.test.", "192.0.2.1")]
    assert len(first) == 11
    assert ("s30.gslb.test.", "192.0.2.1") in first
    assert targets[("s31.gslb.test.", "192.0.2.1")] == (("s31.gslb.test.", "192.0.2.1"),)


def test_exec_checks_are_not_shared_across_services() -> None:
    text = CONFIG + service(0, "192.0.2.1", "script") + service(1, "192.0.2.1", "script")
    targets = probe_targets(probed_endpoints(load_config_text(text)).values())
    assert len(targets) == 2


def test_services_over_a_thousand_backends_probe_a_thousand_targets() -> None:
    """bench/scale.py shows the same at 100,000 services."""
    text = CONFIG + "".join(service(i, f"10.{i % 1000 // 250}.{i % 250}.1", "web") for i in range(3000))
    config = load_config_text(text)
    targets = probe_targets(probed_endpoints(config).values())
    assert len(targets) == 1000
    assert sum(len(group) for group in targets.values()) == 3000
