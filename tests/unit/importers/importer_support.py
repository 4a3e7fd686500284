"""Shared by the importer tests: the fixtures' directory and gslbd's own services-file reader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gslbd.config import check_config
from gslbd.errors import Problem
from gslbd.model.config import Config

DATA = Path(__file__).parent / "data"


def load_with_gslbd(tmp_path: Path, lines: str, main: str) -> tuple[Config | None, list[Problem]]:
    """What gslbd makes of `lines` as the services_file of the config `main`."""
    (tmp_path / "services.jsonl").write_text(lines, encoding="utf-8")
    path = tmp_path / "gslbd.yaml"
    path.write_text(main + "services_file: services.jsonl\n", encoding="utf-8")
    path.chmod(0o600)
    return check_config(path)


def by_name(services: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in services}
