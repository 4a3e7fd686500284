from collections.abc import Callable
from typing import Any

BATCH: int
BUFSIZE: int
MAX_POLICIES: int

class Table:
    def update(
        self,
        removed: tuple[bytes, ...],
        nodes: tuple[Any, ...],
        signed_removed: tuple[bytes, ...],
        signed_nodes: tuple[Any, ...],
        /,
    ) -> Table: ...
    def answer(
        self, data: bytes, ip: int, v6: bool, tcp: bool, seq: int = -1, draw: float = -1.0, /
    ) -> bytes | None: ...
    def policy_answers(self) -> tuple[int, ...]: ...
    def names(self) -> int: ...
    def seed(self, state: int, /) -> None: ...

class Slot:
    def __init__(self) -> None: ...
    def set(self, table: Table | None, /) -> None: ...

class UdpLoop:
    def __init__(
        self,
        fd: int,
        slot: Slot,
        handle: Callable[[bytes, int, bool, bool], bytes | None],
        on_error: Callable[[BaseException], object] | None,
        seed: int,
        /,
    ) -> None: ...
    def run(self) -> None: ...
    def stop(self) -> None: ...
    def counters(self) -> tuple[int, int, int, int, int, int, int, int, int, tuple[int, ...]]: ...

def build(
    settings: tuple[Any, ...],
    zones: tuple[Any, ...],
    locators: tuple[Any, ...],
    nodes: tuple[Any, ...],
    inherit: Table | None,
    signed_nodes: tuple[Any, ...],
    /,
) -> Table: ...
def diff(old: dict[bytes, Any], new: dict[bytes, Any], /) -> tuple[list[bytes], list[bytes]]: ...
