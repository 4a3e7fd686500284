"""The OpenAPI description of the endpoint overlay's routes (POST/PATCH/DELETE
/api/v1/services/{name}/endpoints[/{address}]); api/openapi.py merges it into the document."""

from __future__ import annotations

from typing import Any

from gslbd.api.openapi_console import SERVICE_NAME
from gslbd.api.openapi_console import error as _error
from gslbd.api.openapi_console import json_content as _json

_ADDRESS = {
    "name": "address",
    "in": "path",
    "required": True,
    "description": "The endpoint's address (an IP address in any form, or a hostname).",
    "schema": {"type": "string"},
}
_FORCE = {
    "name": "force",
    "in": "query",
    "required": False,
    "description": "1: apply even when it breaks a safety rule (logged)",
    "schema": {"enum": ["0", "1"]},
}
_AUTH = {
    "401": _error("No or wrong `Authorization: Bearer <token>` header."),
    "403": _error("No API token is configured (api.token / api.token_file): state changes are refused."),
}
_COMMON = {
    **_AUTH,
    "404": _error("No such service, or (PATCH, DELETE) no such endpoint."),
    "409": {
        "description": "Refused: the endpoint exists already (POST), or it would break a safety rule "
        "(named in `rules`); nothing changed",
        "content": _json("SafetyRefusal"),
    },
    "422": {
        "description": "The endpoint does not validate as a config endpoint; nothing changed",
        "content": _json("EndpointInvalid"),
    },
    "503": _error("The state file cannot be written (named with the errno); nothing changed."),
}

ENDPOINT_SCHEMAS: dict[str, Any] = {
    "EndpointMapping": {
        "type": "object",
        "description": "An endpoint as an item of `services[].endpoints` in the config (address, site, "
        "locality, weight, priority, check, probe_address, admin, tags), plus `force` (boolean).",
        "required": ["address"],
        "properties": {
            "address": {"type": "string"},
            "site": {"type": "string"},
            "weight": {"type": "integer", "minimum": 0, "maximum": 1000},
            "priority": {"type": "integer", "minimum": 0},
            "check": {"description": "a profile name, an inline check mapping, or none"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "force": {"type": "boolean"},
        },
    },
    "EndpointPatch": {
        "type": "object",
        "description": "The keys of the endpoint to replace (any endpoint key but address; null: back to "
        "the config's), plus `force` (boolean).",
        "examples": [{"weight": 5}],
    },
    "EndpointChange": {
        "type": "object",
        "properties": {
            "service": {"type": "string"},
            "address": {"type": "string"},
            "op": {"enum": ["add", "patch", "remove"]},
            "generation": {"type": "integer", "description": "the generation answering with the change"},
            "warnings": {"type": "array", "items": {"type": "string"}},
            "endpoint": {"$ref": "#/components/schemas/Endpoint"},
        },
    },
    "EndpointInvalid": {
        "type": "object",
        "properties": {
            "error": {"type": "string"},
            "errors": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"field": {"type": "string"}, "message": {"type": "string"}},
                },
            },
        },
    },
}

ENDPOINT_PATHS: dict[str, Any] = {
    "/api/v1/services/{name}/endpoints": {
        "post": {
            "summary": "Add an endpoint to a service (the endpoint overlay, kept in the state file), "
            "answered in one generation",
            "security": [{"bearer": []}],
            "parameters": [SERVICE_NAME, _FORCE],
            "requestBody": {"required": True, "content": _json("EndpointMapping")},
            "responses": {
                "201": {"description": "Added and saved", "content": _json("EndpointChange")},
                "400": _error("The body is not a JSON object."),
                **_COMMON,
            },
        }
    },
    "/api/v1/services/{name}/endpoints/{address}": {
        "patch": {
            "summary": "Replace keys of an endpoint (re-weight it); a config endpoint keeps its other keys",
            "security": [{"bearer": []}],
            "parameters": [SERVICE_NAME, _ADDRESS, _FORCE],
            "requestBody": {"required": True, "content": _json("EndpointPatch")},
            "responses": {
                "200": {"description": "Patched and saved", "content": _json("EndpointChange")},
                "400": _error("The body is not a JSON object."),
                **_COMMON,
            },
        },
        "delete": {
            "summary": "Remove an endpoint (an added one is forgotten, a config one marked removed)",
            "security": [{"bearer": []}],
            "parameters": [SERVICE_NAME, _ADDRESS, _FORCE],
            "responses": {
                "200": {"description": "Removed and saved", "content": _json("EndpointChange")},
                "400": _error('A body other than {"force": true}.'),
                **_COMMON,
            },
        },
    },
}
