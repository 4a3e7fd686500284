"""deploy/prometheus/alerts.yml and deploy/grafana/gslbd.json: promtool checks and unit-tests the rules, every
metric they name is one a running gslbd really exports (a real /metrics scrape), and a real Prometheus
scraping that gslbd evaluates every rule and every dashboard query without an error."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from daemon_support import daemon
from gslbd_harness import Running, free_port, running_gslbd
from health_app_support import http_get, wait_until

ROOT = Path(__file__).parents[2]
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
ALERT_TESTS = ROOT / "deploy" / "prometheus" / "alerts_test.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "gslbd.json"
ZONE = "mon.example.com."
# Series Prometheus makes itself for every target, not gslbd's.
PROMETHEUS_OWN = {"up"}

PROMQL_WORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset",
    "inf", "nan", "sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk", "bottomk", "quantile",
    "count_values", "group",
}  # fmt: skip


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool is not installed (scripts/test installs prometheus)")
    return found


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression (or a Grafana query with $variables) reads."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals
    text = re.sub(r"\$\{?\w+\}?", "1m", text)  # Grafana variables ($__rate_interval, ${instance})
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges and subqueries
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)  # label lists
    names = set()
    for found in re.finditer(r"(?<![\w.])([A-Za-z_:][\w:]*)\b(\s*\()?", text):
        name, call = found.group(1), found.group(2)
        if call is None and name.lower() not in PROMQL_WORDS:
            names.add(name)
    return names


def test_metric_names_are_read_from_promql_and_grafana_queries() -> None:
    assert metric_names(
        'sum by (rcode) (rate(gslbd_dns_queries_total{instance=~"$instance", rcode!="NOERROR"}'
        "[$__rate_interval]))"
        ' / on (job) group_left count(up{job="gslbd"} == 0 and gslbd_redis_connected offset 5m) > 0.5'
    ) == {"gslbd_dns_queries_total", "up", "gslbd_redis_connected"}
    assert metric_names('label_values(gslbd_dns_queries_total{job=~"$job"}, instance)') == {
        "gslbd_dns_queries_total",
        "instance",  # label_values' second argument: dashboards' template queries are read separately
    }


def alert_exprs() -> dict[str, str]:
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    return {rule["alert"]: rule["expr"] for group in groups for rule in group["rules"]}


def dashboard_queries() -> list[str]:
    """Every PromQL query of the dashboard: panel targets, template variables, annotations."""
    board = json.loads(DASHBOARD.read_text())
    out = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    for var in board["templating"]["list"]:
        query = var.get("query")
        if isinstance(query, dict):
            inner = re.fullmatch(r"label_values\((.*),\s*\w+\)", query["query"])
            assert inner is not None, query
            out.append(inner.group(1))
    out += [a["expr"] for a in board["annotations"]["list"] if "expr" in a]
    return out


def grafana_to_promql(query: str) -> str:
    return query.replace("$__rate_interval", "1m").replace("$instance", ".*").replace("$job", ".*")


# ---- promtool ------------------------------------------------------------------------------------------


def test_alert_rules_pass_promtool_check() -> None:
    out = subprocess.run(
        [promtool(), "check", "rules", str(ALERTS)], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(alert_exprs())} rules found" in out.stdout


def test_alert_rules_unit_tests_pass_promtool_test() -> None:
    out = subprocess.run(
        [promtool(), "test", "rules", ALERT_TESTS.name],
        cwd=ALERT_TESTS.parent,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    tested = set(re.findall(r"alertname: (\w+)", ALERT_TESTS.read_text()))
    assert tested == set(alert_exprs())  # every alert has a unit test


def test_the_required_alerts_exist() -> None:
    names = set(alert_exprs())
    for required in (
        "GslbdEndpointDown",
        "GslbdServiceNoHealthyEndpoint",
        "GslbdPeerStale",
        "GslbdRedisDown",
        "GslbdReloadFailed",
        "GslbdSafetyRuleBroken",
    ):
        assert required in names


def test_the_dashboard_is_importable_grafana_json() -> None:
    board = json.loads(DASHBOARD.read_text())
    assert (board["uid"], board["title"]) == ("gslbd", "gslbd")
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    variables = {v["name"] for v in board["templating"]["list"]}
    assert variables == {"datasource", "job", "instance"}
    for panel in board["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["x"] + pos["w"] <= 24, panel["title"]
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
            assert panel["targets"], panel["title"]
            for target in panel["targets"]:
                assert 'instance=~"$instance"' in target["expr"], (panel["title"], target["expr"])


# ---- against a running gslbd ---------------------------------------------------------------------------


def config(api_port: int, dead_peer_port: int) -> str:
    return f"""
version: 1
site: {{name: eu}}
dns: {{listen: @LISTEN@, lame_duck: 0s}}
api: {{listen: "127.0.0.1:{api_port}"}}
zones:
  - origin: {ZONE}
    nameservers: [{{name: ns1.{ZONE}, address: 192.0.2.53}}]
checks:
  ok: {{type: exec, command: ["true"], interval: 200ms, timeout: 150ms, rise: 1, fall: 1}}
services:
  - name: app.{ZONE}
    check: ok
    endpoints: [{{address: 192.0.2.10}}]
peers:
  interval: 300ms
  stale_after: 1s
  timeout: 100ms
  sites:
    - {{name: us, nameservers: ["127.0.0.1:{dead_peer_port}"]}}
"""


def exported(scrape: str) -> set[str]:
    """Every series name a scrape can hold: its samples, and what each # TYPE line stands for (a labelled
    family with no series yet has only its TYPE line)."""
    names = {line.split("{")[0].split(" ")[0] for line in scrape.splitlines() if line and line[0] != "#"}
    for kind_line in re.finditer(r"^# TYPE (\S+) (\S+)$", scrape, re.M):
        name, kind = kind_line.groups()
        if kind == "counter":
            names |= {
                name if name.endswith("_total") else name + "_total",
                name.removesuffix("_total") + "_created",
            }
        elif kind == "histogram":
            names |= {name + s for s in ("_bucket", "_sum", "_count", "_created")}
        else:
            names.add(name)
    return names


@pytest.fixture(scope="module")
def gslbd_with_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Running, str]]:
    workdir = tmp_path_factory.mktemp("monitoring")
    api_port = free_port()
    with running_gslbd(workdir, config(api_port, free_port()), zone=ZONE) as server:
        api = f"http://127.0.0.1:{api_port}"
        wait_until(lambda: 'peer="us"' in http_get(f"{api}/metrics")[1])
        yield server, api


def test_every_metric_in_the_alerts_and_dashboard_is_exported(gslbd_with_api: tuple[Running, str]) -> None:
    _, api = gslbd_with_api
    status, scrape = http_get(f"{api}/metrics")
    assert status == 200
    names = exported(scrape)
    assert "gslbd_dns_queries_total" in names and "gslbd_redis_errors_total" in names
    assert "gslbd_config_last_reload_success" in names and "gslbd_config_reload_failures_total" in names
    for alert, expr in alert_exprs().items():
        unknown = metric_names(expr) - names - PROMETHEUS_OWN
        assert not unknown, f"alert {alert} reads {unknown}, which gslbd does not export"
    for query in dashboard_queries():
        unknown = metric_names(query) - names
        assert not unknown, f"dashboard query {query!r} reads {unknown}, which gslbd does not export"


def _prometheus_get(base: str, path: str, **params: str) -> dict[str, Any]:
    status, body = http_get(f"{base}{path}?{urllib.parse.urlencode(params)}")
    assert status == 200, body
    result: dict[str, Any] = body
    return result


def test_a_real_prometheus_evaluates_every_rule_and_dashboard_query(
    gslbd_with_api: tuple[Running, str], tmp_path: Path
) -> None:
    prometheus = shutil.which("prometheus")
    if prometheus is None:
        pytest.skip("prometheus is not installed (scripts/test installs it)")
    _, api = gslbd_with_api
    port = free_port()
    rules = tmp_path / "alerts.yml"
    shutil.copy(ALERTS, rules)
    (tmp_path / "prometheus.yml").write_text(
        yaml.safe_dump(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(rules)],
                "scrape_configs": [
                    {"job_name": "gslbd", "static_configs": [{"targets": [api.removeprefix("http://")]}]}
                ],
            }
        )
    )
    argv = [
        prometheus,
        f"--config.file={tmp_path / 'prometheus.yml'}",
        f"--storage.tsdb.path={tmp_path / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    base = f"http://127.0.0.1:{port}"
    with daemon(argv, tmp_path / "prometheus.log"):

        def scraped_and_evaluated() -> bool:
            try:
                up = _prometheus_get(base, "/api/v1/query", query='up{job="gslbd"} == 1')["data"]["result"]
                groups = _prometheus_get(base, "/api/v1/rules")["data"]["groups"]
            except (OSError, AssertionError):
                return False
            return bool(up) and all(
                r.get("lastEvaluation", "0001").startswith("20") for g in groups for r in g["rules"]
            )

        wait_until(scraped_and_evaluated, timeout=30)
        groups = _prometheus_get(base, "/api/v1/rules")["data"]["groups"]
        rules_seen = {r["name"]: r for g in groups for r in g["rules"]}
        assert set(rules_seen) == set(alert_exprs())
        for name, rule in rules_seen.items():
            assert rule["health"] == "ok", f"{name}: {rule.get('lastError')}"
        # The peer is a dead port: after stale_after (1 s) the stale alert is pending or firing.
        wait_until(lambda: _prometheus_get(base, "/api/v1/alerts")["data"]["alerts"] != [], timeout=15)
        alerts = {a["labels"]["alertname"] for a in _prometheus_get(base, "/api/v1/alerts")["data"]["alerts"]}
        assert "GslbdPeerStale" in alerts
        # A fresh instance without a cluster block: no reload refused, and no Redis link to lose.
        assert not alerts & {"GslbdReloadFailed", "GslbdReloadFailures", "GslbdRedisDown"}
        for query in dashboard_queries():
            reply = _prometheus_get(base, "/api/v1/query", query=grafana_to_promql(query))
            assert reply["status"] == "success", query
