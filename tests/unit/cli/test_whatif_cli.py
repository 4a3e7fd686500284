"""`gslbd whatif`'s refusals: each names what is wrong, prints no figures and exits non-zero."""

from __future__ import annotations

from pathlib import Path

import pytest

from gslbd.cli.main import main
from gslbd.server.dnstap.fstrm import FileWriter, data_frame
from gslbd.server.dnstap.message import AUTH_RESPONSE, Encoder

CONFIG = """version: 1
site: {name: eu}
zones: [{origin: gslb.example.com., nameservers: [{name: ns1.gslb.example.com., address: 127.0.0.1}]}]
services:
  - {name: app.gslb.example.com., check: none, endpoints: [{address: 192.0.2.1, site: eu}]}
"""


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    config, capture = tmp_path / "c.yaml", tmp_path / "r.dnstap"
    config.write_text(CONFIG)
    writer = FileWriter(str(capture))
    message = Encoder("eu", "t").message(AUTH_RESPONSE, 1, False, False, 1, None, 2, b"response")
    writer.sendall(data_frame(message))
    writer.close()
    return config, capture


@pytest.mark.parametrize(
    ("extra", "code", "error"),
    [
        ([], 1, "gslbd whatif: --dnstap {capture}: no queries in it (log.dnstap.queries must be true)"),
        (["--admin", "site=eu"], 2, "gslbd whatif: --admin 'site=eu': ends with no state (obey, up, down)"),
        (
            ["--admin", "service=db.* down"],
            2,
            "gslbd whatif: --admin 'service=db.* down' selects no endpoint of the candidate config",
        ),
    ],
)
def test_refusals_name_the_fault(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str], extra: list[str], code: int, error: str
) -> None:
    config, capture = files
    assert main(["whatif", "--dnstap", str(capture), "--config", str(config), *extra]) == code
    out, err = capsys.readouterr()
    assert out == ""
    assert err == error.format(capture=capture) + "\n"
