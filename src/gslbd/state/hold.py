"""A failover or failback delay holding a service's answers (answer/delays.py decides them, the control
plane keeps them in every snapshot)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Literal

HoldKind = Literal["failover", "failback"]


@dataclass(frozen=True, slots=True)
class Hold:
    """A delay holding the answer: the site's answer is what it was (`failover`: still answered
    although it has no candidates; `failback`: still left out although it has) until `until`."""

    site: str
    kind: HoldKind
    since: float
    until: float
    delay: float

    def text(self) -> str:
        """For an outcome's reason and `gslbd explain`."""
        if self.kind == "failover":
            what = f"site {self.site} without candidates since {clock_text(self.since)}"
        else:
            what = f"site {self.site} healthy again since {clock_text(self.since)}"
        return f"{what}: {self.kind} held until {clock_text(self.until)} ({self.kind}_delay {self.delay:g}s)"

    def unheld_text(self) -> str:
        """A failback hold that could not hold: no other site has candidates."""
        return (
            f"site {self.site} healthy again since {clock_text(self.since)}: answered before its "
            f"failback_delay {self.delay:g}s is over (no other site has candidates)"
        )


def clock_text(when: float) -> str:
    """Wall seconds as UTC clock time with tenths ("12:00:31.5Z")."""
    tenths = math.floor(when * 10)
    return time.strftime("%H:%M:%S", time.gmtime(tenths // 10)) + f".{tenths % 10}Z"
