"""The OpenAPI 3.1 description of the admin API, written by hand (served at /api/v1/openapi.json)."""

from __future__ import annotations

import copy
from typing import Any

from gslbd import __version__
from gslbd.api.openapi_console import CONSOLE_PATHS, CONSOLE_SCHEMAS, SERVICE_NAME
from gslbd.api.openapi_console import error as _error
from gslbd.api.openapi_console import json_content as _json
from gslbd.api.openapi_endpoints import ENDPOINT_PATHS, ENDPOINT_SCHEMAS
from gslbd.types import AdminState

_ADDRESS = {
    "name": "address",
    "in": "path",
    "required": True,
    "description": "Endpoint address as configured: an IPv4/IPv6 address or a hostname.",
    "schema": {"type": "string"},
}
_AUTH_ERRORS = {
    "401": _error("No or wrong `Authorization: Bearer <token>` header."),
    "403": _error("No API token is configured (api.token / api.token_file): state changes are refused."),
}

_WHATIF_SHARE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "changed": {"type": "integer"},
        "total": {"type": "integer"},
        "share": {"type": "number", "description": "changed / total"},
    },
}
_SCHEMAS: dict[str, Any] = {
    "WhatIfRequest": {
        "type": "object",
        "required": ["admin"],
        "properties": {
            "admin": {
                "type": "array",
                "minItems": 1,
                "items": {"type": "string", "examples": ["site=eu down", "region=us-east1 service=api.* up"]},
                "description": "Changes as `gslbd whatif --admin` takes them: KEY=VALUE... STATE, keys "
                "site, region, service (glob), address (network or prefix), tag (a,b: all); later ones win.",
            },
            "seed": {"type": "integer", "default": 0, "description": "The seed of the random draws."},
        },
    },
    "WhatIf": {
        "type": "object",
        "properties": {
            "replayed": {"type": "integer"},
            "queries": _WHATIF_SHARE,
            "client_networks": _WHATIF_SHARE,
            "services": {
                **_WHATIF_SHARE,
                "properties": {
                    **_WHATIF_SHARE["properties"],
                    "changed_names": {"type": "array", "items": {"type": "string"}},
                },
            },
            "load": {
                "type": "object",
                "description": "Endpoints answered per site, before and after.",
                "additionalProperties": {
                    "type": "object",
                    "properties": {"before": {"type": "integer"}, "after": {"type": "integer"}},
                },
            },
        },
    },
    "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {"type": "string"},
            "file": {"type": "string", "description": "With 503 from a state write: the state file."},
            "errno": {"type": "string", "description": 'With 503 from a state write: e.g. "ENOSPC".'},
        },
    },
    "LastCheck": {
        "type": ["object", "null"],
        "description": "The last probe; null before the first probe.",
        "properties": {
            "time": {"type": "number", "description": "Unix seconds"},
            "at": {"type": "string", "format": "date-time"},
            "ok": {"type": ["boolean", "null"]},
            "detail": {"type": "string", "examples": ["HTTP 200", "timeout after 2s"]},
        },
    },
    "LastChange": {
        "type": ["object", "null"],
        "description": "The last change of verdict; null before the first verdict.",
        "properties": {
            "time": {"type": "number", "description": "Unix seconds"},
            "at": {"type": "string", "format": "date-time"},
            "reason": {"type": "string", "examples": ["3 consecutive failures: timeout after 2s"]},
        },
    },
    "Endpoint": {
        "type": "object",
        "properties": {
            "address": {"type": "string"},
            "site": {"type": "string"},
            "region": {"type": ["string", "null"]},
            "zone": {"type": ["string", "null"]},
            "check": {"type": ["string", "null"], "description": "check type; null when not probed"},
            "health": {"enum": ["up", "down", "unknown"]},
            "admin": {"enum": [s.value for s in AdminState]},
            "effective_up": {"type": "boolean", "description": "a candidate for answers now"},
            "last_check": {"$ref": "#/components/schemas/LastCheck"},
            "last_change": {"$ref": "#/components/schemas/LastChange"},
            "weight": {"type": "integer"},
            "source": {
                "enum": ["config", "overlay", "peer"],
                "description": "the config file, the endpoint overlay (added by the API), or a peer site",
            },
            "patched": {
                "type": "array",
                "items": {"type": "string"},
                "description": "the keys of a config endpoint the overlay replaced",
            },
            "load": {
                "type": ["number", "null"],
                "description": "only with load feedback: the figure the answers use (0 idle, 1 full)",
            },
            "load_weight": {
                "type": ["integer", "null"],
                "description": "only with load feedback: the weight drawn by (weight_from: load, shed_load)",
            },
            "share": {
                "type": ["number", "null"],
                "description": "only with load feedback: the share of the answers it is in (null: per"
                " client)",
            },
            "health_mode": {
                "enum": ["all", "any"],
                "description": "only an endpoint with several checks: how `checks` combine into `health`",
            },
            "checks": {
                "type": "array",
                "description": "only an endpoint with several checks: each one's verdict, in config order",
                "items": {"$ref": "#/components/schemas/EndpointCheck"},
            },
        },
    },
    "EndpointCheck": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "the check profile"},
            "type": {"type": "string"},
            "health": {"enum": ["up", "down", "unknown"]},
            "last_check": {"$ref": "#/components/schemas/LastCheck"},
            "last_change": {"$ref": "#/components/schemas/LastChange"},
        },
    },
    "Service": {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "policy": {"type": "string"},
            "endpoints_up": {"type": "integer"},
            "endpoints": {"type": "array", "items": {"$ref": "#/components/schemas/Endpoint"}},
            "removed": {
                "type": "array",
                "description": "config endpoints the endpoint overlay removed (not answered)",
                "items": {
                    "type": "object",
                    "properties": {
                        "address": {"type": "string"},
                        "site": {"type": "string"},
                        "weight": {"type": "integer"},
                        "source": {"const": "config"},
                        "removed": {"const": True},
                    },
                },
            },
        },
    },
    "Services": {
        "type": "object",
        "properties": {"services": {"type": "array", "items": {"$ref": "#/components/schemas/Service"}}},
    },
    "Peer": {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "state": {"enum": ["fresh", "stale"], "description": "stale: its endpoints do not count"},
            "nameservers": {"type": "array", "items": {"type": "string"}},
            "last_answer": {
                "type": ["number", "null"],
                "description": "Unix time of the last complete answer",
            },
            "last_answer_at": {"type": ["string", "null"], "format": "date-time"},
            "last_answer_age": {"type": ["number", "null"], "description": "seconds"},
            "endpoints": {"type": "integer", "description": "addresses learned that count now"},
            "errors": {"type": "integer", "description": "failed queries"},
            "polls": {"type": "integer"},
            "failing": {"type": "boolean", "description": "the latest poll failed"},
            "detail": {"type": "string"},
            "heartbeat": {"type": ["number", "null"], "description": "the peer's last health evaluation"},
            "heard": {"type": "boolean", "description": "fresh and its latest poll answered"},
        },
    },
    "Peers": {
        "type": "object",
        "properties": {
            "peers": {"type": "array", "items": {"$ref": "#/components/schemas/Peer"}},
            "partitioned": {
                "type": "boolean",
                "description": "peers.quorum: this site hears fewer than a majority of sites (fail static)",
            },
        },
    },
    "AdminRequest": {
        "type": "object",
        "required": ["state"],
        "properties": {
            "state": {"enum": [s.value for s in AdminState]},
            "force": {"type": "boolean", "description": "apply even when it breaks a safety rule (logged)"},
        },
    },
    "SafetyRefusal": {
        "type": "object",
        "properties": {
            "error": {"type": "string"},
            "rules": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "rule": {"type": "string", "description": "safety[N]"},
                        "message": {"type": "string"},
                        "services": {"type": "array", "items": {"type": "string"}},
                    },
                },
            },
        },
    },
    "AdminResult": {
        "type": "object",
        "properties": {
            "service": {"type": "string"},
            "address": {"type": "string"},
            "state": {"enum": [s.value for s in AdminState]},
            "endpoint": {"$ref": "#/components/schemas/Endpoint"},
        },
    },
    "BulkAdminRequest": {
        "type": "object",
        "required": ["selector", "state"],
        "properties": {
            "selector": {
                "type": "object",
                "description": "every key given must match (AND); at least one key",
                "properties": {
                    "site": {"type": "string"},
                    "region": {"type": "string"},
                    "service": {"type": "string", "description": "a glob over the service name"},
                    "address": {"type": "string", "description": "a network, an address or a text prefix"},
                    "tags": {"type": "array", "items": {"type": "string"}, "description": "all of them"},
                },
            },
            "state": {"enum": [s.value for s in AdminState]},
            "force": {"type": "boolean", "description": "apply even when it breaks a safety rule (logged)"},
            "dry_run": {"type": "boolean", "description": "answer the same, change nothing"},
        },
    },
    "BulkAdminResult": {
        "type": "object",
        "properties": {
            "dry_run": {"type": "boolean"},
            "selector": {"type": "object"},
            "state": {"enum": [s.value for s in AdminState]},
            "generation": {"type": "integer", "description": "the generation answering after the change"},
            "matched": {"type": "integer", "description": "endpoints the selector picks"},
            "changed": {"type": "array", "items": {"$ref": "#/components/schemas/AdminResult"}},
            "answers": {
                "type": "array",
                "description": "the services whose answer to a plain client changes, before and after",
                "items": {"type": "object"},
            },
        },
    },
    "PushRequest": {
        "type": "object",
        "required": ["ok"],
        "properties": {"ok": {"type": "boolean"}, "detail": {"type": "string"}},
    },
    "PushResult": {
        "type": "object",
        "properties": {
            "service": {"type": "string"},
            "address": {"type": "string"},
            "ok": {"type": "boolean"},
            "endpoint": {"$ref": "#/components/schemas/Endpoint"},
        },
    },
    "ReloadResult": {
        "type": "object",
        "properties": {
            "applied": {"type": "boolean"},
            "errors": {"type": "array", "items": {"type": "string"}},
        },
    },
}


def _text(description: str, media: str = "text/plain") -> dict[str, Any]:
    return {"description": description, "content": {media: {"schema": {"type": "string"}}}}


_PATHS: dict[str, Any] = {
    "/healthz": {
        "get": {"summary": "Liveness: 200 while the process runs", "responses": {"200": _text("ok")}}
    },
    "/readyz": {
        "get": {
            "summary": "Readiness: 200 when serving, 503 during start-up and the lame-duck phase of shutdown",
            "responses": {"200": _text("ready"), "503": _text("not ready")},
        }
    },
    "/metrics": {
        "get": {
            "summary": "Prometheus metrics (text exposition format)",
            "responses": {"200": _text("Metrics")},
        }
    },
    "/api/v1/openapi.json": {
        "get": {
            "summary": "This document",
            "responses": {"200": {"description": "OpenAPI 3.1", "content": {"application/json": {}}}},
        }
    },
    "/api/v1/services": {
        "get": {
            "summary": "Every service with the health and admin state of each endpoint",
            "responses": {"200": {"description": "Services", "content": _json("Services")}},
        }
    },
    "/api/v1/services/{name}": {
        "get": {
            "summary": "One service",
            "parameters": [SERVICE_NAME],
            "responses": {
                "200": {"description": "The service", "content": _json("Service")},
                "404": _error("No such service."),
            },
        }
    },
    "/api/v1/peers": {
        "get": {
            "summary": "Peer sites of the multi-site exchange: freshness, last answer, endpoints learned",
            "responses": {"200": {"description": "Peers", "content": _json("Peers")}},
        }
    },
    "/api/v1/services/{name}/endpoints/{address}/admin": {
        "put": {
            "summary": "Set an endpoint's run-time admin state (up and down force, obey follows checks)",
            "security": [{"bearer": []}],
            "parameters": [SERVICE_NAME, _ADDRESS],
            "requestBody": {"required": True, "content": _json("AdminRequest")},
            "responses": {
                "200": {"description": "Applied and saved", "content": _json("AdminResult")},
                "400": _error('The body is not JSON like {"state": "up"|"down"|"obey"}.'),
                **_AUTH_ERRORS,
                "404": _error("No such service or endpoint."),
                "409": {
                    "description": "Refused: it would break a safety rule (named); nothing changed",
                    "content": _json("SafetyRefusal"),
                },
                "503": _error("The state file cannot be written (named with the errno); nothing changed."),
            },
        }
    },
    "/api/v1/admin": {
        "put": {
            "summary": "Set the admin state of every endpoint a selector picks, in one generation "
            "(?dry_run=1: answer the same, change nothing)",
            "security": [{"bearer": []}],
            "parameters": [
                {"name": "dry_run", "in": "query", "required": False, "schema": {"enum": ["0", "1"]}}
            ],
            "requestBody": {"required": True, "content": _json("BulkAdminRequest")},
            "responses": {
                "200": {"description": "Applied and saved (or dry run)", "content": _json("BulkAdminResult")},
                "400": _error("A bad body, an empty selector, an unknown key, a selector picking nothing."),
                **_AUTH_ERRORS,
                "409": {
                    "description": "Refused: it would break a safety rule (named); nothing changed",
                    "content": _json("SafetyRefusal"),
                },
                "503": _error("The state file cannot be written (named with the errno); nothing changed."),
            },
        }
    },
    "/api/v1/health/{name}/{address}": {
        "post": {
            "summary": "A result for an endpoint with a push check (a missing push fails after its ttl)",
            "security": [{"bearer": []}],
            "parameters": [SERVICE_NAME, _ADDRESS],
            "requestBody": {"required": True, "content": _json("PushRequest")},
            "responses": {
                "200": {"description": "Applied", "content": _json("PushResult")},
                "400": _error('The body is not JSON like {"ok": false, "detail": "disk full"}.'),
                **_AUTH_ERRORS,
                "404": _error("No such service or endpoint."),
                "409": _error("The endpoint's check is not a push check here."),
            },
        }
    },
    "/api/v1/whatif": {
        "post": {
            "summary": "What pending admin changes would do to the queries of this server's dnstap capture "
            "(log.dnstap.file), replayed through the running generation and the same with the changes; "
            "nothing is applied",
            "security": [{"bearer": []}],
            "requestBody": {"required": True, "content": _json("WhatIfRequest")},
            "responses": {
                "200": {"description": "The figures of `gslbd whatif --json`", "content": _json("WhatIf")},
                "400": _error(
                    'Not a body like {"admin": ["site=eu down"]}, a change that does not '
                    "parse, or one that selects no endpoint."
                ),
                **_AUTH_ERRORS,
                "409": _error(
                    "Nothing to replay: log.dnstap.file is not set, holds no query yet, or is "
                    "not a dnstap file."
                ),
            },
        }
    },
    "/api/v1/reload": {
        "post": {
            "summary": "Re-read the config file: a valid one is applied, an invalid one refused",
            "security": [{"bearer": []}],
            "requestBody": {
                "required": False,
                "content": {
                    "application/json": {
                        "schema": {"type": "object", "properties": {"force": {"type": "boolean"}}}
                    }
                },
            },
            "responses": {
                "200": {"description": "Applied", "content": _json("ReloadResult")},
                **_AUTH_ERRORS,
                "400": _error('A body that is not JSON like {"force": true}.'),
                "422": {
                    "description": "Refused (invalid, or breaking a safety rule): the old config serves",
                    "content": _json("ReloadResult"),
                },
            },
        }
    },
}


def openapi_document() -> dict[str, Any]:
    """A fresh copy of the document (callers may change it)."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "gslbd admin API",
            "version": __version__,
            "description": "Status, run-time admin state, reload, metrics, liveness and readiness of gslbd.",
        },
        "components": {
            "schemas": copy.deepcopy({**_SCHEMAS, **CONSOLE_SCHEMAS, **ENDPOINT_SCHEMAS}),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "paths": copy.deepcopy({**CONSOLE_PATHS, **_PATHS, **ENDPOINT_PATHS}),
    }
