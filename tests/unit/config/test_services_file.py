"""`services_file`: services as JSON Lines, validated by the services' own rules, located by line, and
read again only where a line changed."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from gslbd.config import check_config
from gslbd.config.service_file import forget
from gslbd.config.textdiff import common_suffix
from gslbd.model.config import Config

MAIN = """\
site: {name: eu}
sites: {us: {}}
zones:
  - origin: gslb.example.com.
    ttl: 30
    nameservers: [{name: ns1, address: 127.0.0.2}]
services_file: services.jsonl
"""

INLINE = """\
services:
  - name: web
    policy: failover
    failover_order: [eu, us]
    endpoints: [{address: 192.0.2.1, site: eu}, {address: "2001:db8::1", site: us}]
"""

WEB = {
    "name": "web",
    "policy": "failover",
    "failover_order": ["eu", "us"],
    "endpoints": [{"address": "192.0.2.1", "site": "eu"}, {"address": "2001:db8::1", "site": "us"}],
}


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    forget()
    yield
    forget()


def write(tmp_path: Path, lines: list[str], main: str = MAIN) -> Path:
    (tmp_path / "services.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    path = tmp_path / "gslbd.yaml"
    path.write_text(main, encoding="utf-8")
    path.chmod(0o600)
    return path


def service(name: str, address: str = "192.0.2.9", **extra: object) -> str:
    return json.dumps({"name": name, "endpoints": [{"address": address}], **extra})


def loaded(path: Path) -> Config:
    config, problems = check_config(path)
    assert config is not None, problems
    return config


def test_a_service_in_the_file_is_the_same_as_the_same_service_inline(tmp_path: Path) -> None:
    from_file = loaded(write(tmp_path, [json.dumps(WEB)]))
    inline = loaded(write(tmp_path / "..", [], MAIN.replace("services_file: services.jsonl\n", INLINE)))
    assert from_file.services == inline.services
    assert [s.name for s in from_file.sites] == [s.name for s in inline.sites]


def test_blank_and_comment_lines_are_skipped_and_inline_services_come_first(tmp_path: Path) -> None:
    path = write(tmp_path, ["# generated", "", service("a"), "   ", service("b")], MAIN + INLINE)
    assert [s.name for s in loaded(path).services] == [
        "web.gslb.example.com.",
        "a.gslb.example.com.",
        "b.gslb.example.com.",
    ]


def test_problems_name_the_services_file_its_line_and_the_field(tmp_path: Path) -> None:
    lines = [service("a"), service("b", "not-an-address"), "{not json", "[1, 2]", service("a", "192.0.2.7")]
    path = write(tmp_path, lines)
    config, problems = check_config(path)
    assert config is None
    source = str(tmp_path / "services.jsonl")
    found = {(p.file, p.line, p.path) for p in problems if p.severity == "error"}
    assert found == {
        (source, 2, "endpoints[0].address"),
        (source, 3, ""),
        (source, 4, ""),
        (source, 5, "name"),
    }
    assert any("invalid JSON" in p.message for p in problems if p.line == 3)
    assert any("duplicate service" in p.message and "line 1" in p.message for p in problems if p.line == 5)


def test_a_name_defined_inline_and_in_the_file_is_an_error(tmp_path: Path) -> None:
    config, problems = check_config(write(tmp_path, [json.dumps(WEB)], MAIN + INLINE))
    assert config is None
    assert [(p.line, p.path) for p in problems if p.severity == "error"] == [(1, "name")]


def test_a_duplicate_key_in_a_line_is_an_error(tmp_path: Path) -> None:
    line = '{"name": "a", "name": "b", "endpoints": []}'
    config, problems = check_config(write(tmp_path, [line]))
    assert config is None
    assert "duplicate key 'name'" in problems[0].message


def test_an_unreadable_services_file_is_a_located_error(tmp_path: Path) -> None:
    path = tmp_path / "gslbd.yaml"
    path.write_text(MAIN, encoding="utf-8")
    config, problems = check_config(path)
    assert config is None
    assert (problems[0].file, problems[0].line, problems[0].path) == (str(path), 7, "services_file")
    assert "cannot read the services file" in problems[0].message


def test_a_reload_reuses_the_services_of_unchanged_lines_and_reads_changed_ones(tmp_path: Path) -> None:
    lines = [service(f"s{i}", f"192.0.2.{i}") for i in range(1, 6)]
    first = loaded(write(tmp_path, lines))
    lines[2] = service("s3", "198.51.100.3")
    second = loaded(write(tmp_path, lines))
    assert [a is b for a, b in zip(first.services, second.services, strict=True)] == [
        True,
        True,
        False,
        True,
        True,
    ]
    assert second.services[2].endpoints[0].address == "198.51.100.3"


def test_a_change_elsewhere_in_the_config_reads_every_line_again(tmp_path: Path) -> None:
    lines = [service("a")]
    first = loaded(write(tmp_path, lines))
    second = loaded(write(tmp_path, lines, MAIN.replace("ttl: 30", "ttl: 45")))
    assert first.services[0] is not second.services[0]
    assert (first.services[0].ttl, second.services[0].ttl) == (30, 45)


def test_a_line_with_a_warning_keeps_its_service_and_warns_at_every_load(tmp_path: Path) -> None:
    path = write(tmp_path, [service("a", weights={"eu": 1})])  # weights without the weighted policy
    for _ in range(2):
        config, problems = check_config(path)
        assert config is not None
        assert [s.name for s in config.services] == ["a.gslb.example.com."]
        assert [(p.line, p.path, p.severity) for p in problems] == [(1, "weights", "warning")]


def test_inserted_moved_and_deleted_lines_keep_the_services_of_the_other_lines(tmp_path: Path) -> None:
    lines = [service(f"s{i}", f"192.0.2.{i}") for i in range(1, 9)]
    first = {s.name: s for s in loaded(write(tmp_path, lines)).services}
    edited = [lines[0], service("new", "198.51.100.1"), lines[1], lines[5], lines[3], lines[4], lines[7]]
    second = loaded(write(tmp_path, edited)).services
    assert [s.name.split(".")[0] for s in second] == ["s1", "new", "s2", "s6", "s4", "s5", "s8"]
    assert all(s is first[s.name] for s in second if s.name in first)


def test_a_broken_line_is_reported_at_every_load_until_it_is_fixed(tmp_path: Path) -> None:
    lines = [service("a"), service("b", "bad"), service("c")]
    for _ in range(2):
        config, problems = check_config(write(tmp_path, lines))
        assert config is None
        errors = [(p.line, p.path) for p in problems if p.severity == "error"]
        assert errors == [(2, "endpoints[0].address")]
    lines[1] = service("b", "192.0.2.2")
    assert [s.name[0] for s in loaded(write(tmp_path, lines)).services] == ["a", "b", "c"]


def test_a_locality_name_of_a_file_service_that_clashes_is_located_in_the_file(tmp_path: Path) -> None:
    main = MAIN.replace("sites: {us: {}}", "sites: {us: {locality: {region: us}}}")
    clash = json.dumps(
        {"name": "app", "locality_names": True, "endpoints": [{"address": "192.0.2.1", "site": "us"}]}
    )
    config, problems = check_config(write(tmp_path, [service("a"), service("app.us"), clash], main))
    assert config is None
    assert [(p.file, p.line, p.path) for p in problems if p.severity == "error"] == [
        (str(tmp_path / "services.jsonl"), 3, "locality_names")
    ]
    assert "also the service 'app.us.gslb.example.com.'" in problems[0].message


def edit(lines: list[str], rng: random.Random, serial: int) -> None:
    """One random edit of a services file: a line added, removed, changed, blanked, broken or made a
    duplicate of another service."""
    what = rng.random()
    at = rng.randrange(len(lines) + 1)
    if what < 0.3 or not lines:
        lines.insert(at, service(f"n{serial}", f"192.0.2.{serial % 250 + 1}"))
    elif what < 0.5:
        del lines[min(at, len(lines) - 1)]
    elif what < 0.7:
        i = min(at, len(lines) - 1)
        lines[i] = service(f"c{serial}", f"198.51.100.{serial % 250 + 1}", ttl=rng.randrange(5, 60))
    elif what < 0.8:
        lines.insert(at, rng.choice(["", "# comment", "   "]))
    elif what < 0.9:
        lines.insert(
            at,
            rng.choice([service(f"b{serial}", "bad"), "{broken", service(f"w{serial}", weights={"eu": 1})]),
        )
    else:
        taken = [line for line in lines if line.startswith("{")]
        if taken:
            lines.insert(at, rng.choice(taken))  # a duplicate name


def repair(lines: list[str]) -> None:
    """Take out the broken lines and the repeated services, as an operator fixing the file would."""
    seen: set[str] = set()
    kept = []
    for line in lines:
        if line == "{broken" or '"bad"' in line or line in seen:
            continue
        seen.add(line)
        kept.append(line)
    lines[:] = kept


@pytest.mark.parametrize("seed", range(10))
def test_reloads_of_an_edited_file_give_what_a_fresh_load_gives(tmp_path: Path, seed: int) -> None:
    """The remembered lines and the patched services of a reload are exactly what reading the whole
    file again would give: the same services, the same problems at the same lines."""
    rng = random.Random(seed)
    lines = [service(f"s{i}", f"192.0.2.{i + 1}") for i in range(30)]
    lines[3] = "# a comment with \u2028 in it (a line ends at a newline only)"
    newline = "\r\n" if seed % 2 else "\n"
    path = write(tmp_path, [])
    configs = 0
    for serial in range(25):
        edit(lines, rng, serial)
        if rng.random() < 0.5:
            repair(lines)
        data = newline.join(lines).encode() + (newline.encode() if rng.random() < 0.7 else b"")
        if rng.random() < 0.1:
            data += b'{"name": "\xff"}\n'  # not UTF-8
        (tmp_path / "services.jsonl").write_bytes(data)
        again = check_config(path)
        forget()
        fresh = check_config(path)
        assert again == fresh
        configs += fresh[0] is not None
        check_config(path)  # remembered for the next edit
    assert configs >= 3  # not only broken files


@pytest.mark.parametrize("seed", range(3))
def test_the_common_end_of_two_files_is_found_across_chunks(seed: int) -> None:
    """`common_suffix` (how a reload finds the unchanged last lines) equals a byte-by-byte count,
    for files larger than its 64 KiB chunks with one difference anywhere or none."""
    rng = random.Random(seed)
    for _ in range(20):
        a = bytearray(rng.randbytes(rng.randrange(0, 200_000)))
        b = bytearray(a)
        if a and rng.random() < 0.8:
            b[rng.randrange(len(b))] ^= 1
        a[:0] = rng.randbytes(rng.randrange(3))
        most = max(0, min(len(a), len(b)) - rng.randrange(3))
        expected = 0
        while expected < most and a[-1 - expected] == b[-1 - expected]:
            expected += 1
        assert common_suffix(bytes(a), bytes(b), most) == expected
