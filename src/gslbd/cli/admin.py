"""`gslbd status` and `gslbd admin set`: clients of a running instance's admin API (stdlib HTTP only)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

DEFAULT_API = "http://127.0.0.1:8080"
TOKEN_ENV = "GSLBD_API_TOKEN"
TIMEOUT = 10.0
STATES = ("up", "down", "obey")
COLUMNS = ("SERVICE", "ENDPOINT", "SITE", "HEALTH", "ADMIN", "EFFECTIVE", "SOURCE", "LAST CHANGE")
BULK_OPTIONS = (
    ("site", "SITE", "endpoints of this site"),
    ("region", "REGION", "endpoints of this locality region"),
    ("service", "GLOB", "endpoints of services whose name matches this glob (*.gslb.example.com)"),
    ("address", "NET", "endpoints in this network or address (192.0.2.0/24), or with this hostname prefix"),
)
_OPTIONS = "--site, --region, --service, --address, --tag"
PEER_COLUMNS = ("PEER", "STATE", "LAST ANSWER", "ENDPOINTS", "ERRORS", "DETAIL")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `status` and `admin` to the gslbd command line; each sets `args.run(args) -> int`."""
    status = sub.add_parser("status", help="show services and endpoint states of a running gslbd")
    status.add_argument("name", nargs="?", default=None, help="only this service (e.g. app.gslb.example.com)")
    _api_option(status)
    status.set_defaults(run=lambda a: run_status(a.api, a.name))

    admin = sub.add_parser("admin", help="change run-time state of a running gslbd")
    actions = admin.add_subparsers(dest="admin_command", metavar="ACTION")
    actions.required = True
    set_ = actions.add_parser(
        "set",
        help="force an endpoint up or down, or let it obey its checks again (kept across restarts)",
        usage="gslbd admin set SERVICE ADDRESS STATE | gslbd admin set [--site S] [--region R] "
        "[--service GLOB] [--address NET] [--tag T]... [--dry-run] STATE",
        description="One endpoint (SERVICE ADDRESS STATE), or every endpoint a selector picks (its options "
        "combined with AND: PUT /api/v1/admin, in one generation).",
    )
    set_.add_argument(
        "words", nargs="+", metavar="ARG", help="SERVICE ADDRESS STATE, or STATE with selector options"
    )
    for key, metavar, what in BULK_OPTIONS:
        set_.add_argument(f"--{key}", default=None, metavar=metavar, help=what)
    set_.add_argument(
        "--tag", action="append", default=None, metavar="TAG", help="endpoints with this tag (repeated: all)"
    )
    set_.add_argument("--dry-run", action="store_true", help="show what would change; change nothing")
    _api_option(set_)
    set_.add_argument(
        "--token", default=None, help=f"the API bearer token (default: the {TOKEN_ENV} environment variable)"
    )
    set_.add_argument(
        "--force", action="store_true", help="apply even when it breaks a safety rule (logged at WARNING)"
    )
    set_.set_defaults(run=_run_set)


def _run_set(args: argparse.Namespace) -> int:
    """The one-endpoint form, or (with a selector option) the bulk form."""
    selector: dict[str, Any] = {key: getattr(args, key) for key, _, _ in BULK_OPTIONS if getattr(args, key)}
    if args.tag:
        selector["tags"] = args.tag
    words: list[str] = args.words
    if not selector:
        if args.dry_run:
            return _usage(f"--dry-run needs a selector option ({_OPTIONS})")
        if len(words) != 3:
            return _usage(f"give SERVICE ADDRESS STATE, or STATE with a selector option ({_OPTIONS})")
        name, address, state = words
        if state not in STATES:
            return _usage(f"invalid choice: {state!r} (choose from {', '.join(STATES)})")
        return run_admin_set(args.api, name, address, state, args.token, args.force)
    if len(words) != 1:
        return _usage(f"with a selector give only the STATE, got {' '.join(words)!r}")
    if words[0] not in STATES:
        return _usage(f"invalid choice: {words[0]!r} (choose from {', '.join(STATES)})")
    return run_admin_bulk(args.api, selector, words[0], args.token, args.force, args.dry_run)


def _usage(message: str) -> int:
    print(f"gslbd admin set: {message}", file=sys.stderr)
    return 2


def _api_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--api", default=DEFAULT_API, metavar="URL", help=f"the admin API (default {DEFAULT_API})"
    )


class ApiError(Exception):
    """A failed API call, with the text to show."""


def _request(method: str, url: str, body: dict[str, Any] | None = None, token: str | None = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    headers = {"Accept": "application/json"}
    if data is not None:
        headers["Content-Type"] = "application/json"
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            return json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        raise ApiError(f"{exc.code} {_error_text(exc)}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        raise ApiError(f"cannot reach the API at {url}: {reason}") from None
    except ValueError as exc:
        raise ApiError(f"the API at {url} did not answer JSON: {exc}") from None


def _error_text(exc: urllib.error.HTTPError) -> str:
    try:
        doc = json.loads(exc.read())
    except (ValueError, OSError):
        return str(exc.reason)
    if isinstance(doc, dict) and isinstance(doc.get("error"), str):
        return str(doc["error"])
    return str(exc.reason)


def _when(ts: Any) -> str:
    if not isinstance(ts, int | float):
        return ""
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _source(e: dict[str, Any]) -> str:
    """config, overlay (added by the API), peer, or config patched(weight,...) by the overlay."""
    source = str(e.get("source") or "config")
    patched = e.get("patched") or []
    return f"{source} patched({','.join(patched)})" if patched else source


def _health(e: dict[str, Any]) -> str:
    """The verdict; for several checks also each one's: "down (all: web down, db up)"."""
    health = str(e.get("health", "-"))
    checks = e.get("checks")
    if not isinstance(checks, list) or not checks:
        return health
    parts = ", ".join(f"{c.get('name')} {c.get('health')}" for c in checks if isinstance(c, dict))
    return f"{health} ({e.get('health_mode')}: {parts})"


def status_rows(services: Sequence[dict[str, Any]]) -> list[tuple[str, ...]]:
    """One row per endpoint: service, endpoint, site, health, admin, effective, source, last change +
    reason; then one per config endpoint the endpoint overlay removed."""
    rows: list[tuple[str, ...]] = []
    for s in services:
        for e in s.get("endpoints", []):
            change = e.get("last_change") or {}
            last = " ".join(p for p in (_when(change.get("time")), change.get("reason") or "") if p) or "-"
            rows.append(
                (
                    s["name"],
                    e["address"],
                    e.get("site") or "-",
                    _health(e),
                    e.get("admin", "-"),
                    "up" if e.get("effective_up") else "down",
                    _source(e),
                    last,
                )
            )
        for e in s.get("removed", []):
            rows.append((s["name"], e["address"], e.get("site") or "-", "-", "-", "removed", "config", "-"))
    return rows


def format_table(rows: Sequence[tuple[str, ...]], columns: Sequence[str] = COLUMNS) -> str:
    """Columns padded to their widest cell; the last column is not padded."""
    table = [tuple(columns), *rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(columns) - 1)]
    lines = ["  ".join([*(c.ljust(w) for c, w in zip(r, widths, strict=False)), r[-1]]) for r in table]
    return "\n".join(line.rstrip() for line in lines)


def _age(seconds: Any) -> str:
    if not isinstance(seconds, int | float):
        return "never"
    return f"{seconds:.1f}s ago" if seconds < 60 else f"{seconds / 60:.1f}min ago"


def peer_rows(peers: Sequence[dict[str, Any]]) -> list[tuple[str, ...]]:
    """One row per peer site: name, fresh/stale, age of its last answer, endpoints learned, errors."""
    return [
        (
            p["name"],
            p.get("state", "-"),
            _age(p.get("last_answer_age")),
            str(p.get("endpoints", 0)),
            str(p.get("errors", 0)),
            p.get("detail") or "-",
        )
        for p in peers
    ]


def _peers(base: str) -> tuple[list[dict[str, Any]], bool]:
    """The peer sites and whether this site is partitioned, or nothing from a server without the
    exchange's route."""
    try:
        doc = _request("GET", f"{base}/api/v1/peers")
        peers: list[dict[str, Any]] = doc["peers"]
    except (ApiError, KeyError, TypeError):
        return [], False
    return peers, bool(doc.get("partitioned"))


def run_status(api: str, name: str | None = None) -> int:
    base = api.rstrip("/")
    try:
        if name is None:
            services = _request("GET", f"{base}/api/v1/services")["services"]
        else:
            services = [_request("GET", f"{base}/api/v1/services/{urllib.parse.quote(name, safe='')}")]
    except ApiError as exc:
        print(f"gslbd status: {exc}", file=sys.stderr)
        return 1
    peers, partitioned = _peers(base) if name is None else ([], False)
    if not services:
        print("no services configured")
    else:
        print(format_table(status_rows(services)))
    if peers:
        print()
        print(format_table(peer_rows(peers), PEER_COLUMNS))
        if partitioned:
            print(
                "partitioned: this site hears fewer than a majority of the sites; remote endpoints keep"
                " their last agreed verdicts (fail static)"
            )
    return 0


def _failed(exc: ApiError, token: str | None) -> int:
    hint = ""
    if str(exc).startswith("401") and not token:
        hint = f" (give --token or set {TOKEN_ENV})"
    elif str(exc).startswith("409"):
        hint = " (gslbd admin set --force applies it anyway)"
    print(f"gslbd admin set: {exc}{hint}", file=sys.stderr)
    return 1


def bulk_lines(result: dict[str, Any]) -> list[str]:
    """What a bulk change (or its dry run) did: the endpoints changed, then each answer before/after."""
    changed = result.get("changed", [])
    verb = "would set" if result.get("dry_run") else "set"
    lines = [f"{verb} {len(changed)} of {result.get('matched', 0)} matched endpoints {result.get('state')}"]
    lines += [f"  {c['service']} {c['address']}" for c in changed]
    for a in result.get("answers", []):
        lines.append(f"{a['service']} {a['type']}:")
        for when in ("before", "after"):
            answer = a[when]
            shown = ", ".join(rr.split()[-1] for rr in answer["answer"]) or answer["rcode"]
            lines.append(f"  {when + ':':8}{shown}")
    return lines


def run_admin_bulk(
    api: str, selector: dict[str, Any], state: str, token: str | None, force: bool, dry_run: bool
) -> int:
    token = token if token is not None else os.environ.get(TOKEN_ENV)
    body: dict[str, Any] = {"selector": selector, "state": state, "force": force, "dry_run": dry_run}
    try:
        result = _request("PUT", f"{api.rstrip('/')}/api/v1/admin", body, token)
    except ApiError as exc:
        return _failed(exc, token)
    print("\n".join(bulk_lines(result)))
    return 0


def run_admin_set(
    api: str, name: str, address: str, state: str, token: str | None, force: bool = False
) -> int:
    token = token if token is not None else os.environ.get(TOKEN_ENV)
    base = api.rstrip("/")
    q_name, q_address = urllib.parse.quote(name, safe=""), urllib.parse.quote(address, safe="")
    url = f"{base}/api/v1/services/{q_name}/endpoints/{q_address}/admin"
    try:
        body: dict[str, Any] = {"state": state, "force": True} if force else {"state": state}
        result = _request("PUT", url, body, token)
    except ApiError as exc:
        return _failed(exc, token)
    endpoint = result.get("endpoint") or {}
    effective = ""
    if "effective_up" in endpoint:
        effective = f" (now answered: {'yes' if endpoint['effective_up'] else 'no'})"
    print(f"{result['service']} {result['address']}: admin {result['state']}{effective}")
    return 0
