"""Kubernetes objects as `kubectl get -o yaml` prints them: single documents, multi-document YAML and
`kind: List` with `items`. Only the kinds a k8gb Gslb can refer to (and the Gslb itself) are known; any
other kind is an error of its line."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gslbd.importers.manifests import LocatedDict, line_of, load_documents
from gslbd.importers.result import ImportFailure

GSLB_GROUPS = ("k8gb.io", "k8gb.absa.oss")
GATEWAY_GROUP = "gateway.networking.k8s.io"
ISTIO_GROUP = "networking.istio.io"
ROUTE_KINDS = ("HTTPRoute", "GRPCRoute", "TCPRoute", "UDPRoute", "TLSRoute")
# (API group, kind) of every object the k8gb import reads.
KNOWN: frozenset[tuple[str, str]] = frozenset(
    {
        *((group, "Gslb") for group in GSLB_GROUPS),
        ("", "Service"),
        ("networking.k8s.io", "Ingress"),
        (GATEWAY_GROUP, "Gateway"),
        *((GATEWAY_GROUP, kind) for kind in ROUTE_KINDS),
        (ISTIO_GROUP, "VirtualService"),
        (ISTIO_GROUP, "Gateway"),
    }
)


@dataclass(frozen=True, slots=True)
class KubeObject:
    source: str  # the file it came from (one file is one cluster's objects)
    line: int
    group: str  # the API group ("" for the core group)
    version: str
    kind: str
    namespace: str
    name: str
    body: LocatedDict

    @property
    def ref(self) -> str:
        """kind/namespace/name, as the report names an object."""
        return f"{self.kind}/{self.namespace}/{self.name}"

    @property
    def labels(self) -> dict[str, Any]:
        return _mapping(self.body.get("metadata"), "labels")

    @property
    def annotations(self) -> dict[str, Any]:
        return _mapping(self.body.get("metadata"), "annotations")

    def get(self, *path: str) -> Any:
        """The value at a path of mappings, None where one is missing."""
        value: Any = self.body
        for key in path:
            if not isinstance(value, dict):
                return None
            value = value.get(key)
        return value


def _mapping(value: object, key: str) -> dict[str, Any]:
    found = value.get(key) if isinstance(value, dict) else None
    return found if isinstance(found, dict) else {}


def split_api_version(text: str) -> tuple[str, str]:
    group, _, version = text.rpartition("/")
    return group, version


def _object(source: str, line: int, value: object) -> KubeObject:
    if not isinstance(value, LocatedDict):
        raise ImportFailure(
            source, line, f"a Kubernetes object must be a mapping, not {type(value).__name__}"
        )
    line = value.line
    api_version, kind = value.get("apiVersion"), value.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        raise ImportFailure(source, line, "an object needs apiVersion and kind (strings)")
    group, version = split_api_version(api_version)
    if (group, kind) not in KNOWN:
        known = ", ".join(sorted({k for _, k in KNOWN}, key=str.lower))
        raise ImportFailure(
            source, line, f"unknown kind {kind!r} of apiVersion {api_version!r}; known: {known}"
        )
    if kind == "Gslb" and version != "v1beta1":
        raise ImportFailure(source, line, f"Gslb: apiVersion {api_version!r}: only v1beta1 is known")
    metadata = value.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    if not isinstance(name, str) or not name:
        raise ImportFailure(source, line, f"{kind}: metadata.name is required")
    namespace = metadata.get("namespace") if isinstance(metadata, dict) else None
    if not isinstance(namespace, str) or not namespace:
        namespace = "default"
    return KubeObject(source, line, group, version, kind, namespace, name, value)


def read_objects(source: str, text: str) -> list[KubeObject]:
    """The objects of one file, `kind: List` items in their order."""
    found: list[KubeObject] = []
    for line, document in load_documents(source, text):
        if (
            isinstance(document, dict)
            and document.get("kind") == "List"
            and document.get("apiVersion") == "v1"
        ):
            items = document.get("items")
            if not isinstance(items, list):
                raise ImportFailure(source, line_of(document) or line, "List: items must be a list")
            found.extend(_object(source, line_of(item) or line, item) for item in items)
        else:
            found.append(_object(source, line, document))
    return found
