"""The k8gb fixtures have the shape k8gb's own CRDs require: every Gslb in them validates against the
openAPIV3Schema of its API group (data/crd, taken from k8gb's chart), so the importer is tested on what a
real cluster prints, and a fixture that drifts from the CRD fails here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

DATA = Path(__file__).parent / "data"
FIXTURES = ("eu-cluster.yaml", "us-cluster.yaml", "routes-cluster.yaml")


def schema(group: str, version: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((DATA / "crd" / f"{group}_gslbs.json").read_text(encoding="utf-8"))
    assert found["group"] == group and found["kind"] == "Gslb"
    versions: dict[str, dict[str, Any]] = found["versions"]
    return versions[version]


def gslbs(name: str) -> list[dict[str, Any]]:
    found = []
    for document in yaml.safe_load_all((DATA / name).read_text(encoding="utf-8")):
        items = document["items"] if document.get("kind") == "List" else [document]
        found += [item for item in items if item["kind"] == "Gslb"]
    return found


def validate(gslb: dict[str, Any]) -> None:
    group, _, version = gslb["apiVersion"].rpartition("/")
    jsonschema.Draft7Validator(schema(group, version)).validate(gslb)


@pytest.mark.parametrize("name", FIXTURES)
def test_every_gslb_of_the_fixtures_validates_against_k8gbs_crd(name: str) -> None:
    found = gslbs(name)
    assert found
    for gslb in found:
        validate(gslb)


def test_both_api_groups_are_among_the_fixtures() -> None:
    groups = {g["apiVersion"] for name in FIXTURES for g in gslbs(name)}
    assert groups == {"k8gb.io/v1beta1", "k8gb.absa.oss/v1beta1"}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda g: g["spec"].pop("strategy"), "'strategy' is a required property"),
        (lambda g: g["spec"]["strategy"].pop("type"), "'type' is a required property"),
        (lambda g: g["spec"].update(serviceHealthPolicy="Some"), "'Some' is not one of ['Any', 'All']"),
        (lambda g: g["status"].pop("geoTag"), "'geoTag' is a required property"),
        (lambda g: g["spec"]["strategy"].update(weight={"eu": "80"}), "'80' is not of type 'integer'"),
    ],
)
def test_a_gslb_that_breaks_the_crd_is_refused_by_the_schema(change: Any, message: str) -> None:
    gslb = gslbs("eu-cluster.yaml")[0]
    change(gslb)
    with pytest.raises(jsonschema.ValidationError) as caught:
        validate(gslb)
    assert caught.value.message == message
