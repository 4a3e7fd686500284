"""The demo's stand-in services: one small HTTP server per site on 127.0.0.1.

GET  /healthz   200 "ok" while healthy, 503 "failing" after a failure is switched on
GET  /          "hello from <site>"
POST /fail, /recover, /toggle   switch the health; the answer says the new state
"""

from __future__ import annotations

import logging

from aiohttp import web

log = logging.getLogger(__name__)


class Backend:
    """One site's backend; `port` is known after `start` (listen port 0 picks a free one)."""

    def __init__(self, site: str, key: str, host: str = "127.0.0.1", port: int = 0) -> None:
        self.site = site
        self.key = key
        self.host = host
        self.port = port
        self.healthy = True
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/", self._hello)
        app.router.add_post("/fail", self._fail)
        app.router.add_post("/recover", self._recover)
        app.router.add_post("/toggle", self._toggle)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.5)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self.port, reuse_address=True)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        if runner.addresses:
            self.port = int(runner.addresses[0][1])

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    def toggle(self) -> bool:
        """Switch health; the new state."""
        self.healthy = not self.healthy
        return self.healthy

    def _state(self) -> web.Response:
        return web.Response(text=f"{self.site} is {'healthy' if self.healthy else 'failing'}\n")

    async def _healthz(self, request: web.Request) -> web.Response:
        if self.healthy:
            return web.Response(text="ok\n")
        return web.Response(status=503, text="failing\n")

    async def _hello(self, request: web.Request) -> web.Response:
        return web.Response(text=f"hello from {self.site}\n")

    async def _fail(self, request: web.Request) -> web.Response:
        self.healthy = False
        return self._state()

    async def _recover(self, request: web.Request) -> web.Response:
        self.healthy = True
        return self._state()

    async def _toggle(self, request: web.Request) -> web.Response:
        self.toggle()
        return self._state()
