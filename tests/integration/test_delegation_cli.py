"""`gslbd delegation` without a server: printing the records, and the mistakes it refuses."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from gslbd_harness import gslbd_command

from gslbd.cli.main import main

CONFIG = """\
version: 1
site: {name: eu}
dns: {listen: ["127.0.0.2:5353"]}
zones:
  - origin: gslb.example.com.
    nameservers:
      - {name: gslb-ns-eu-gslb.example.com., address: 127.0.0.2}
      - {name: gslb-ns-us-gslb.example.com., address: 127.0.0.3}
      - {name: gslb-ns-ap-gslb.example.com., address: 127.0.0.4}
services:
  - name: app.gslb.example.com.
    check: none
    endpoints: [{address: 192.0.2.1}]
"""

SECRET = "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI="


@pytest.fixture
def config(tmp_path: Path) -> str:
    path = tmp_path / "eu.yaml"
    path.write_text(CONFIG)
    return str(path)


def test_the_command_prints_the_ns_set_of_every_site_and_the_glue(config: str) -> None:
    out = subprocess.run(
        gslbd_command("delegation", "--config", config),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (out.returncode, out.stderr) == (0, "")
    assert out.stdout == (
        f"; delegation of gslb.example.com. in its parent zone example.com. (from {config})\n"
        "gslb.example.com.\t30\tIN\tNS\tgslb-ns-eu-gslb.example.com.\n"
        "gslb.example.com.\t30\tIN\tNS\tgslb-ns-us-gslb.example.com.\n"
        "gslb.example.com.\t30\tIN\tNS\tgslb-ns-ap-gslb.example.com.\n"
        "gslb-ns-eu-gslb.example.com.\t30\tIN\tA\t127.0.0.2\n"
        "gslb-ns-us-gslb.example.com.\t30\tIN\tA\t127.0.0.3\n"
        "gslb-ns-ap-gslb.example.com.\t30\tIN\tA\t127.0.0.4\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--apply", "--tsig-key", f"k:{SECRET}"],
            "--apply needs --server HOST[:PORT] (the parent zone's primary)",
        ),
        (
            ["--apply", "--server", "127.0.0.1"],
            "--apply needs exactly one of --tsig-key NAME:SECRET and --tsig-key-file FILE",
        ),
        (["--server", "127.0.0.1"], "--server and --tsig-key go with --apply"),
        (
            ["--apply", "--server", "127.0.0.1:0", "--tsig-key", f"k:{SECRET}"],
            "--server '127.0.0.1:0': the port must be a number from 1 to 65535",
        ),
        (["--apply", "--server", "127.0.0.1", "--tsig-key", "k:%%%"], "the TSIG secret is not base64"),
        (["--parent", "example.org"], "gslb.example.com. is not below the parent zone example.org."),
        (
            ["--zone", "x.example.com"],
            "zone x.example.com. is not in the config (its zones: gslb.example.com.)",
        ),
    ],
)
def test_mistakes_are_named_and_exit_2(
    config: str, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["delegation", "-c", config, *args])
    out = capsys.readouterr()
    assert (code, out.out) == (2, "")
    assert out.err.startswith(f"gslbd delegation: {message}")


def test_a_broken_config_prints_its_problems_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(CONFIG.replace("address: 127.0.0.4", "address: 127.0.0.400"))
    assert main(["delegation", "-c", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}:" in err
    assert "zones[0].nameservers[2].address" in err
