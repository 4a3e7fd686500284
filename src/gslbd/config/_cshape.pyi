from typing import Any

from gslbd.model.service import Service

class Reader:
    def __init__(self, spec: Any) -> None: ...
    def __call__(
        self, obj: dict[str, object], keys: int | None = None, /
    ) -> tuple[Service, tuple[str, ...]] | None: ...
