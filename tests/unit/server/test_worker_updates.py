"""What crosses a worker's pipe: a new config with the whole snapshot once, then only the entries of
the services a change touched; applied, they give the worker the parent's snapshot."""

from __future__ import annotations

import pickle

from gslbd.config import load_config_text
from gslbd.server.workers import _apply_delta, _full_snapshot, _pack_delta, _pack_full
from gslbd.state.book import HealthBook
from gslbd.state.status import EndpointStatus
from gslbd.types import AdminState

SERVICES = "".join(
    f"  - {{name: s{i}, endpoints: [{{address: 192.0.2.{n}}}, {{address: 198.51.100.{n}}}]}}\n"
    for i, n in ((i, i % 250 + 1) for i in range(2000))
)
CONFIG = (
    "dns: {listen: ['127.0.0.1:5353'], workers: 2}\nzones:\n  - origin: gslb.test.\n"
    "    nameservers: [{name: ns1.gslb.test., address: 127.0.0.1}]\nservices:\n" + SERVICES
)


def test_a_verdict_sends_the_workers_its_service_and_not_the_config() -> None:
    config = load_config_text(CONFIG)
    services = {s.name: s for s in config.services}
    book = HealthBook()
    for i in range(0, 2000, 3):
        book.record((f"s{i}.gslb.test.", f"192.0.2.{i % 250 + 1}"), EndpointStatus(healthy=i % 2 == 0))
    full = _pack_full(config, book.snapshot())
    worker = _full_snapshot(pickle.loads(full))
    book.take_touched()

    book.record(("s7.gslb.test.", "192.0.2.8"), EndpointStatus(healthy=False))
    book.set_admin(("s9.gslb.test.", "198.51.100.10"), AdminState.DOWN)
    parent = book.snapshot()
    touched = book.take_touched()
    assert touched == {"s7.gslb.test.", "s9.gslb.test."}
    delta = _pack_delta(services, parent, touched)
    assert len(delta) * 50 < len(full)  # the change, not the config and every verdict
    worker = _apply_delta(worker, pickle.loads(delta))
    assert dict(worker.health) == dict(parent.health)
    assert dict(worker.admin) == dict(parent.admin)
    assert worker.version == parent.version
