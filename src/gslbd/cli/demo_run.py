"""The running `gslbd demo` (see `gslbd.cli.demo` for what it serves and where its files go): the
backends, the served copy of the demo config, the intro, the answer watcher and the keys."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import secrets
import sys
import termios
import time
import tty
from collections.abc import Iterator, Sequence
from importlib import resources
from pathlib import Path

import dns.asyncquery
import dns.exception
import dns.message
import dns.rdatatype

from gslbd.app import App
from gslbd.cli.demo_backends import Backend
from gslbd.cli.invocation import self_command
from gslbd.cli.serve import serve_until_stopped
from gslbd.config import check_config
from gslbd.model.config import Config
from gslbd.state.store import default_state_dir

# (site, key to press, port in the bundled file, answered address)
SITES = (
    ("eu", "1", 8081, "192.0.2.10"),
    ("us", "2", 8082, "198.51.100.10"),
    ("ap", "3", 8083, "203.0.113.10"),
)
WATCHED = ("app.gslb.example.com.", "all.gslb.example.com.")
POLL = 0.5


def render(template: str, dns_port: int, api_port: int, ports: Sequence[int], token: str) -> str:
    """The bundled demo config with the ports in use instead of the bundled ones, and `token`."""
    text = template.replace('"127.0.0.1:5353"', f'"127.0.0.1:{dns_port}"')
    text = text.replace('token: "demo-token"', f'token: "{token}"')
    text = text.replace('"127.0.0.1:8080"', f'"127.0.0.1:{api_port}"')
    for (_, _, bundled, _), port in zip(SITES, ports, strict=True):
        text = text.replace(f"port: {bundled},", f"port: {port},")
    return text


async def demo(dns_port: int, api_port: int, level: int) -> int:
    """Run the demo until a stop signal; the exit code. A second demo (one state directory, so one
    served config) stops before it touches anything of the running one."""
    directory = default_state_dir() / "demo"
    with _demo_lock(directory) as held:
        if held is not None:
            print(held, file=sys.stderr)
            return 1
        return await _run(directory, dns_port, api_port, level)


@contextlib.contextmanager
def _demo_lock(directory: Path) -> Iterator[str | None]:
    """Hold `demo.lock` in the demo's directory (an exclusive flock, gone with the process) for the
    demo's life: None, or the message to stop with when it cannot be had (another demo holds it)."""
    lock = directory / "demo.lock"
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        yield f"gslbd demo: cannot write {lock}: {exc.strerror or exc}"
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            other = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            yield (
                f"gslbd demo: another gslbd demo is running (pid {other}, it holds {lock}); stop it first "
                "(Ctrl-C in its terminal, or kill it); its config and state are left as they are"
            )
            return
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield None
    finally:
        os.close(fd)


async def _run(directory: Path, dns_port: int, api_port: int, level: int) -> int:
    backends = [Backend(site, key) for site, key, _, _ in SITES]
    watcher: asyncio.Task[None] | None = None
    try:
        try:
            for backend in backends:
                await backend.start()
        except OSError as exc:
            print(f"gslbd demo: cannot start the local backends: {exc}", file=sys.stderr)
            return 1
        config = _write_config(directory, dns_port, api_port, [b.port for b in backends])
        if config is None:
            return 1
        app = App(config, worker_log_level=level)
        watcher = asyncio.create_task(_watch(app, backends))
        with _keys(backends):
            return await serve_until_stopped(app, config.source, banner=False)
    finally:
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        for backend in backends:
            await backend.stop()


def _write_config(directory: Path, dns_port: int, api_port: int, ports: list[int]) -> Config | None:
    template = (resources.files("gslbd") / "examples" / "demo.yaml").read_text(encoding="utf-8")
    path = directory / "demo.yaml"
    try:
        text = render(template, dns_port, api_port, ports, secrets.token_urlsafe(12))
        _write_private(path, text)
    except OSError as exc:
        print(f"gslbd demo: cannot write {path}: {exc.strerror or exc}", file=sys.stderr)
        return None
    config, problems = check_config(path)
    if config is None:
        for problem in problems:
            print(problem, file=sys.stderr)
        return None
    return config


def _write_private(path: Path, text: str) -> None:
    """Write `text` readable by its owner only (it holds the API token), also over an older copy."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        os.fchmod(out.fileno(), 0o600)
        out.write(text)


def _intro(app: App, dns_port: int, backends: Sequence[Backend]) -> str:
    api = app.api.url if app.api is not None else "(none)"
    token = app.config.api.token if app.config.api is not None else None
    at = f"@127.0.0.1 -p {dns_port}"
    lines = [
        f"gslbd demo: DNS on 127.0.0.1:{dns_port}, admin API on {api}",
        f"config: {app.config.source} (the bundled demo.yaml with these ports)",
        "",
        "backends (health checked over HTTP every second):",
    ]
    for (site, key, _, address), backend in zip(SITES, backends, strict=True):
        lines.append(f"  [{key}] {site}  {address:<14} {backend.url}/healthz")
    first = backends[0]
    gslbd = self_command()
    lines += [
        "",
        "try:",
        f"  dig {at} app.gslb.example.com +short     # failover: eu, else us, else ap",
        f"  dig {at} all.gslb.example.com +short     # round robin over the healthy ones",
        f"  {gslbd} status --api {api}",
        "",
        "make an endpoint fail:",
        "  press 1, 2 or 3 here to toggle that site's backend (when this is a terminal), or",
        f"  curl -X POST {first.url}/toggle          # eu's backend fails; again to recover",
        f"  {gslbd} admin set app.gslb.example.com 192.0.2.10 down --api {api} --token {token}",
        "  (obey instead of down lets the checks decide again)",
        "when every backend of a name fails, its answer stays: all_down: serve_all (the default) answers",
        "  every endpoint rather than none (a service's all_down: servfail, nxdomain, nodata or fallback",
        "  changes that)",
        "Ctrl-C stops.",
        "",
        "answers (a line whenever one changes):",
    ]
    overrides = app.book.admin
    if overrides:
        kept = ", ".join(f"{svc} {addr} {state.value}" for (svc, addr), state in sorted(overrides.items()))
        lines.insert(2, f"admin states kept from the last run: {kept}")
    return "\n".join(lines)


async def _watch(app: App, backends: Sequence[Backend]) -> None:
    """Once the app is ready: print the intro, then a line whenever a watched answer changes."""
    while not app.ready:
        await asyncio.sleep(0.05)
    port = int(app.bound[0].rsplit(":", 1)[1])
    print(_intro(app, port, backends), flush=True)
    last: dict[str, list[str]] = {}
    while True:
        for name in WATCHED:
            now = await _ask(port, name)
            if now is not None and now != last.get(name):
                shown = " ".join(now) if now else "(no answer)"
                print(f"{time.strftime('%H:%M:%S')}  {name.rstrip('.')} A  {shown}", flush=True)
                last[name] = now
        await asyncio.sleep(POLL)


async def _ask(port: int, name: str) -> list[str] | None:
    """The sorted addresses answered for (name, A), or None when the query failed."""
    query = dns.message.make_query(name, dns.rdatatype.A)
    try:
        reply = await dns.asyncquery.udp(query, "127.0.0.1", port=port, timeout=1.0)
    except (OSError, dns.exception.DNSException):
        return None
    return sorted(rd.to_text() for rrset in reply.answer for rd in rrset if rrset.rdtype == dns.rdatatype.A)


@contextlib.contextmanager
def _keys(backends: Sequence[Backend]) -> Iterator[None]:
    """When stdin is a terminal: keys 1, 2, 3 toggle a backend's health (Ctrl-C still stops)."""
    if not sys.stdin.isatty():
        yield
        return
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    loop = asyncio.get_running_loop()
    by_key = {b.key: b for b in backends}

    def on_key() -> None:
        data = os.read(fd, 32).decode(errors="replace")
        for char in data:
            backend = by_key.get(char)
            if backend is not None:
                state = "healthy" if backend.toggle() else "failing"
                print(f"{time.strftime('%H:%M:%S')}  [{backend.key}] {backend.site} backend is now {state}")

    tty.setcbreak(fd)
    loop.add_reader(fd, on_key)
    try:
        yield
    finally:
        loop.remove_reader(fd)
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


__all__ = ["SITES", "demo", "render"]
