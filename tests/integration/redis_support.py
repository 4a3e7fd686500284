"""Real redis-server (and redis-sentinel) processes for the cluster tests, on free loopback ports.

    with running_redis(tmp_path) as redis: ...       redis.url, redis.client(), redis.kill(), redis.start()
    RedisProcess(tmp_path, tls=True)                  TLS only, with a self-signed cert made by openssl
    RedisProcess(tmp_path, unix=True)                 a Unix socket only
    SentinelProcess(tmp_path, master)                 a sentinel monitoring `master` as "mymaster"

Every server is started without persistence (a restart starts empty, as after a crash without AOF),
in its own directory, and killed by the test that started it.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import redis
from gslbd_harness import free_port

STARTUP_TIMEOUT = 10.0


def redis_server_binary() -> str:
    path = shutil.which("redis-server")
    if path is None:
        raise RuntimeError("redis-server is not installed (scripts/test installs the Debian package)")
    return path


def sentinel_command(config: Path) -> list[str]:
    """redis-sentinel when the Debian package is installed, else redis-server in sentinel mode."""
    sentinel = shutil.which("redis-sentinel")
    if sentinel is not None:
        return [sentinel, str(config)]
    return [redis_server_binary(), str(config), "--sentinel"]


def make_certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (cert.pem, key.pem), made with openssl."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    if not cert.exists():
        subprocess.run(
            [
                "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
                "-addext", "subjectAltName=IP:127.0.0.1",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )  # fmt: skip
    return cert, key


class RedisProcess:
    """One redis-server; `start()` again after `kill()` brings it back on the same port (empty)."""

    def __init__(
        self,
        workdir: Path,
        *,
        name: str = "redis",
        tls: bool = False,
        unix: bool = False,
        password: str | None = None,
    ) -> None:
        self.dir = workdir / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.tls = tls
        self.password = password
        self.unix_path = self.dir / "redis.sock" if unix else None
        self.proc: subprocess.Popen[bytes] | None = None
        self.cert: Path | None = None
        if tls:
            self.cert, self.key = make_certificate(self.dir)

    @property
    def url(self) -> str:
        if self.unix_path is not None:
            return f"unix://{self.unix_path}"
        if self.tls:
            return f"rediss://127.0.0.1:{self.port}/0?ssl_ca_certs={self.cert}"
        return f"redis://127.0.0.1:{self.port}/0"

    def command(self) -> list[str]:
        cmd = [
            redis_server_binary(),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self.dir),
            "--logfile", str(self.dir / "redis.log"),
        ]  # fmt: skip
        if self.password is not None:
            cmd += ["--requirepass", self.password]
        if self.unix_path is not None:
            return [*cmd, "--port", "0", "--unixsocket", str(self.unix_path), "--unixsocketperm", "700"]
        if self.tls:
            assert self.cert is not None
            return [
                *cmd,
                "--port", "0",
                "--tls-port", str(self.port),
                "--tls-cert-file", str(self.cert),
                "--tls-key-file", str(self.key),
                "--tls-ca-cert-file", str(self.cert),
                "--tls-auth-clients", "no",
            ]  # fmt: skip
        return [*cmd, "--port", str(self.port)]

    def client(self) -> redis.Redis:
        """A synchronous client for the test's own checks (responses decoded to str)."""
        common: dict[str, Any] = {"decode_responses": True, "password": self.password}
        if self.unix_path is not None:
            return redis.Redis(unix_socket_path=str(self.unix_path), **common)
        if self.tls:
            return redis.Redis(
                host="127.0.0.1", port=self.port, ssl=True, ssl_ca_certs=str(self.cert), **common
            )
        return redis.Redis(host="127.0.0.1", port=self.port, **common)

    def start(self) -> None:
        self.proc = subprocess.Popen(self.command(), stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + STARTUP_TIMEOUT
        with contextlib.closing(self.client()) as client:
            while True:
                try:
                    if client.ping():
                        return
                except (redis.RedisError, OSError):
                    pass
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    log = (self.dir / "redis.log").read_text(errors="replace")
                    self.kill()
                    raise RuntimeError(f"redis-server did not start: {self.command()}\n{log}")
                time.sleep(0.02)

    def kill(self) -> None:
        """SIGKILL (no goodbye to the clients), and wait."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)


class SentinelProcess:
    """A sentinel (quorum 1) that monitors one master under the name "mymaster"."""

    def __init__(self, workdir: Path, master: RedisProcess, *, name: str = "sentinel") -> None:
        self.dir = workdir / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.config = self.dir / "sentinel.conf"
        self.config.write_text(
            f"port {self.port}\n"
            "bind 127.0.0.1\n"
            f"dir {self.dir}\n"
            f"logfile {self.dir / 'sentinel.log'}\n"
            f"sentinel monitor mymaster 127.0.0.1 {master.port} 1\n"
            "sentinel down-after-milliseconds mymaster 1000\n"
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            sentinel_command(self.config), stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + STARTUP_TIMEOUT
        with contextlib.closing(redis.Redis(host="127.0.0.1", port=self.port, decode_responses=True)) as c:
            while True:
                try:
                    if c.execute_command("SENTINEL", "get-master-addr-by-name", "mymaster"):
                        return
                except (redis.RedisError, OSError):
                    pass
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.kill()
                    log = (self.dir / "sentinel.log").read_text(errors="replace")
                    raise RuntimeError(f"redis-sentinel did not start:\n{log}")
                time.sleep(0.05)

    def kill(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)


def next_message(listener: redis.client.PubSub, timeout: float = 2.0) -> dict[str, Any] | None:
    """The next published message on a subscription (subscribe confirmations skipped), or None."""
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        message = listener.get_message(ignore_subscribe_messages=True, timeout=left)
        if message is not None:
            return dict(message)
    return None


@contextlib.contextmanager
def running_redis(workdir: Path, **kwargs: Any) -> Iterator[RedisProcess]:
    server = RedisProcess(workdir, **kwargs)
    server.start()
    try:
        yield server
    finally:
        server.kill()
