"""The marked YAML tree: lines of keys and values, YAML types, and problems of the text itself."""

from __future__ import annotations

from gslbd.config.loader import Entry, Map, Scalar, Seq, parse_yaml
from gslbd.errors import Problem

TEXT = """\
# comment
site:
  name: eu
services:
  - name: app
    endpoints:
      - address: 192.0.2.1
        weight: 2
  - {name: web, ttl: 5}
"""


def test_every_key_and_value_keeps_its_line() -> None:
    tree, problems = parse_yaml(TEXT, "t.yaml")
    assert problems == []
    assert isinstance(tree, Map)
    site = tree.get("site")
    assert site is not None and site.key_line == 2
    assert isinstance(site.value, Map)
    assert site.value.entries == (Entry("name", 3, Scalar(3, "eu")),)
    services = tree.get("services")
    assert services is not None and isinstance(services.value, Seq)
    first, second = services.value.items
    assert (first.line, second.line) == (5, 9)
    assert isinstance(first, Map)
    endpoints = first.get("endpoints")
    assert endpoints is not None and isinstance(endpoints.value, Seq)
    (endpoint,) = endpoints.value.items
    assert endpoint == Map(7, (Entry("address", 7, Scalar(7, "192.0.2.1")), Entry("weight", 8, Scalar(8, 2))))
    assert second == Map(9, (Entry("name", 9, Scalar(9, "web")), Entry("ttl", 9, Scalar(9, 5))))


def test_scalars_have_their_yaml_types() -> None:
    tree, _ = parse_yaml("a: 5\nb: 5s\nc: true\nd: 1.5\ne:\nf: '5'\n", "t.yaml")
    assert isinstance(tree, Map)
    assert [(e.key, e.value) for e in tree.entries] == [
        ("a", Scalar(1, 5)),
        ("b", Scalar(2, "5s")),
        ("c", Scalar(3, True)),
        ("d", Scalar(4, 1.5)),
        ("e", Scalar(5, None)),
        ("f", Scalar(6, "5")),
    ]


def test_merge_keys_and_aliases_are_followed() -> None:
    tree, problems = parse_yaml("base: &b {port: 80, path: /}\nweb:\n  <<: *b\n  port: 8080\n", "t.yaml")
    assert problems == []
    assert isinstance(tree, Map)
    web = tree.get("web")
    assert web is not None and isinstance(web.value, Map)
    assert {e.key: e.value.value for e in web.value.entries if isinstance(e.value, Scalar)} == {
        "port": 8080,
        "path": "/",
    }


def test_invalid_yaml_gives_one_problem_with_the_parser_message_and_line() -> None:
    assert parse_yaml("a: 1\n  b: 2\n", "t.yaml") == (
        None,
        [Problem("t.yaml", 2, "", "invalid YAML: mapping values are not allowed here")],
    )
    assert parse_yaml("a: 'open\n", "t.yaml") == (
        None,
        [
            Problem(
                "t.yaml",
                2,
                "",
                "invalid YAML: while scanning a quoted scalar: found unexpected end of stream",
            )
        ],
    )


def test_duplicate_keys_non_string_keys_and_bad_values_are_problems() -> None:
    tree, problems = parse_yaml("a: 1\nb:\n  c: 1\n  c: 2\n3: x\nd: 2024-13-01\n", "t.yaml")
    assert tree is not None
    assert problems == [
        Problem("t.yaml", 4, "b.c", "duplicate key 'c' (first on line 3)"),
        Problem("t.yaml", 5, "", "keys must be strings, got 3"),
        Problem("t.yaml", 6, "d", "invalid YAML value: month must be in 1..12"),
    ]


def test_empty_text_and_several_documents() -> None:
    assert parse_yaml("", "t.yaml") == (None, [])
    assert parse_yaml("a: 1\n---\nb: 2\n", "t.yaml") == (
        None,
        [
            Problem(
                "t.yaml",
                2,
                "",
                "invalid YAML: expected a single document in the stream: but found another document",
            )
        ],
    )
