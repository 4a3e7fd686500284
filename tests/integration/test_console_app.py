"""What a real App gives the console through Control: the change log App records (verdicts, admin
changes, reloads applied and refused), rows that agree with the full service status, the answer a client
gets (the same as `gslbd explain` and as DNS), and the cluster's Redis link with its members."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

from cluster_support import cluster_config, counting_backend, with_port
from health_app_support import APP, addresses, dns_port, health_config, wait_for
from redis_support import running_redis
from test_health_app import backends

from gslbd.api.changes import ChangeKind
from gslbd.api.control import service_row
from gslbd.app import App
from gslbd.clock import SystemClock
from gslbd.config import load_config, load_config_text
from gslbd.explain import explain
from gslbd.types import AdminState

EU, US = "192.0.2.10", "198.51.100.10"


def test_app_records_verdicts_admin_changes_and_reloads_and_its_rows_match_its_status(
    tmp_path: Path,
) -> None:
    async def body() -> None:
        async with backends() as (eu, us):
            path = tmp_path / "gslbd.yaml"
            path.write_text(health_config('["127.0.0.1:0"]', eu.port, us.port))
            app = App(load_config(str(path)), SystemClock(), random.Random(3))
            await app.start()
            control, log = app.control, app.control.changes
            try:
                await wait_for(lambda: log.last_seq >= 2)  # both first verdicts
                first = log.recent(2)
                assert {(c.kind, c.state, c.address) for c in first} == {
                    (ChangeKind.VERDICT, "up", EU),
                    (ChangeKind.VERDICT, "up", US),
                }
                assert all(c.detail == "first check: HTTP 200" and c.service == APP for c in first)

                version = control.rows_version
                eu.healthy = False
                await wait_for(lambda: log.recent(1)[0].state == "down")
                down = log.recent(1)[0]
                assert (down.kind, down.service, down.address) == (ChangeKind.VERDICT, APP, EU)
                assert down.detail == "2 consecutive failures: HTTP 503 (expected 200)"
                # The rebuild carrying the verdict is committed (an earlier one may also move the version).
                await wait_for(lambda: app.generation.snapshot.health.get((APP, EU)) is False)
                assert control.rows_version != version
                assert list(control.rows()) == [service_row(s) for s in control.services()]
                row = control.rows()[0]
                assert (row.name, row.endpoints, row.up, row.unhealthy) == (APP, 2, 1, 1)

                # What a client gets: explain's text, and the address DNS answers.
                answer = control.answer(APP, "A", "10.1.2.3", None)
                assert answer.explanation == explain(app.config, app.view, app.env, APP, "A", "10.1.2.3")
                assert (answer.rcode, answer.answer) == ("NOERROR", (f"{APP} 30 IN A {US}",))
                assert await addresses(dns_port(app.bound)) == [US]
                subnet = control.answer(APP, "A", "10.2.0.0", "10.2.0.0/16")
                assert subnet.client == "10.2.0.0/16" and subnet.answer == answer.answer

                await control.set_admin(APP, US, AdminState.DOWN)
                admin = log.recent(1)[0]
                assert (admin.kind, admin.state, admin.address, admin.detail) == (
                    ChangeKind.ADMIN,
                    "down",
                    US,
                    "by api",
                )
                row = control.rows()[0]
                assert (row.up, row.admin_down) == (0, 1)
                assert list(control.rows()) == [service_row(s) for s in control.services()]

                path.write_text(health_config('["127.0.0.1:0"]', eu.port, us.port, txt="two"))
                assert await control.reload() == []
                applied = log.recent(1)[0]
                assert (applied.kind, applied.state, applied.detail) == (
                    ChangeKind.RELOAD,
                    "applied",
                    str(path),
                )
                path.write_text("version: 1\nservices: [}\n")
                errors = await control.reload()
                assert errors
                refused = log.recent(1)[0]
                assert (refused.kind, refused.state) == (ChangeKind.RELOAD, "refused")
                assert refused.detail.startswith(f"{path}: ") and errors[0] in refused.detail
                assert [c.seq for c in log.since(0)[0]] == list(range(1, log.last_seq + 1))
                # The heartbeat swaps in a snapshot every 2.5 s that differs only in evaluated_at: the
                # console's rows stay valid (same generation).
                version, beat = control.rows_version, app.snapshot.evaluated_at
                await wait_for(lambda: app.snapshot.evaluated_at != beat, timeout=5)
                assert control.rows_version == version
                assert await control.cluster() is None
            finally:
                await app.stop()

    asyncio.run(body())


def test_cluster_view_shows_the_redis_link_and_counts_the_instances_subscribed(tmp_path: Path) -> None:
    async def body() -> None:
        with running_redis(tmp_path) as redis, counting_backend() as backend:
            text = cluster_config(redis.url, backend.port, interval="1s")
            apps = [App(load_config_text(with_port(text)), SystemClock(), random.Random(i)) for i in range(2)]
            for app in apps:
                await app.start()
            try:
                view = await apps[0].control.cluster()
                assert view is not None
                assert (view.connected, view.members, view.sync_mode) == (True, 2, "lock")
                assert view.redis == redis.url and view.instance_id == apps[0].cluster.instance_id  # type: ignore[union-attr]
                await apps[1].stop()
                channel = apps[0].cluster.keys.updates  # type: ignore[union-attr]
                with redis.client() as client:
                    await wait_for(lambda: client.pubsub_numsub(channel) == [(channel, 1)])
                view = await apps[0].control.cluster()
                assert view is not None and view.members == 1
                redis.kill()
                await wait_for(lambda: not apps[0].cluster.connected)  # type: ignore[union-attr]
                view = await apps[0].control.cluster()
                assert view is not None and (view.connected, view.members) == (False, None)
            finally:
                for app in apps:
                    await app.stop()

    asyncio.run(body())
