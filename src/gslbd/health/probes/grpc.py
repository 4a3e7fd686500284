"""`grpc` checks: the standard health service, grpc.health.v1.Health/Check for `service` (empty = the
whole server); healthy when the reply is SERVING. Plain-text HTTP/2 (no TLS).

grpcio is an optional extra (`pip install 'gslbd[grpc]'`): without it the probe fails with
"grpcio is not installed" and `grpc_problem` reports the same at config load.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from gslbd.health.probes.base import BaseProbe, ProbeFailed, probe_host, quote
from gslbd.model.check import Check
from gslbd.model.service import Endpoint

NOT_INSTALLED = "grpcio is not installed: grpc checks need pip install 'gslbd[grpc]'"


def _modules() -> tuple[ModuleType, ModuleType, ModuleType] | None:
    """(grpc.aio, health_pb2, health_pb2_grpc), or None without grpcio/grpcio-health-checking.
    Imported by name: grpcio ships no type information and is optional."""
    try:
        return (
            importlib.import_module("grpc.aio"),
            importlib.import_module("grpc_health.v1.health_pb2"),
            importlib.import_module("grpc_health.v1.health_pb2_grpc"),
        )
    except ImportError:
        return None


def grpc_problem() -> str | None:
    return NOT_INSTALLED if _modules() is None else None


def target(endpoint: Endpoint, check: Check) -> str:
    host = probe_host(endpoint)
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{check.effective_port()}"


class GrpcProbe(BaseProbe):
    async def attempt(self, endpoint: Endpoint, check: Check) -> tuple[bool, str]:
        modules = _modules()
        if modules is None:
            raise ProbeFailed(NOT_INSTALLED)
        aio, pb2, pb2_grpc = modules
        if check.effective_port() is None:
            raise ProbeFailed("no port to connect to")
        async with aio.insecure_channel(target(endpoint, check)) as channel:
            stub = pb2_grpc.HealthStub(channel)
            try:
                reply = await stub.Check(pb2.HealthCheckRequest(service=check.service), timeout=check.timeout)
            except aio.AioRpcError as exc:
                code = exc.code().name
                if code == "DEADLINE_EXCEEDED":
                    raise TimeoutError from None
                if code == "NOT_FOUND":
                    return False, f"gRPC service {quote(check.service)} unknown to the health server"
                if code == "UNIMPLEMENTED":
                    return False, "no gRPC health service (grpc.health.v1) on this server"
                return False, f"gRPC {code}: {exc.details() or ''}".rstrip(": ")
            status = str(pb2.HealthCheckResponse.ServingStatus.Name(reply.status))
        return status == "SERVING", status
