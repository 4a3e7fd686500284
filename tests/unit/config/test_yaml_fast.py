"""The fast YAML reader (config/yaml_fast.py, libyaml into plain values) means what the marked loader
means, and every problem it leads to is worded and located as the marked loader words and locates it;
a reload that changes a few services (config/yaml_reload.py) gives what a fresh load gives."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from gslbd.config import check_config, check_config_text, yaml_fast, yaml_reload
from gslbd.config.fast import plain_map
from gslbd.config.loader import Map, Seq, parse_yaml
from gslbd.errors import Problem

HEAD = """\
version: 1
site: {name: eu}
zones:
  - origin: gslb.example.com.
    nameservers: [{name: ns1, address: 127.0.0.2}]
checks:
  web: {type: tcp, port: 80}
"""


def service(i: int, address: str | None = None) -> str:
    return f"  - {{name: s{i}, check: web, endpoints: [{{address: {address or f'10.0.0.{i}'}, site: eu}}]}}\n"


def block_service(i: int) -> str:
    return (
        f"  - name: b{i}\n    policy: weighted\n    weights: {{eu: 1}}\n"
        f"    endpoints:\n      - address: 10.1.0.{i}\n"
    )


def config(*services: str, tail: str = "") -> str:
    return HEAD + "services:\n" + "".join(services) + tail


def marked_only(text: str, monkeypatch: pytest.MonkeyPatch) -> tuple[object, list[str]]:
    """What the marked loader alone makes of `text` (the fast reader switched off)."""
    with monkeypatch.context() as m:
        m.setenv("GSLBD_NATIVE", "0")
        made, problems = check_config_text(text, "c.yaml")
    return made, [str(p) for p in problems]


def both(text: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The problems of `text`, asserted the same (and the same config) from both readers."""
    made, problems = check_config_text(text, "c.yaml")
    assert marked_only(text, monkeypatch) == (made, [str(p) for p in problems])
    return [str(p) for p in problems]


def test_libyaml_and_the_fast_reader_are_here_where_libyaml_s_header_is() -> None:
    assert yaml.__with_libyaml__
    if Path("/usr/include/yaml.h").exists():
        assert yaml_fast.available()


SCALARS = st.one_of(
    st.sampled_from(
        [
            "yes",
            "No",
            "on",
            "OFF",
            "y",
            "n",
            "~",
            "null",
            "Null",
            "NULL",
            "true",
            "1.5",
            "-3",
            "+5",
            "-0",
            "0",
            "012",
            "0x1f",
            "1_000",
            "0o17",
            "0b101",
            "2024-01-01",
            "2024-13-45",
            "2001-12-14t21:59:43.10-05:00",
            "190:20:30",
            ".inf",
            "-.inf",
            ".nan",
            "5s",
            "10.0.0.1",
            "2001:db8::1",
            "2001:db8:0:0:1:2:3:4",
            "1e5",
            "1.0e+5",
            "app",
            "_x",
            "'q'",
            '"1"',
            '"yes"',
            "=",
            "12345678901234567890123",
            "1:30",
            "-",
            "+",
        ]
    ),
    st.text(alphabet="abefnNyY01239:.-+_~ tTeE", min_size=1, max_size=10).map(str.strip).filter(bool),
)


@given(SCALARS)
def test_the_fast_reader_types_every_scalar_like_the_safe_loader(value: str) -> None:
    text = f"services:\n  - {{k: {value}}}\n  - k: {value}\n"
    try:
        expected = yaml.safe_load(text)["services"]
    except (yaml.YAMLError, ValueError):
        assert yaml_fast.read_fast(text, "t.yaml") is None  # the marked loader says why
        return
    found = yaml_fast.read_fast(text, "t.yaml")
    if found is None:  # outside the subset (e.g. an invalid date): the marked loader reads it
        return
    _, services = found
    assert services is not None
    assert repr(services.values) == repr(expected)  # repr: a NaN equals nothing, not even itself
    assert [type(v["k"]) for v in services.values] == [type(v["k"]) for v in expected]  # type: ignore[index]


def test_the_tree_and_the_items_are_the_marked_loader_s() -> None:
    text = config(
        service(1), block_service(2), "  # a comment\n\n", service(3), tail="topology: {networks: []}\n"
    )
    marked, problems = parse_yaml(text, "c.yaml")
    found = yaml_fast.read_fast(text, "c.yaml")
    assert found is not None and problems == []
    tree, services = found
    assert isinstance(tree, Map) and isinstance(marked, Map) and services is not None
    assert [e for e in tree.entries if e.key != "services"] == [
        e for e in marked.entries if e.key != "services"
    ]
    entry = marked.get("services")
    assert entry is not None and isinstance(entry.value, Seq)
    items = entry.value.items
    assert services.values == [plain_map(item) for item in items if isinstance(item, Map)]
    assert services.lines == [item.line for item in items] == [9, 10, 17]
    for k, item in enumerate(items):  # an item read again from its own lines: the same marked node
        assert services.marked(k) == (item, [])


@pytest.mark.parametrize(
    "text",
    [
        "base: &b {port: 80}\nweb: *b\n",
        "web:\n  <<: {port: 80}\n  path: /\n",
        "a: !!str 5\n",
        "a: 1\na: 2\n",
        "1: x\n",
        "on: x\n",
        "a: 1\n---\nb: 2\n",
        "a: 1\n  b: 2\n",
        "services:\n  -\n    name: x\n",
        "services:\n  - &s {name: x}\n",
        "services:\n  - {name: s2, ttl: 2024-13-45}\n",
    ],
)
def test_what_the_fast_reader_does_not_read_is_left_to_the_marked_loader(text: str) -> None:
    assert yaml_fast.read_fast(text, "t.yaml") is None


BROKEN = [
    config(service(1), service(2, "10.0.0.300")),
    config(service(1), block_service(2).replace("10.1.0.2", "nowhere"), service(3)),
    config(service(1), service(1)),
    config(service(1), "  - {name: s2, ttl: -5, endpoints: [{address: 10.0.0.2}]}\n"),
    config(service(1), "  - {name: s2, endpoints: [{address: 10.0.0.2}], colour: red}\n"),
    config(service(1), "  - just a string\n", block_service(3)),
    config(service(1), "  - # nothing but a comment\n", service(3)),
    config(service(1), "  -\n", service(3)),
    config(service(1), "  - {name: s2, check: nope, endpoints: [{address: 10.0.0.2}]}\n"),
    config(service(1), "  - {name: s2, endpoints: [{address: 10.0.0.2}, {address: 10.0.0.2}]}\n"),
    config(block_service(1).replace("weights: {eu: 1}", "weights: {us: 1}")),
    config(service(1), tail="checks2: {}\n"),
]


@pytest.mark.parametrize("text", BROKEN)
def test_a_problem_in_an_item_read_without_marks_is_located_as_the_marked_loader_locates_it(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert yaml_fast.read_fast(text, "c.yaml") is not None  # the fast reader reads these
    assert both(text, monkeypatch)


def test_a_value_the_safe_loader_cannot_make_is_located_by_the_marked_loader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = config(service(1), "  - {name: s2, ttl: 2024-13-45, endpoints: [{address: 10.0.0.2}]}\n")
    assert [
        p for p in both(text, monkeypatch) if p.startswith("c.yaml:10: services[1].ttl: invalid YAML value")
    ]


def test_located_errors_name_the_item_s_file_line_and_dotted_field() -> None:
    text = config(service(1), block_service(2).replace("10.1.0.2", "10.1.0.300"), service(1))
    _, problems = check_config_text(text, "c.yaml")
    assert [str(p) for p in problems if p.severity == "error"] == [
        "c.yaml:14: services[1].endpoints[0].address: '10.1.0.300' is neither an IP address nor a hostname "
        "ending in a dot",
        "c.yaml:15: services[2].name: duplicate service 's1.gslb.example.com.' (also services[0])",
    ]


def test_a_reload_still_counts_the_check_profiles_unchanged_items_use(tmp_path: Path) -> None:
    path = tmp_path / "gslbd.yaml"
    unchecked = "  - {name: s2, endpoints: [{address: 10.0.0.2}]}\n"
    path.write_text(config(service(1), unchecked))
    _, first = check_config(path)
    path.write_text(config(service(1), unchecked.replace("10.0.0.2", "10.0.0.3")))
    _, second = check_config(path)
    assert [p for p in first if p.path == "checks.web"] == [p for p in second if p.path == "checks.web"] == []
    path.write_text(config(unchecked))
    _, third = check_config(path)
    assert [p.message for p in third if p.path == "checks.web"] == ["check profile is never used"]


EDITS = [
    (
        "one service changed",
        lambda n: [service(i, "10.9.9.9" if i == n // 2 else None) for i in range(n)],
        "",
    ),
    ("one service removed", lambda n: [service(i) for i in range(n) if i != 3], ""),
    (
        "services added in the middle",
        lambda n: (
            [service(i) for i in range(4)]
            + [block_service(90), service(91)]
            + [service(i) for i in range(4, n)]
        ),
        "",
    ),
    ("a service added at the end", lambda n: [service(i) for i in range(n + 1)], ""),
    ("the first service changed", lambda n: [service(0, "10.7.7.7")] + [service(i) for i in range(1, n)], ""),
    ("a broken service", lambda n: [service(i, "10.0.0.300" if i == 5 else None) for i in range(n)], ""),
    ("a duplicate added", lambda n: [service(i) for i in range(n)] + [service(2)], ""),
    (
        "indentation changed",
        lambda n: [service(i) for i in range(5)] + ["    - {name: x}\n"] + [service(i) for i in range(5, n)],
        "",
    ),
    (
        "a key after the list",
        lambda n: [service(i) for i in range(n)],
        "topology: {networks: []}\nchecks2: 1\n",
    ),
    (
        "a block service changed",
        lambda n: [service(i) for i in range(n - 1)] + [block_service(n).replace("eu: 1", "eu: 2")],
        "",
    ),
]


@pytest.mark.parametrize(("what", "services", "tail"), EDITS, ids=[e[0] for e in EDITS])
def test_a_reload_gives_what_a_fresh_load_gives(
    what: str, services: object, tail: str, tmp_path: Path
) -> None:
    n = 12
    path = tmp_path / "gslbd.yaml"
    first = [service(i) for i in range(n - 1)] + [block_service(n)]
    path.write_text(config(*first, tail="topology: {networks: []}\n"))
    before, _ = check_config(path)
    assert before is not None
    path.write_text(config(*services(n), tail=tail or "topology: {networks: []}\n"))  # type: ignore[operator]
    reloaded, problems = check_config(path)
    yaml_reload.forget()
    fresh, fresh_problems = check_config(path)
    assert (reloaded, [str(p) for p in problems]) == (fresh, [str(p) for p in fresh_problems])


def test_a_reload_keeps_the_service_objects_of_unchanged_items(tmp_path: Path) -> None:
    path = tmp_path / "gslbd.yaml"
    path.write_text(config(*(service(i) for i in range(20)), block_service(20)))
    before, _ = check_config(path)
    path.write_text(
        config(*(service(i, "10.9.9.9" if i == 7 else None) for i in range(20)), block_service(20))
    )
    after, _ = check_config(path)
    assert before is not None and after is not None
    kept = [i for i, (a, b) in enumerate(zip(before.services, after.services, strict=True)) if a is b]
    assert kept == [i for i in range(21) if i != 7]
    assert after.services[7].endpoints[0].address == "10.9.9.9"


def test_a_warning_of_an_unchanged_item_is_reported_again_on_reload(tmp_path: Path) -> None:
    path = tmp_path / "gslbd.yaml"
    warned = block_service(3).replace("weights: {eu: 1}", "weights: {us: 1}")
    path.write_text(config(service(1), warned, service(2)))
    _, first = check_config(path)
    path.write_text(config(service(1, "10.9.9.9"), warned, service(2)))
    _, second = check_config(path)
    assert (
        [p for p in first if p.severity == "warning"] == [p for p in second if p.severity == "warning"] != []
    )
    assert all(isinstance(p, Problem) for p in second)


def test_a_text_nested_too_deeply_is_one_problem_not_a_crash() -> None:
    assert yaml_fast.read_fast("a: " + "[" * 1000 + "]" * 1000, "t.yaml") is None  # left to PyYAML
    _, problems = check_config_text("a: " + "[" * 5000 + "]" * 5000, "t.yaml")
    assert [str(p) for p in problems] == ["t.yaml: invalid YAML: nested too deeply"]


def test_text_that_is_not_unicode_is_one_problem_not_a_crash() -> None:
    _, problems = check_config_text('a: "\ud800"\n', "t.yaml")
    assert [str(p) for p in problems] == ["t.yaml: invalid YAML: not Unicode text (surrogates not allowed)"]
