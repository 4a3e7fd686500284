"""Push checks: a push is a result now, a missing push a failure every ttl (app/push.py, fake clock)."""

from __future__ import annotations

from dataclasses import replace

from gslbd.app.push import PushWatch
from gslbd.clock import FakeClock
from gslbd.model.check import Check
from gslbd.model.service import Endpoint
from gslbd.state.status import ProbeResult
from gslbd.types import CheckType, EndpointKind

PUSH = Check("pushed", CheckType.PUSH, interval=20.0, timeout=0.0)
A = Endpoint("app.gslb.test.", "192.0.2.1", EndpointKind.IPV4, "eu", check=PUSH)
B = Endpoint("app.gslb.test.", "192.0.2.2", EndpointKind.IPV4, "eu", check=PUSH)
HTTP = Endpoint("app.gslb.test.", "192.0.2.3", EndpointKind.IPV4, "eu", check=Check("web", CheckType.HTTP))


def watch() -> tuple[PushWatch, FakeClock, list[tuple[str, bool, str]]]:
    clock = FakeClock()
    got: list[tuple[str, bool, str]] = []
    w = PushWatch(clock, lambda e, r: got.append((e.address, r.ok, r.detail)))
    w.update([A, B, HTTP])
    return w, clock, got


def test_a_push_is_a_result_at_once_with_its_detail() -> None:
    w, _, got = watch()
    w.push(A.key, False, "  disk\nfull  ")
    w.push(B.key, True, "")
    assert got == [("192.0.2.1", False, "push: disk full"), ("192.0.2.2", True, "push")]
    assert w.watched == {A.key, B.key}  # the http endpoint is not watched


def test_no_push_for_a_ttl_is_a_failure_and_again_after_every_further_ttl() -> None:
    w, clock, got = watch()
    clock.advance(19.9)
    w.push(A.key, True, "")
    assert w.expire(clock.monotonic()) == 0
    clock.advance(0.2)  # B's ttl from the start has ended, A pushed 0.2 s ago
    assert w.expire(clock.monotonic()) == 1
    assert got[-1] == ("192.0.2.2", False, "no push within 20s")
    clock.advance(19.8)  # A: 20 s since its push
    assert w.expire(clock.monotonic()) == 1 and got[-1][0] == "192.0.2.1"
    clock.advance(60.0)  # three more ttls pass in one step: one failure each, not three at once
    assert w.expire(clock.monotonic()) == 2
    assert w.expire(clock.monotonic()) == 0


def test_a_push_for_an_endpoint_not_watched_is_a_key_error() -> None:
    w, _, got = watch()
    for key in (HTTP.key, ("app.gslb.test.", "192.0.2.9")):
        try:
            w.push(key, True, "")
        except KeyError:
            continue
        raise AssertionError(f"{key} was accepted")
    assert got == []


def test_a_reload_keeps_unchanged_deadlines_and_restarts_changed_ones() -> None:
    w, clock, got = watch()
    clock.advance(15.0)
    w.update([A, replace(B, check=replace(PUSH, interval=30.0))])
    clock.advance(5.0)  # A: 20 s from the start; B's new check: 5 s of 30
    assert w.expire(clock.monotonic()) == 1 and got[-1][0] == "192.0.2.1"
    w.update([A])
    clock.advance(40.0)
    assert w.expire(clock.monotonic()) == 1 and [g[0] for g in got] == ["192.0.2.1", "192.0.2.1"]


def test_results_are_plain_probe_results() -> None:
    seen: list[ProbeResult] = []
    w = PushWatch(FakeClock(), lambda e, r: seen.append(r))
    w.update([A])
    w.push(A.key, True, "ready")
    assert seen == [ProbeResult(ok=True, detail="push: ready")]
