"""`gslbd dnssec keygen`: the files it writes are a zone's keys, the private one only for its owner, and
every wrong argument or unwritable directory is one `error:` line and exit code 2, never a traceback."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from gslbd.cli.main import main
from gslbd.config import check_config_text

ORIGIN = "gslb.example.com."


def keygen(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `gslbd dnssec keygen ARGS` run in this process (argparse's own
    errors exit through SystemExit, as they do for the real command)."""
    try:
        code = main(["dnssec", "keygen", *args])
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def open_umask() -> Iterator[None]:
    """umask 000: the .private file's mode must not rely on a restrictive umask."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.parametrize(("algorithm", "number"), [("ecdsap256sha256", 13), ("ed25519", 15)])
def test_a_ksk_and_a_zsk_it_writes_load_as_the_zones_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], algorithm: str, number: int
) -> None:
    code, out, _ = keygen(
        capsys, "--zone", "GSLB.example.com", "--algorithm", algorithm, "--dir", str(tmp_path)
    )
    assert code == 0
    ksk = Path(out.strip())
    code, out, _ = keygen(capsys, "--zone", ORIGIN, "--algorithm", algorithm, "--zsk", "--dir", str(tmp_path))
    assert code == 0
    zsk = Path(out.strip())
    assert ksk.parent == zsk.parent == tmp_path and ksk.name.startswith(f"K{ORIGIN}+{number:03d}+")
    text = (
        f"zones:\n  - origin: {ORIGIN}\n    nameservers: [{{name: ns1, address: 127.0.0.2}}]\n"
        f'    dnssec: {{keys: ["{ksk}", "{zsk}"]}}\n'
    )
    config, problems = check_config_text(text, "c.yaml", tmp_path)
    assert config is not None, [str(p) for p in problems]
    dnssec = config.zones[0].dnssec
    assert dnssec is not None
    assert [(k.flags, k.algorithm, k.sign) for k in dnssec.keys] == [(257, number, True), (256, number, True)]
    assert [k.tag for k in dnssec.keys] == [int(ksk.name.rsplit("+", 1)[1]), int(zsk.name.rsplit("+", 1)[1])]


@pytest.mark.usefixtures("open_umask")
def test_a_missing_key_directory_is_created_for_its_owner_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`gslbd dnssec keygen --dir keys` as the docs write it, in a directory without `keys` yet."""
    monkeypatch.chdir(tmp_path)
    code, out, err = keygen(capsys, "--zone", ORIGIN, "--dir", "keys")
    assert (code, err) == (0, "")
    assert Path(out.strip()).parent == Path("keys")
    assert stat.S_IMODE((tmp_path / "keys").stat().st_mode) == 0o700
    assert sorted(p.suffix for p in (tmp_path / "keys").iterdir()) == [".key", ".private"]


@pytest.mark.usefixtures("open_umask")
def test_the_private_file_is_readable_by_its_owner_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = keygen(capsys, "--zone", ORIGIN, "--dir", str(tmp_path))
    assert code == 0
    base = Path(out.strip())
    assert stat.S_IMODE(base.with_name(base.name + ".private").stat().st_mode) == 0o600
    assert stat.S_IMODE(base.with_name(base.name + ".key").stat().st_mode) & 0o444 == 0o444  # public


def unwritable(tmp_path: Path) -> Path:
    """A directory this process cannot create files in: a read-only one, or /sys for root (whom file
    modes do not stop)."""
    if os.geteuid() == 0:
        return Path("/sys")
    directory = tmp_path / "read-only"
    directory.mkdir(mode=0o555)
    return directory


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--zone", ORIGIN, "--dir", "{unwritable}/keys"], "cannot create --dir '{unwritable}/keys'"),
        (["--zone", ORIGIN, "--dir", "{tmp}/a-file"], "--dir '{tmp}/a-file' is not a directory"),
        (["--zone", ORIGIN, "--dir", "{unwritable}"], "cannot write {unwritable}/K"),
        (
            ["--zone", "bad..example.com", "--dir", "{tmp}"],
            "--zone: name 'bad..example.com.' has an empty label",
        ),
        (["--zone", "a b.example", "--dir", "{tmp}"], "--zone: name 'a b.example.': labels may hold only"),
        (["--zone", "../up", "--dir", "{tmp}"], "--zone: name '../up.' has an empty label"),
        (
            ["--zone", "x" * 64 + ".example", "--dir", "{tmp}"],
            f"--zone: label '{'x' * 64}' of",
        ),
        (["--zone", "", "--dir", "{tmp}"], "--zone is empty"),
        (
            ["--zone", ORIGIN, "--algorithm", "rsasha256", "--dir", "{tmp}"],
            "argument --algorithm: invalid choice",
        ),
        (["--zone", ORIGIN], "the following arguments are required: --dir"),
    ],
    ids=[
        "dir-not-creatable",
        "dir-is-a-file",
        "dir-not-writable",
        "empty-label",
        "space",
        "path-in-zone",
        "long-label",
        "empty-zone",
        "unknown-algorithm",
        "dir-missing",
    ],
)
def test_a_bad_argument_or_directory_is_one_error_line_and_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    (tmp_path / "a-file").write_text("")
    places = {"tmp": str(tmp_path), "unwritable": str(unwritable(tmp_path))}
    code, out, err = keygen(capsys, *(a.format(**places) for a in args))
    assert code == 2
    assert out == ""
    [line] = [ln for ln in err.splitlines() if ln.startswith("gslbd dnssec keygen: error: ")]
    assert message.format(**places) in line, err
    assert "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("K")) == []  # nothing written
