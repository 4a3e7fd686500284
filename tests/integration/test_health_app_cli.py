"""`gslbd serve` and a state file it cannot read: it refuses to start rather than forget admin states."""

from __future__ import annotations

import subprocess
from pathlib import Path

from gslbd_harness import gslbd_command


def test_serve_refuses_to_start_with_an_unreadable_state_file(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text("{broken")
    config = tmp_path / "gslbd.yaml"
    config.write_text(
        'version: 1\ndns: {listen: ["127.0.0.1:0"]}\nstate: {file: state.json}\n'
        "zones: [{origin: gslb.test., nameservers: [{name: ns1.gslb.test., address: 127.0.0.1}]}]\n"
    )
    out = subprocess.run(
        gslbd_command("serve", "--config", str(config)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 1
    assert (
        f"gslbd: state file {tmp_path / 'state.json'} is not JSON: "
        "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
    ) in out.stderr.splitlines()
