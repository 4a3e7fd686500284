"""grpc probes against a real grpc.health.v1 server (needs the optional grpcio extra), and the clear
failure when grpcio is missing."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import pytest
from probe_support import closed_port, endpoint

from gslbd.health.probes import check_privileges, get_probe
from gslbd.health.probes.grpc import NOT_INSTALLED
from gslbd.model.check import Check
from gslbd.state.status import ProbeResult
from gslbd.types import CheckType

GRPC = CheckType.GRPC


@pytest.fixture(scope="module")
def health_port() -> Iterator[int]:
    grpc: Any = pytest.importorskip("grpc")
    health: Any = pytest.importorskip("grpc_health.v1.health")
    pb2: Any = pytest.importorskip("grpc_health.v1.health_pb2")
    pb2_grpc: Any = pytest.importorskip("grpc_health.v1.health_pb2_grpc")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    servicer.set("", pb2.HealthCheckResponse.SERVING)
    servicer.set("shop.Cart", pb2.HealthCheckResponse.SERVING)
    servicer.set("shop.Billing", pb2.HealthCheckResponse.NOT_SERVING)
    pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port: int = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield port
    server.stop(grace=None)


def run(port: int, service: str = "", timeout: float = 2.0) -> ProbeResult:
    ep = endpoint(type=GRPC, port=port, service=service, timeout=timeout)
    assert ep.check is not None
    return asyncio.run(get_probe(GRPC).run(ep, ep.check))


def test_grpc_serving_server_is_healthy(health_port: int) -> None:
    result = run(health_port)
    assert (result.ok, result.detail) == (True, "SERVING")


def test_grpc_a_named_service_is_asked_for(health_port: int) -> None:
    assert (run(health_port, "shop.Cart").ok, run(health_port, "shop.Cart").detail) == (True, "SERVING")
    result = run(health_port, "shop.Billing")
    assert (result.ok, result.detail) == (False, "NOT_SERVING")


def test_grpc_a_service_unknown_to_the_health_server_fails(health_port: int) -> None:
    result = run(health_port, "shop.Nothing")
    assert (result.ok, result.detail) == (False, "gRPC service 'shop.Nothing' unknown to the health server")


def test_grpc_nothing_listening_fails_as_unavailable() -> None:
    pytest.importorskip("grpc")
    result = run(closed_port(), timeout=1.0)
    assert result.ok is False
    assert result.detail.startswith("gRPC UNAVAILABLE")


def test_grpc_without_grpcio_fails_clearly_and_is_reported_at_config_load() -> None:
    script = (
        "import asyncio, sys\n"
        "sys.modules['grpc'] = None\n"  # as if grpcio were not installed
        "from gslbd.health.probes import check_privileges, get_probe\n"
        "from gslbd.model.check import Check\n"
        "from gslbd.model.service import Endpoint\n"
        "from gslbd.types import CheckType, EndpointKind\n"
        "check = Check(name='g', type=CheckType.GRPC, port=50051)\n"
        "ep = Endpoint('a.example.', '127.0.0.1', EndpointKind.IPV4, 'eu', check=check)\n"
        "print(check_privileges(check))\n"
        "print(asyncio.run(get_probe(CheckType.GRPC).run(ep, check)).detail)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == [NOT_INSTALLED, NOT_INSTALLED]


def test_grpc_with_grpcio_installed_needs_nothing_more() -> None:
    pytest.importorskip("grpc_health.v1.health_pb2")
    assert check_privileges(Check(name="g", type=GRPC, port=50051)) is None
