"""One probe per check type, and what a check needs from this process (privileges, extras).

get_probe(CheckType.HTTP).run(endpoint, check) -> ProbeResult   (never raises)
check_privileges(check) -> None | "why this check cannot run here"
"""

from __future__ import annotations

from collections.abc import Mapping

from gslbd.health.probes.base import BaseProbe, Probe
from gslbd.health.probes.dns import DnsProbe
from gslbd.health.probes.exec import ExecProbe
from gslbd.health.probes.grpc import GrpcProbe, grpc_problem
from gslbd.health.probes.http import HttpProbe
from gslbd.health.probes.icmp import IcmpProbe, socket_problem
from gslbd.health.probes.tcp import TcpProbe
from gslbd.model.check import Check
from gslbd.types import CheckType

PROBES: Mapping[CheckType, Probe] = {
    CheckType.HTTP: HttpProbe(tls=False),
    CheckType.HTTPS: HttpProbe(tls=True),
    CheckType.TCP: TcpProbe(),
    CheckType.DNS: DnsProbe(),
    CheckType.GRPC: GrpcProbe(),
    CheckType.ICMP: IcmpProbe(),
    CheckType.EXEC: ExecProbe(),
}


def get_probe(check_type: CheckType) -> Probe:
    """The probe of a check type (probes are stateless apart from caches; one instance each)."""
    return PROBES[check_type]


def check_privileges(check: Check) -> str | None:
    """Why `check` cannot run in this process (icmp without a usable socket, grpc without grpcio),
    or None when it can. Meant for config load, so the problem shows before serving."""
    if check.type is CheckType.ICMP:
        return socket_problem()
    if check.type is CheckType.GRPC:
        return grpc_problem()
    return None


__all__ = ["PROBES", "BaseProbe", "Probe", "check_privileges", "get_probe"]
