"""The console's part of the OpenAPI document (merged by api.openapi): its page, static files and the
JSON and event routes it reads (summary, service rows, answer for a client, change log, events)."""

from __future__ import annotations

from typing import Any


def json_content(schema: str) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}}


def error(description: str) -> dict[str, Any]:
    return {"description": description, "content": json_content("Error")}


def text(description: str, media: str = "text/plain") -> dict[str, Any]:
    return {"description": description, "content": {media: {"schema": {"type": "string"}}}}


SERVICE_NAME = {
    "name": "name",
    "in": "path",
    "required": True,
    "description": 'Service name, absolute ("app.gslb.example.com.") or without the final dot.',
    "schema": {"type": "string"},
}

CONSOLE_SCHEMAS: dict[str, Any] = {
    "Counts": {
        "type": "object",
        "properties": {
            "services": {
                "type": "object",
                "description": "up: every endpoint answers; degraded: some; down: none",
                "properties": {k: {"type": "integer"} for k in ("total", "up", "degraded", "down")},
            },
            "endpoints": {
                "type": "object",
                "properties": {
                    k: {"type": "integer"} for k in ("total", "up", "down", "admin_down", "admin_up")
                },
            },
        },
    },
    "Summary": {
        "type": "object",
        "description": "Counts (see Counts) plus readiness, peers and the cluster's Redis link.",
        "properties": {
            "ready": {"type": "boolean"},
            "seq": {"type": "integer", "description": "the change log's newest sequence number"},
            "services": {"type": "object"},
            "endpoints": {"type": "object"},
            "peers": {
                "type": "object",
                "properties": {
                    "total": {"type": "integer"},
                    "fresh": {"type": "integer"},
                    "stale": {"type": "integer"},
                    "sites": {
                        "type": "array",
                        "description": "Peer objects with heartbeat_age (seconds) added",
                        "items": {"$ref": "#/components/schemas/Peer"},
                    },
                },
            },
            "cluster": {"$ref": "#/components/schemas/Cluster"},
        },
    },
    "Cluster": {
        "type": ["object", "null"],
        "description": "Cluster mode's Redis link; null without `cluster`.",
        "properties": {
            "redis": {"type": "string", "description": "the URL without its password"},
            "connected": {"type": "boolean"},
            "instance_id": {"type": "string"},
            "sync_mode": {"type": "string"},
            "members": {
                "type": ["integer", "null"],
                "description": "instances subscribed to the shared health channel; null while Redis is down",
            },
        },
    },
    "ServiceRow": {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "policy": {"type": "string"},
            "state": {"enum": ["up", "degraded", "down"]},
            "endpoints": {"type": "integer"},
            "endpoints_up": {"type": "integer"},
            "unhealthy": {"type": "integer", "description": "endpoints whose probed health is down"},
            "admin_down": {"type": "integer"},
            "admin_up": {"type": "integer"},
        },
    },
    "ServiceRows": {
        "type": "object",
        "properties": {
            "seq": {"type": "integer"},
            "total": {"type": "integer", "description": "services the filter selects"},
            "offset": {"type": "integer"},
            "limit": {"type": "integer"},
            "rows": {"type": "array", "items": {"$ref": "#/components/schemas/ServiceRow"}},
            "counts": {"$ref": "#/components/schemas/Counts"},
        },
    },
    "Answer": {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "type": {"type": "string"},
            "client": {"type": "string"},
            "rcode": {"type": "string", "examples": ["NOERROR", "SERVFAIL"]},
            "answer": {
                "type": "array",
                "items": {"type": "string"},
                "examples": [["app. 30 IN A 192.0.2.1"]],
            },
            "authority": {"type": "array", "items": {"type": "string"}},
            "additional": {"type": "array", "items": {"type": "string"}},
            "location_dependent": {"type": "boolean"},
            "explanation": {"type": "string", "description": "what `gslbd explain` prints"},
        },
    },
    "Change": {
        "type": "object",
        "properties": {
            "seq": {"type": "integer"},
            "time": {"type": "number", "description": "Unix seconds"},
            "at": {"type": "string", "format": "date-time"},
            "kind": {"enum": ["verdict", "admin", "reload", "peers", "endpoint"]},
            "state": {"type": "string", "examples": ["up", "down", "obey", "applied", "refused"]},
            "service": {"type": ["string", "null"]},
            "address": {"type": ["string", "null"]},
            "detail": {"type": "string"},
        },
    },
    "Changes": {
        "type": "object",
        "properties": {
            "seq": {"type": "integer"},
            "missed": {"type": "boolean", "description": "some changes after `since` were forgotten"},
            "changes": {"type": "array", "items": {"$ref": "#/components/schemas/Change"}},
        },
    },
}

CONSOLE_PATHS: dict[str, Any] = {
    "/": {
        "get": {
            "summary": "The operator console (HTML; live through /api/v1/events)",
            "responses": {"200": text("HTML", "text/html")},
        }
    },
    "/console/{asset}": {
        "get": {
            "summary": "The console's static files (console.js, console.css)",
            "parameters": [
                {
                    "name": "asset",
                    "in": "path",
                    "required": True,
                    "schema": {"enum": ["console.js", "console.css"]},
                }
            ],
            "responses": {"200": text("the file", "text/javascript"), "404": text("no such file")},
        }
    },
    "/status": {
        "get": {
            "summary": "Plain HTML status page: one table per service, no scripts, reloads every 5 s",
            "responses": {"200": text("HTML", "text/html")},
        }
    },
    "/api/v1/summary": {
        "get": {
            "summary": "Counts of services and endpoints by state, peers, the cluster's Redis link",
            "responses": {"200": {"description": "Summary", "content": json_content("Summary")}},
        }
    },
    "/api/v1/service-rows": {
        "get": {
            "summary": "One page of compact service rows, filtered, with the counts of all services",
            "parameters": [
                {
                    "name": "q",
                    "in": "query",
                    "description": "words that must all occur in the name, an endpoint address or site",
                    "schema": {"type": "string"},
                },
                {"name": "state", "in": "query", "schema": {"enum": ["up", "degraded", "down", "admin"]}},
                {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0, "default": 0}},
                {
                    "name": "limit",
                    "in": "query",
                    "schema": {"type": "integer", "minimum": 1, "maximum": 500, "default": 100},
                },
            ],
            "responses": {
                "200": {"description": "Rows", "content": json_content("ServiceRows")},
                "400": error("A bad filter, offset or limit."),
            },
        }
    },
    "/api/v1/services/{name}/answer": {
        "get": {
            "summary": "What a client (address, or subnet sent as ECS) gets for the service now, and why",
            "parameters": [
                SERVICE_NAME,
                {
                    "name": "client",
                    "in": "query",
                    "required": True,
                    "description": "an IP address, or a subnet (10.2.0.0/16) asked as EDNS Client Subnet",
                    "schema": {"type": "string"},
                },
                {"name": "type", "in": "query", "schema": {"type": "string", "default": "A"}},
            ],
            "responses": {
                "200": {"description": "The answer", "content": json_content("Answer")},
                "400": error("No or a bad client, or an unknown type."),
                "404": error("No such service."),
            },
        }
    },
    "/api/v1/changes": {
        "get": {
            "summary": "The change log: recent verdicts, admin changes, reloads and peer changes",
            "parameters": [
                {
                    "name": "since",
                    "in": "query",
                    "description": "only changes after this sequence number (default: the newest 200)",
                    "schema": {"type": "integer", "minimum": 0},
                }
            ],
            "responses": {
                "200": {"description": "Changes, oldest first", "content": json_content("Changes")},
                "400": error("since is not an integer."),
            },
        }
    },
    "/api/v1/events": {
        "get": {
            "summary": "Server-Sent Events: `hello` at connection, then a `change` event after changes",
            "responses": {
                "200": text("An event stream", "text/event-stream"),
                "503": error("Too many event streams are open (Retry-After), or the API is stopping."),
            },
        }
    },
}
