"""Every error of a running gslbd's admin API is JSON with a reason: a state file that cannot be written
(503 naming the file and errno, logged once, no traceback), a URL over 8,190 bytes (414); and the
temporary files that kill -9 left beside the state file are removed at start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

from dns_config import CONFIG, ZONE
from gslbd_harness import free_port, running_gslbd
from health_app_support import http_get

TOKEN = "t0k3n"
ADMIN = f"/api/v1/services/app.{ZONE}/endpoints/192.0.2.1/admin"


def config(api_port: int, state_file: Path) -> str:
    return (
        CONFIG + f'api: {{listen: "127.0.0.1:{api_port}", token: {TOKEN}}}\nstate: {{file: "{state_file}"}}\n'
    )


def put_admin(api: str, state: str) -> tuple[int, object]:
    request = urllib.request.Request(
        f"{api}{ADMIN}", method="PUT", data=json.dumps({"state": state}).encode()
    )
    request.add_header("Authorization", f"Bearer {TOKEN}")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        assert exc.headers.get_content_type() == "application/json"
        return exc.code, json.loads(exc.read())


def unwritable_dir(tmp_path: Path) -> tuple[Path, str]:
    """A directory no file can be created in, and the errno that says so: /sys for root (whom file
    modes do not stop), else a read-only directory."""
    if os.geteuid() == 0:
        return Path("/sys"), "EACCES"
    directory = tmp_path / "read-only"
    directory.mkdir(mode=0o555)
    return directory, "EACCES"


def test_a_state_file_that_cannot_be_written_is_a_503_naming_file_and_errno_logged_once(
    tmp_path: Path,
) -> None:
    directory, errno_name = unwritable_dir(tmp_path)
    state_file = directory / f"gslbd-test-{os.getpid()}.json"
    api_port = free_port()
    api = f"http://127.0.0.1:{api_port}"
    with running_gslbd(tmp_path, config(api_port, state_file), zone=ZONE) as server:
        answers = sorted(rd.to_text() for rr in server.ask(f"app.{ZONE}", "A").answer for rd in rr)
        replies = [put_admin(api, "down") for _ in range(3)]
        message = f"cannot write state file {state_file}: Permission denied ({errno_name})"
        assert (
            replies
            == [(503, {"error": f"not changed: {message}", "file": str(state_file), "errno": errno_name})] * 3
        )
        # Nothing changed: the endpoint still answers, the API says it is not admin down.
        assert sorted(rd.to_text() for rr in server.ask(f"app.{ZONE}", "A").answer for rd in rr) == answers
        status, doc = http_get(f"{api}/api/v1/services/app.{ZONE}")
        assert status == 200 and {e["address"]: e["admin"] for e in doc["endpoints"]}["192.0.2.1"] != "down"
        log = server.log()
    assert log.count(message) == 1, log
    assert "Traceback" not in log


def test_a_url_over_8190_bytes_is_a_414_json_error(tmp_path: Path) -> None:
    api_port = free_port()
    api = f"http://127.0.0.1:{api_port}"
    with running_gslbd(tmp_path, config(api_port, tmp_path / "state.json"), zone=ZONE) as server:
        status, doc = http_get(f"{api}/api/v1/services/{'a' * 9000}")
        assert (status, doc) == (
            414,
            {"error": "the request line is longer than 8190 bytes; use a shorter URL"},
        )
        assert http_get(f"{api}/api/v1/services/app.{ZONE}")[0] == 200  # the next request is served
        log = server.log()
    assert "Traceback" not in log
    assert "answered 414 to a malformed HTTP request" in log


def test_temporary_files_left_by_a_killed_writer_are_removed_at_start(tmp_path: Path) -> None:
    state_file = tmp_path / "state.json"
    state_file.write_text(json.dumps({"admin": {f"app.{ZONE}|192.0.2.1": "down"}}))
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True
    )
    # What kill -9 in the middle of writes leaves: a written temporary file and an empty one.
    fd, written = tempfile.mkstemp(prefix=f".state.json.{int(gone.stdout)}.", suffix=".tmp", dir=tmp_path)
    os.write(fd, b'{"admin": {}}\n')
    os.close(fd)
    fd, empty = tempfile.mkstemp(prefix=f".state.json.{int(gone.stdout)}.", suffix=".tmp", dir=tmp_path)
    os.close(fd)
    api_port = free_port()
    with running_gslbd(tmp_path, config(api_port, state_file), zone=ZONE) as server:
        left = sorted(p.name for p in tmp_path.glob(".state.json.*"))
        # The stored state was loaded (192.0.2.1 is admin down), not a temporary file's.
        assert [rd.to_text() for rr in server.ask(f"app.{ZONE}", "A").answer for rd in rr] == ["192.0.2.2"]
        log = server.log()
    assert left == []
    assert f"removed 2 stale temporary state file(s) beside {state_file}" in log
    assert Path(written).name in log and Path(empty).name in log
