"""The worked examples of docs/import.md are what the importers print: each example's input, run
through the importer, gives the output lines and the report the page shows."""

from __future__ import annotations

from pathlib import Path

from gslbd.importers.k8gb import import_k8gb
from gslbd.importers.octodns import import_octodns

PAGE = (Path(__file__).parents[3] / "docs" / "import.md").read_text(encoding="utf-8")
K8GB, OCTODNS = PAGE.split("\n## octoDNS\n")


def blocks(text: str, language: str) -> list[str]:
    """The fenced blocks of `text` opened by ```<language>, in order."""
    found: list[str] = []
    opened: str | None = None
    lines: list[str] = []
    for line in text.splitlines():
        if opened is None and line.startswith("```"):
            opened, lines = line[3:], []
        elif opened is not None and line == "```":
            if opened == language:
                found.append("".join(f"{x}\n" for x in lines))
            opened = None
        elif opened is not None:
            lines.append(line)
    return found


def shown(text: str, command: str) -> list[str]:
    """The lines the page shows after `$ <command>`, up to the next `$` line or the block's end."""
    block = next(b for b in blocks(text, "") if f"$ {command}\n" in b)
    after = block.split(f"$ {command}\n", 1)[1]
    return after.split("\n$ ", 1)[0].splitlines()


def test_the_k8gb_worked_example_prints_what_the_page_shows() -> None:
    eu = next(b for b in blocks(K8GB, "yaml") if "kind: List" in b)
    assert "(the us cluster's file is the same with `10.0.2.10` and `geoTag: us`)" in K8GB
    us = eu.replace("{ip: 10.0.1.10}, {ip: 10.0.1.11}", "{ip: 10.0.2.10}").replace(
        "geoTag: eu,", "geoTag: us,"
    )
    result = import_k8gb([("eu.yaml", eu), ("us.yaml", us)])
    assert result.report_text().splitlines() == shown(
        K8GB, "gslbd import k8gb eu.yaml us.yaml -o services.jsonl"
    )
    assert result.lines().splitlines() == shown(K8GB, "cat services.jsonl")


def test_the_octodns_worked_example_prints_what_the_page_shows() -> None:
    (zone,) = blocks(OCTODNS, "yaml")
    result = import_octodns("example.com.yaml", zone, "example.com")
    printed = shown(OCTODNS, "gslbd import octodns example.com.yaml")
    assert result.lines().splitlines() == [line for line in printed if line.startswith("{")]
    assert result.report_text().splitlines() == [line for line in printed if not line.startswith("{")]
