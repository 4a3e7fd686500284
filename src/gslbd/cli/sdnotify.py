"""systemd's notify protocol (sd_notify(3)) for `gslbd serve` under a Type=notify unit.

    Notifier.from_environment()   reads NOTIFY_SOCKET (a path, or "@name" for the abstract namespace) and
                                  WATCHDOG_USEC/WATCHDOG_PID, and removes them from the environment so
                                  that children (exec checks, DNS workers) do not speak for this process
    ready(status)                 READY=1 once the first answer table is served
    reloading() / ready()         RELOADING=1 (with MONOTONIC_USEC) before a SIGHUP reload, READY=1 after
    stopping()                    STOPPING=1 when a stop signal arrives
    start_watchdog(loop)          WATCHDOG=1 every WATCHDOG_USEC/2 from the event loop (a stuck loop
                                  misses it, and systemd restarts the unit)

Without NOTIFY_SOCKET every call does nothing. A datagram that cannot be sent is logged once, never raised:
notification must not take the server down.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time

log = logging.getLogger(__name__)


class Notifier:
    """Sends state changes to the service manager's NOTIFY_SOCKET."""

    def __init__(self, address: str | None, watchdog_usec: int = 0) -> None:
        self.address = address
        self.watchdog_usec = watchdog_usec
        self._watchdog: asyncio.TimerHandle | None = None
        self._warned = False

    @classmethod
    def from_environment(cls) -> Notifier:
        address = os.environ.pop("NOTIFY_SOCKET", "") or None
        usec_text = os.environ.pop("WATCHDOG_USEC", "")
        pid_text = os.environ.pop("WATCHDOG_PID", "")
        usec = int(usec_text) if usec_text.isdigit() else 0
        if pid_text and pid_text != str(os.getpid()):
            usec = 0  # the watchdog is meant for another process
        return cls(address, usec)

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def send(self, *fields: str) -> bool:
        """Send `fields` ("KEY=value") as one datagram; False when there is no socket or it failed."""
        if self.address is None:
            return False
        target = "\0" + self.address[1:] if self.address.startswith("@") else self.address
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.setblocking(False)  # a manager that does not read must never stall the event loop
                sock.sendto("\n".join(fields).encode(), target)
        except OSError as exc:
            if not self._warned:
                self._warned = True
                log.warning("cannot notify the service manager at %s: %s", self.address, exc)
            return False
        return True

    def ready(self, status: str = "") -> bool:
        fields = ["READY=1", f"MAINPID={os.getpid()}"]
        return self.send(*fields, f"STATUS={status}") if status else self.send(*fields)

    def reloading(self) -> bool:
        usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        return self.send("RELOADING=1", f"MONOTONIC_USEC={usec}", "STATUS=reloading the configuration")

    def stopping(self) -> bool:
        return self.send("STOPPING=1", "STATUS=stopping")

    def start_watchdog(self, loop: asyncio.AbstractEventLoop) -> None:
        """WATCHDOG=1 now and every WATCHDOG_USEC/2 while the loop runs (nothing without WATCHDOG_USEC)."""
        if self.address is None or self.watchdog_usec <= 0 or self._watchdog is not None:
            return
        interval = self.watchdog_usec / 2e6

        def beat() -> None:
            self.send("WATCHDOG=1")
            self._watchdog = loop.call_later(interval, beat)

        beat()

    def stop_watchdog(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
