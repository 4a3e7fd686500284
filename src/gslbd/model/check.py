"""Health-check profiles. Every key of every check type is parsed now; probes act on them."""

from __future__ import annotations

from dataclasses import dataclass, field

from gslbd.types import CheckType, HealthMode


@dataclass(frozen=True, slots=True)
class Check:
    """A named (or inline) health-check profile. Durations are seconds."""

    name: str
    type: CheckType
    port: int | None = None
    interval: float = 5.0
    timeout: float = 2.0
    rise: int = 2
    fall: int = 3
    window: int = 0  # the last N results of which `fall` failed make it down; 0: fall (consecutive)
    initial: bool = True  # the verdict before the first result: up (True) or down
    # http / https
    path: str = "/"
    host: str | None = None
    expect_status: tuple[int, ...] = ()  # empty: any 2xx
    expect_body: str | None = None
    tls_verify: bool = True
    ca_file: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    # tcp
    send: str | None = None
    expect: str | None = None
    # dns
    query: str | None = None
    qtype: str = "A"
    expect_rcode: str = "NOERROR"
    expect_answer: str | None = None
    # grpc
    service: str = ""
    # icmp
    count: int = 1
    # exec
    command: tuple[str, ...] = field(default_factory=tuple)

    def effective_port(self) -> int | None:
        """The port probed: the configured one, else the type's default (80 http, 443 https, 53 dns)."""
        if self.port is not None:
            return self.port
        return {CheckType.HTTP: 80, CheckType.HTTPS: 443, CheckType.DNS: 53}.get(self.type)


@dataclass(frozen=True, slots=True)
class CheckSet:
    """`endpoints[].checks: [a, b]` with `health: all|any`: each check runs its own verdict machine
    (rise, fall, window) and the endpoint is up when all (any) of their verdicts are up
    (health/combine.py)."""

    checks: tuple[Check, ...]
    health: HealthMode = HealthMode.ALL

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.checks)
