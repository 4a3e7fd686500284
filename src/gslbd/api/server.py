"""The HTTP admin API on `api.listen` (aiohttp).

    GET  /                                   the operator console (static HTML + JS, live via events)
    GET  /console/{asset}                    the console's script and style sheet
    GET  /status                             the plain HTML status page (no scripts)
    GET  /healthz, /readyz                   liveness; readiness (503 during start-up and lame duck)
    GET  /metrics                            Prometheus text
    GET  /api/v1/openapi.json                the OpenAPI 3.1 document
    GET  /api/v1/services[/{name}]           service status (JSON)
    GET  /api/v1/peers                       peer sites of the multi-site exchange (JSON)
    GET  /api/v1/summary                     counts, peers, cluster link (the console's header)
    GET  /api/v1/service-rows?q=&state=&offset=&limit=   one page of compact service rows, with counts
    GET  /api/v1/services/{name}/answer?client=IP[/len]&type=A   what a client gets now, and why
    GET  /api/v1/changes?since=N             the change log (verdicts, admin changes, reloads)
    GET  /api/v1/events                      Server-Sent Events: a `change` event per change
    PUT  /api/v1/services/{name}/endpoints/{address}/admin   {"state": "up"|"down"|"obey", "force": false}
    PUT  /api/v1/admin[?dry_run=1]           {"selector": {"site": "eu", ...}, "state": "down",
                                             "force": false, "dry_run": false}: what the selector picks
    POST /api/v1/reload                      re-read the config file ({"force": true}: past safety rules)
    POST   /api/v1/services/{name}/endpoints            {"address": ..., "site": ..., "force": false}:
                                                        add an endpoint (the endpoint overlay)
    PATCH  /api/v1/services/{name}/endpoints/{address}  {"weight": 5, ...}: replace keys of one
    DELETE /api/v1/services/{name}/endpoints/{address}[?force=1]   remove one

State-changing calls need `Authorization: Bearer <token>` (401 without or with a wrong token). With no
token configured they are refused with 403: an open admin API is never the default. Errors under
/api/ are JSON `{"error": "..."}`; a malformed body is a 400 (never a 500 or a logged traceback), and
request size, header size, idle keep-alive and the number of connections are bounded (api/hardening.py).
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiohttp import web

from gslbd.api.collector import MetricsExporter
from gslbd.api.console import (
    ASSETS,
    RowQuery,
    answer_json,
    asset,
    changes_json,
    console_page,
    counts_json,
    parse_client,
    rows_json,
    summary_json,
)
from gslbd.api.control import Control, ServiceRow, ServiceStatus, WhatIfRefused
from gslbd.api.events import DEFAULT_MAX_CLIENTS, EventStreams
from gslbd.api.hardening import (
    HTTP_LIMITS,
    BodyError,
    JsonErrorRunner,
    count_connections,
    json_body,
    quiet_http_logger,
)
from gslbd.api.openapi import openapi_document
from gslbd.api.render import endpoint_json, peers_json, service_json, services_json, status_page
from gslbd.config.overlay_change import OverlayRefused
from gslbd.errors import NotPushed, SafetyRefused, StateError
from gslbd.limits import ConnectionBudget, process_budget
from gslbd.model.config import ListenAddress
from gslbd.model.overlay import OverlayOp
from gslbd.model.selector import Selector, selector_of
from gslbd.state.store import StateWriteError
from gslbd.types import AdminState, choices

log = logging.getLogger(__name__)

# The classic Prometheus text format that generate_latest writes (in every library version).
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# The types the answer route explains (what a service name can be asked).
ANSWER_TYPES = ("A", "AAAA", "CNAME", "ANY", "TXT", "MX", "SRV", "NS", "SOA", "CAA")
CHANGES_PAGE = 200  # change-log entries per GET /api/v1/changes at most

NO_TOKEN_MESSAGE = (
    "state-changing calls are disabled because no API token is configured; "
    "set api.token or api.token_file in the configuration"
)


def _error(status: int, message: str, headers: dict[str, str] | None = None, **extra: str) -> web.Response:
    return web.json_response({"error": message, **extra}, status=status, headers=headers)


def _absolute(name: str) -> str:
    name = name.strip().lower()
    return name if name.endswith(".") else name + "."


def _normal_address(address: str) -> str:
    """An IP address in its normal text form; a hostname absolute and lower case."""
    text = address.strip()
    try:
        return str(ipaddress.ip_address(text.strip("[]")))
    except ValueError:
        return _absolute(text)


@web.middleware
async def _json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """aiohttp's own errors (unknown route, wrong method) become JSON under /api/, and so does a bug in a
    handler (a 500 that names the exception; its traceback is logged, as a bug's must be)."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if not request.path.startswith("/api/") or exc.status < 400:
            raise
        return _error(
            exc.status,
            exc.reason,
            headers={"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else None,
        )
    except Exception as exc:
        # A client that went away, or a stream already under way, is aiohttp's to end.
        if (
            not request.path.startswith("/api/")
            or isinstance(exc, ConnectionError)
            or request.writer.output_size
        ):
            raise
        log.exception("%s %s failed", request.method, request.path)
        return _error(500, f"internal error ({type(exc).__name__}); the server log has the details")


class ApiServer:
    """The admin API of one instance. `port` is the bound port (useful with listen port 0)."""

    def __init__(
        self,
        control: Control,
        listen: ListenAddress,
        token: str | None,
        budget: ConnectionBudget | None = None,
        keepalive_timeout: float | None = None,
        *,
        max_event_clients: int = DEFAULT_MAX_CLIENTS,
        warm_rows: bool = True,
    ) -> None:
        """`budget`: the connection budget (default: the process's, shared with DNS over TCP);
        `keepalive_timeout`: seconds an idle keep-alive connection stays open (default 15);
        `warm_rows`: read the console's rows when starting (a large config reads them when first asked:
        at 100,000 services that costs seconds the start would otherwise spend before answering)."""
        self._budget = budget
        self._warm_rows = warm_rows
        self._http_limits = dict(HTTP_LIMITS)
        if keepalive_timeout is not None:
            self._http_limits["keepalive_timeout"] = keepalive_timeout
        self._control = control
        self._listen = listen
        self._token = token
        self._exporter = MetricsExporter(control.dns_counters)
        self.events = EventStreams(control.changes, max_event_clients)
        # Control.rows_version -> every service's row and the counts of them all (see _rows_now).
        self._overview: tuple[int, Sequence[ServiceRow], dict[str, Any]] | None = None
        self._runner: web.AppRunner | None = None
        self.port: int = listen.port
        self.app = self._build()

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Bind `listen` and serve. OSError when the address cannot be bound (nothing is left open)."""
        if self._runner is not None:
            return
        runner = JsonErrorRunner(
            self.app,
            access_log=None,
            handle_signals=False,
            shutdown_timeout=1.0,
            logger=quiet_http_logger(),
            **self._http_limits,
        )
        await runner.setup()
        if runner.server is not None:
            count_connections(runner.server, self._budget if self._budget is not None else process_budget())
        try:
            site = web.TCPSite(runner, self._listen.host, self._listen.port, reuse_address=True)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        if self._warm_rows:
            self._rows_now()  # the console's first page need not wait for 10,000 rows to be read
        addresses = runner.addresses
        if addresses:
            self.port = int(addresses[0][1])
        log.info("admin API on http://%s", ListenAddress(self._listen.host, self.port))

    async def stop(self) -> None:
        """Close the listening socket and finish open requests (briefly)."""
        runner, self._runner = self._runner, None
        self.events.close()  # open event streams end now, not at the shutdown timeout
        if runner is not None:
            await runner.cleanup()

    @property
    def url(self) -> str:
        host = self._listen.host
        if host in ("0.0.0.0", ""):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        return f"http://{ListenAddress(host, self.port)}"

    # -- routes --------------------------------------------------------------------------------

    def _build(self) -> web.Application:
        app = web.Application(middlewares=[_json_errors], client_max_size=64 * 1024)
        app.router.add_get("/", self._console)
        app.router.add_get("/console/{asset}", self._asset)
        app.router.add_get("/status", self._page)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/api/v1/openapi.json", self._openapi)
        app.router.add_get("/api/v1/services", self._services)
        app.router.add_get("/api/v1/services/{name}", self._service)
        app.router.add_get("/api/v1/peers", self._peers)
        app.router.add_get("/api/v1/summary", self._summary)
        app.router.add_get("/api/v1/service-rows", self._rows)
        app.router.add_get("/api/v1/services/{name}/answer", self._answer)
        app.router.add_get("/api/v1/changes", self._changes)
        app.router.add_get("/api/v1/events", self.events.handle)
        app.router.add_put("/api/v1/services/{name}/endpoints/{address}/admin", self._set_admin)
        app.router.add_put("/api/v1/admin", self._set_admin_bulk)
        app.router.add_post("/api/v1/reload", self._reload)
        app.router.add_post("/api/v1/whatif", self._whatif)
        app.router.add_post("/api/v1/health/{name}/{address}", self._push_health)
        app.router.add_post("/api/v1/services/{name}/endpoints", self._add_endpoint)
        app.router.add_patch("/api/v1/services/{name}/endpoints/{address}", self._patch_endpoint)
        app.router.add_delete("/api/v1/services/{name}/endpoints/{address}", self._remove_endpoint)
        return app

    def _find_service(self, name: str) -> ServiceStatus | None:
        """By absolute name, the name without the final dot, or a unique leading part ("app" for
        "app.gslb.example.com.")."""
        found = self._control.service(_absolute(name))
        if found is not None or name.endswith("."):
            return found
        prefix = name.strip().lower() + "."
        matches = [s for s in self._control.services() if s.name.startswith(prefix)]
        return matches[0] if len(matches) == 1 else None

    def _authorize(self, request: web.Request) -> web.Response | None:
        """None when the request may change state, else the error response."""
        if self._token is None:
            return _error(403, NO_TOKEN_MESSAGE)
        header = request.headers.get("Authorization", "")
        scheme, _, given = header.partition(" ")
        challenge = {"WWW-Authenticate": 'Bearer realm="gslbd"'}
        if scheme.lower() != "bearer" or not given.strip():
            return _error(401, "missing bearer token: send 'Authorization: Bearer <token>'", challenge)
        if not hmac.compare_digest(given.strip().encode(), self._token.encode()):
            return _error(401, "wrong bearer token", challenge)
        return None

    async def _page(self, request: web.Request) -> web.Response:
        return web.Response(
            text=status_page(self._control.services(), self._control.ready), content_type="text/html"
        )

    async def _console(self, request: web.Request) -> web.Response:
        return web.Response(body=console_page(), content_type="text/html", charset="utf-8")

    async def _asset(self, request: web.Request) -> web.Response:
        name = request.match_info["asset"]
        kind = ASSETS.get(name)
        if kind is None:
            raise web.HTTPNotFound()
        return web.Response(body=asset(name), content_type=kind, charset="utf-8")

    def _rows_now(self) -> tuple[Sequence[ServiceRow], dict[str, Any]]:
        """Every service's row and their counts, read again only when Control's rows_version moved (at
        10,000 services reading them costs more than filtering and paging them)."""
        version = self._control.rows_version
        if self._overview is None or self._overview[0] != version:
            rows = self._control.rows()
            self._overview = (version, rows, counts_json(rows))
        return self._overview[1], self._overview[2]

    async def _summary(self, request: web.Request) -> web.Response:
        seq = self._control.changes.last_seq
        cluster = await self._control.cluster()
        _, counts = self._rows_now()
        doc = summary_json(counts, self._control.peers(), cluster, self._control.ready, seq)
        return web.json_response(doc)

    async def _rows(self, request: web.Request) -> web.Response:
        try:
            query = RowQuery.parse(dict(request.query))
        except ValueError as exc:
            return _error(400, str(exc))
        seq = self._control.changes.last_seq
        rows, counts = self._rows_now()
        return web.json_response(rows_json(rows, query, seq, counts))

    async def _answer(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        service = self._find_service(name)
        if service is None:
            return _error(404, f"no service {_absolute(name)}")
        rtype = request.query.get("type", "A").strip().upper()
        if rtype not in ANSWER_TYPES:
            return _error(400, f"unknown type {rtype!r}; valid: {', '.join(ANSWER_TYPES)}")
        try:
            client_ip, ecs = parse_client(request.query.get("client", ""))
        except ValueError as exc:
            return _error(400, str(exc))
        try:
            answer = self._control.answer(service.name, rtype, client_ip, ecs)
        except KeyError:
            return _error(404, f"no service {service.name}")
        return web.json_response(answer_json(answer))

    async def _changes(self, request: web.Request) -> web.Response:
        log = self._control.changes
        since = request.query.get("since", "").strip()
        if since and not since.isdigit():
            return _error(400, "since must be a change sequence number (an integer >= 0)")
        if since:
            changes, missed = log.since(int(since), limit=CHANGES_PAGE)
            return web.json_response(changes_json(changes, log.last_seq, missed))
        return web.json_response(changes_json(list(reversed(log.recent(CHANGES_PAGE))), log.last_seq, False))

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        if self._control.ready:
            return web.Response(text="ready\n")
        return web.Response(status=503, text="not ready\n")

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self._exporter.render(), headers={"Content-Type": METRICS_CONTENT_TYPE})

    async def _openapi(self, request: web.Request) -> web.Response:
        return web.json_response(openapi_document())

    async def _services(self, request: web.Request) -> web.Response:
        return web.json_response(services_json(self._control.services()))

    async def _service(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        service = self._find_service(name)
        if service is None:
            return _error(404, f"no service {_absolute(name)}")
        return web.json_response(service_json(service))

    async def _peers(self, request: web.Request) -> web.Response:
        return web.json_response(peers_json(self._control.peers()))

    async def _set_admin(self, request: web.Request) -> web.Response:
        refused = self._authorize(request)
        if refused is not None:
            return refused
        name, address = request.match_info["name"], request.match_info["address"]
        asked = await _admin_state_of(request)
        if isinstance(asked, web.Response):
            return asked
        state, force = asked
        service = self._find_service(name)
        if service is None:
            return _error(404, f"no service {_absolute(name)}")
        wanted = _normal_address(address)
        endpoint = next((e for e in service.endpoints if e.address == wanted), None)
        if endpoint is None:
            return _error(404, f"service {service.name} has no endpoint {address}")
        try:
            await self._control.set_admin(service.name, endpoint.address, state, force)
        except KeyError:
            return _error(404, f"service {service.name} has no endpoint {address}")
        except SafetyRefused as exc:
            return _refused(exc)
        except StateError as exc:  # a write failure is logged once by the store; nothing changed
            return _not_kept(exc)
        result: dict[str, Any] = {"service": service.name, "address": endpoint.address, "state": state.value}
        return web.json_response(self._with_endpoint(result, service.name, wanted))

    def _with_endpoint(self, result: dict[str, Any], service: str, address: str) -> dict[str, Any]:
        """`result` with the endpoint's status after the change (as GET shows it), when it has one."""
        after = self._control.service(service)
        updated = None if after is None else next((e for e in after.endpoints if e.address == address), None)
        if updated is not None:
            result["endpoint"] = endpoint_json(updated)
        return result

    async def _set_admin_bulk(self, request: web.Request) -> web.Response:
        refused = self._authorize(request)
        if refused is not None:
            return refused
        asked = await _bulk_of(request)
        if isinstance(asked, web.Response):
            return asked
        selector, state, force, dry_run = asked
        try:
            done = await self._control.set_admin_bulk(selector, state, force, dry_run)
        except SafetyRefused as exc:
            return _refused(exc)
        except ValueError as exc:  # the selector picks nothing
            return _error(400, f"not changed: {exc}")
        except StateError as exc:
            return _not_kept(exc)
        return web.json_response(done)

    async def _add_endpoint(self, request: web.Request) -> web.Response:
        return await self._change_endpoint(request, OverlayOp.ADD)

    async def _patch_endpoint(self, request: web.Request) -> web.Response:
        return await self._change_endpoint(request, OverlayOp.PATCH)

    async def _remove_endpoint(self, request: web.Request) -> web.Response:
        return await self._change_endpoint(request, OverlayOp.REMOVE)

    async def _change_endpoint(self, request: web.Request, op: OverlayOp) -> web.Response:
        """The endpoint overlay: POST adds (201), PATCH replaces keys, DELETE removes (see docs/api.md)."""
        refused = self._authorize(request)
        if refused is not None:
            return refused
        asked = await _overlay_body(request, op)
        if isinstance(asked, web.Response):
            return asked
        value, force = asked
        name = request.match_info["name"]
        service = self._find_service(name)
        if service is None:
            return _error(404, f"no service {_absolute(name)}")
        address = _normal_address(request.match_info.get("address", str(value.get("address", ""))))
        try:
            done = dict(await self._control.change_endpoints(op, service.name, address, value, force))
        except OverlayRefused as exc:
            if exc.status != 422:
                return _error(exc.status, str(exc))
            errors = [{"field": p.path, "message": p.message} for p in exc.problems]
            return web.json_response({"error": str(exc), "errors": errors}, status=422)
        except SafetyRefused as exc:
            return _refused(exc)
        except StateError as exc:
            return _not_kept(exc)
        if op is not OverlayOp.REMOVE:
            done = self._with_endpoint(done, service.name, str(done["address"]))
        return web.json_response(done, status=201 if op is OverlayOp.ADD else 200)

    async def _push_health(self, request: web.Request) -> web.Response:
        """A `type: push` result: {"ok": true|false, "detail": "..."} (detail optional; "check": the
        push check meant, for an endpoint with several push checks among its `checks`)."""
        refused = self._authorize(request)
        if refused is not None:
            return refused
        name, address = request.match_info["name"], request.match_info["address"]
        usage = 'the body must be JSON like {"ok": false, "detail": "disk full"}'
        try:
            body = await json_body(request)
        except BodyError:
            return _error(400, usage)
        ok = body.get("ok") if isinstance(body, dict) else None
        detail = body.get("detail", "") if isinstance(body, dict) else None
        check = body.get("check") if isinstance(body, dict) else None  # one of several `checks`
        if not isinstance(ok, bool) or not isinstance(detail, str) or not isinstance(check, str | None):
            return _error(400, usage)
        service = self._find_service(name)
        if service is None:
            return _error(404, f"no service {_absolute(name)}")
        wanted = _normal_address(address)
        try:
            self._control.push_health(service.name, wanted, ok, detail, check)
        except KeyError:
            return _error(404, f"service {service.name} has no endpoint {address}")
        except NotPushed as exc:
            return _error(409, str(exc))
        result: dict[str, Any] = {"service": service.name, "address": wanted, "ok": ok}
        return web.json_response(self._with_endpoint(result, service.name, wanted))

    async def _reload(self, request: web.Request) -> web.Response:
        refused = self._authorize(request)
        if refused is not None:
            return refused
        force = await _reload_force(request)
        if isinstance(force, web.Response):
            return force
        errors = await self._control.reload(force)
        if errors:
            return web.json_response({"applied": False, "errors": list(errors)}, status=422)
        return web.json_response({"applied": True, "errors": []})

    async def _whatif(self, request: web.Request) -> web.Response:
        """Pending admin changes replayed over this server's dnstap capture; nothing is applied. Behind
        the token: it changes nothing, but costs CPU for as long as the capture is long."""
        refused = self._authorize(request)
        if refused is not None:
            return refused
        usage = 'the body must be JSON like {"admin": ["site=eu down"], "seed": 0}'
        try:
            body = await json_body(request)
        except BodyError:
            return _error(400, usage)
        admin = body.get("admin") if isinstance(body, dict) else None
        seed = body.get("seed", 0) if isinstance(body, dict) else None
        if (
            not isinstance(admin, list)
            or not admin
            or not all(isinstance(a, str) for a in admin)
            or not isinstance(seed, int)
            or isinstance(seed, bool)
        ):
            return _error(400, usage)
        try:
            return web.json_response(dict(await self._control.whatif(admin, seed)))
        except WhatIfRefused as exc:
            return _error(exc.status, str(exc))


async def _reload_force(request: web.Request) -> bool | web.Response:
    """`force` of a reload's optional body {"force": true} (no body: false), or the 400 response."""
    if not request.body_exists:
        return False
    try:
        body = await json_body(request)
    except BodyError:
        body = None
    force = body.get("force", False) if isinstance(body, dict) else None
    if not isinstance(force, bool):
        return _error(400, 'the body, when sent, must be JSON like {"force": true}')
    return force


def _refused(exc: SafetyRefused) -> web.Response:
    """409: the safety rules the change would break, each named with the services it would break."""
    rules = [{"rule": b.rule, "message": b.message, "services": list(b.services)} for b in exc.breaches]
    message = f'not changed: {exc}; send {{"state": ..., "force": true}} to apply it anyway'
    return web.json_response({"error": message, "rules": rules}, status=409)


_BULK_KEYS = ("selector", "state", "force", "dry_run")
_BULK_USAGE = 'the body must be JSON like {"selector": {"site": "eu"}, "state": "down"}'


async def _bulk_of(request: web.Request) -> tuple[Selector, AdminState, bool, bool] | web.Response:
    """(selector, state, force, dry_run) of a PUT /api/v1/admin body (dry_run also from ?dry_run=1), or
    the 400 response naming the fault."""
    try:
        body = await json_body(request)
    except BodyError:
        return _error(400, _BULK_USAGE)
    if not isinstance(body, dict):
        return _error(400, _BULK_USAGE)
    unknown = sorted(set(body) - set(_BULK_KEYS))
    if unknown:
        return _error(400, f"unknown key {unknown[0]!r} (keys: {', '.join(_BULK_KEYS)})")
    if "selector" not in body:
        return _error(400, f"no selector: {_BULK_USAGE}")
    try:
        selector = selector_of(body["selector"])
    except ValueError as exc:
        return _error(400, f"not changed: {exc}")
    valid = choices(AdminState)
    value = body.get("state")
    try:
        state = AdminState(value.strip().lower()) if isinstance(value, str) else None
    except ValueError:
        state = None
    if state is None:
        return _error(400, f"unknown state {value!r}; valid states: {valid}")
    force, dry_run = body.get("force", False), body.get("dry_run", False)
    for key, flag in (("force", force), ("dry_run", dry_run)):
        if not isinstance(flag, bool):
            return _error(400, f"{key} must be true or false, got {flag!r}")
    query = request.query.get("dry_run", "").strip().lower()
    if query not in ("", "0", "1", "true", "false"):
        return _error(400, f"dry_run must be 1 or 0, got {query!r}")
    return selector, state, force, dry_run or query in ("1", "true")


_OVERLAY_USAGE = {
    OverlayOp.ADD: "the body must be an endpoint as in the config, JSON like "
    '{"address": "192.0.2.10", "site": "eu"}',
    OverlayOp.PATCH: 'the body must be JSON like {"weight": 5}: the keys of the endpoint to replace',
    OverlayOp.REMOVE: 'the body, when sent, must be JSON like {"force": true}',
}


async def _overlay_body(request: web.Request, op: OverlayOp) -> tuple[dict[str, Any], bool] | web.Response:
    """(the endpoint mapping or keys to patch, force) of an endpoint change; `force` from the body or
    ?force=1. The 400 response for a body that is not a JSON object."""
    usage = _OVERLAY_USAGE[op]
    body: object = {}
    if op is not OverlayOp.REMOVE or request.body_exists:
        try:
            body = await json_body(request)
        except BodyError:
            return _error(400, usage)
    if not isinstance(body, dict):
        return _error(400, usage)
    value = dict(body)
    force = value.pop("force", False)
    if not isinstance(force, bool):
        return _error(400, f"force must be true or false, got {force!r}")
    if op is OverlayOp.REMOVE and value:
        return _error(400, usage)
    query = request.query.get("force", "").strip().lower()
    if query not in ("", "0", "1", "true", "false"):
        return _error(400, f"force must be 1 or 0, got {query!r}")
    return value, force or query in ("1", "true")


def _not_kept(exc: StateError) -> web.Response:
    """503 for an admin change the state store could not keep (with the file and errno of a write)."""
    if isinstance(exc, StateWriteError):
        return _error(503, f"not changed: {exc}", file=str(exc.path), errno=exc.errno)
    return _error(503, f"not changed: {exc}")


async def _admin_state_of(request: web.Request) -> tuple[AdminState, bool] | web.Response:
    """The state (and `force`, default false) asked for in a body like {"state": "down"}, or the 400
    response."""
    valid = choices(AdminState)
    try:
        body = await json_body(request)
    except BodyError:
        return _error(400, f'the body must be JSON like {{"state": "down"}}; valid states: {valid}')
    value = body.get("state") if isinstance(body, dict) else None
    if not isinstance(value, str):
        return _error(400, f'the body must be JSON like {{"state": "down"}}; valid states: {valid}')
    force = body.get("force", False)
    if not isinstance(force, bool):
        return _error(400, f"force must be true or false, got {force!r}")
    try:
        return AdminState(value.strip().lower()), force
    except ValueError:
        return _error(400, f"unknown state {value!r}; valid states: {valid}")
