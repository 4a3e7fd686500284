"""`gslbd delegation --apply` against a real BIND 9 primary of the parent zone example.com.

named runs on a free 127.0.0.1 port with a TSIG key allowed to update example.com.; each test delegates
its own child zone (gslbN.example.com.), so the tests share one named and do not depend on order.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from bind_harness import Bind, find_named, key_statement, new_secret, running_bind
from gslbd_harness import free_port, gslbd_command

from gslbd.cli.main import main

pytestmark = pytest.mark.skipif(find_named() is None, reason="named (Debian bind9) is not installed")

OTHER_KEY = "gslbd-readonly"


@pytest.fixture(scope="module")
def bind(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bind]:
    with running_bind(tmp_path_factory.mktemp("named"), extra_keys={OTHER_KEY: new_secret(2)}) as b:
        yield b


def site_config(zone: str, nameservers: list[str]) -> str:
    lines = "\n".join(f"      - {ns}" for ns in nameservers)
    return f"""\
version: 1
site: {{name: eu}}
dns: {{listen: ["127.0.0.1:5353"]}}
zones:
  - origin: {zone}
    ttl: 60
    nameservers:
{lines}
services:
  - name: app.{zone}
    check: none
    endpoints: [{{address: 192.0.2.1}}]
"""


def three_sites(zone: str) -> str:
    label = zone.split(".", maxsplit=1)[0]
    return site_config(
        zone,
        [
            f"{{name: gslb-ns-eu-{label}.example.com., address: 127.0.0.2}}",
            f'{{name: gslb-ns-us-{label}.example.com., addresses: [127.0.0.3, "fd00::3"]}}',
            f"{{name: ns1.{zone}, address: 127.0.0.4}}",
        ],
    )


def write(tmp_path: Path, text: str, name: str = "gslbd.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def delegation(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["delegation", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_apply_sets_the_ns_set_of_every_site_and_the_glue_in_bind(
    bind: Bind, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(tmp_path, three_sites("gslb1.example.com."))
    code, out, err = delegation(
        capsys, "-c", config, "--apply", "--server", bind.server, "--tsig-key", bind.key
    )
    assert (code, err) == (0, "")
    assert out == (
        f"update of example.com. at {bind.server} for gslb1.example.com.: NOERROR "
        "(NS set of 3; 4 glue records)\n"
    )
    assert bind.records("gslb1.example.com.", "NS") == {
        "gslb-ns-eu-gslb1.example.com.",
        "gslb-ns-us-gslb1.example.com.",
        "ns1.gslb1.example.com.",
    }
    assert bind.records("gslb-ns-eu-gslb1.example.com.", "A") == {"127.0.0.2"}
    assert bind.records("gslb-ns-us-gslb1.example.com.", "A") == {"127.0.0.3"}
    assert bind.records("gslb-ns-us-gslb1.example.com.", "AAAA") == {"fd00::3"}
    # Glue below the cut is handed out with the referral.
    referral = bind.ask("app.gslb1.example.com.", "A")
    assert not referral.answer
    assert {r.to_text() for rrset in referral.additional for r in rrset if rrset.rdtype == 1} == {"127.0.0.4"}


def test_apply_replaces_the_ns_set_and_removes_only_the_glue_this_delegation_owns(
    bind: Bind, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    zone = "gslb2.example.com."
    before = site_config(
        zone,
        [
            "{name: gslb-ns-eu-gslb2.example.com., address: 127.0.0.2}",
            "{name: gslb-ns-us-gslb2.example.com., address: 127.0.0.3}",
            f"{{name: ns1.{zone}, address: 127.0.0.4}}",
            "{name: ns-other.example.com.}",  # in the parent, managed there: no address in this config
        ],
    )
    after = site_config(
        zone,
        [
            "{name: gslb-ns-eu-gslb2.example.com., address: 127.0.0.12}",
            "{name: gslb-ns-ap-gslb2.example.com., address: 127.0.0.14}",
        ],
    )
    args = ("--apply", "--server", bind.server, "--tsig-key", bind.key)
    assert delegation(capsys, "-c", write(tmp_path, before, "before.yaml"), *args)[0] == 0
    assert bind.records(zone, "NS") == {
        "gslb-ns-eu-gslb2.example.com.",
        "gslb-ns-us-gslb2.example.com.",
        "ns1.gslb2.example.com.",
        "ns-other.example.com.",
    }

    code, out, _ = delegation(capsys, "-c", write(tmp_path, after, "after.yaml"), *args)
    assert code == 0
    assert out == (
        f"update of example.com. at {bind.server} for {zone}: NOERROR (NS set of 2; 2 glue records; "
        "removed the addresses of gslb-ns-us-gslb2.example.com., ns1.gslb2.example.com.)\n"
    )
    assert bind.records(zone, "NS") == {"gslb-ns-eu-gslb2.example.com.", "gslb-ns-ap-gslb2.example.com."}
    assert bind.records("gslb-ns-eu-gslb2.example.com.", "A") == {"127.0.0.12"}
    assert bind.records("gslb-ns-ap-gslb2.example.com.", "A") == {"127.0.0.14"}
    assert bind.records("gslb-ns-us-gslb2.example.com.", "A") == set()
    assert bind.records("ns1.gslb2.example.com.", "A") == set()
    # Not ours: a nameserver name of the parent that is neither below the zone nor k8gb-named for it.
    assert bind.records("ns-other.example.com.", "A") == {"192.0.2.53"}
    assert bind.records("www.example.com.", "A") == {"192.0.2.80"}


def test_a_key_the_server_does_not_know_gets_notauth_and_changes_nothing(
    bind: Bind, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(tmp_path, three_sites("gslb3.example.com."))
    code, out, _ = delegation(
        capsys, "-c", config, "--apply", "--server", bind.server, "--tsig-key", f"stranger:{bind.secret}"
    )
    assert code == 1
    assert out == (
        f"update of example.com. at {bind.server} for gslb3.example.com.: NOTAUTH "
        "(BADKEY: the server does not know the key stranger.)\n"
    )
    assert bind.records("gslb3.example.com.", "NS") == set()
    assert bind.records("gslb-ns-eu-gslb3.example.com.", "A") == set()


def test_a_wrong_secret_gets_notauth_badsig(
    bind: Bind, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(tmp_path, three_sites("gslb4.example.com."))
    wrong = f"{bind.key_name}:{new_secret(9)}"
    code, out, _ = delegation(capsys, "-c", config, "--apply", "--server", bind.server, "--tsig-key", wrong)
    assert code == 1
    assert out.endswith(": NOTAUTH (BADSIG: wrong secret or algorithm for the key gslbd-update.)\n")
    assert bind.records("gslb4.example.com.", "NS") == set()


def test_a_known_key_without_update_rights_is_refused(
    bind: Bind, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(tmp_path, three_sites("gslb5.example.com."))
    key = f"{OTHER_KEY}:{new_secret(2)}"
    code, out, _ = delegation(capsys, "-c", config, "--apply", "--server", bind.server, "--tsig-key", key)
    assert code == 1
    assert out.endswith(": REFUSED (the server does not allow this key to update the zone)\n")
    assert bind.records("gslb5.example.com.", "NS") == set()


def test_the_real_command_reads_a_tsig_keygen_style_key_file(bind: Bind, tmp_path: Path) -> None:
    config = write(tmp_path, three_sites("gslb6.example.com."))
    key_file = tmp_path / "update.key"
    key_file.write_text(key_statement(bind.key_name, bind.secret))
    out = subprocess.run(
        gslbd_command(
            "delegation", "--config", config, "--apply", "--server", bind.server,
            "--tsig-key-file", str(key_file), "--tsig-algorithm", "hmac-sha256",
        ),
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (out.returncode, out.stderr) == (0, "")
    assert ": NOERROR (NS set of 3; 4 glue records)" in out.stdout
    assert bind.records("gslb6.example.com.", "NS") == {
        "gslb-ns-eu-gslb6.example.com.",
        "gslb-ns-us-gslb6.example.com.",
        "ns1.gslb6.example.com.",
    }


def test_a_server_that_does_not_answer_is_a_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(tmp_path, three_sites("gslb7.example.com."))
    server = f"127.0.0.1:{free_port()}"  # nothing listens there
    code, out, _ = delegation(
        capsys,
        "-c",
        config,
        "--apply",
        "--server",
        server,
        "--tsig-key",
        f"k:{new_secret(3)}",
        "--timeout",
        "1",
    )
    assert code == 1
    assert out.startswith(f"update of example.com. at {server} for gslb7.example.com.: FAILED (")


def test_apply_sets_the_ds_of_a_signed_zone_in_bind(
    bind: Bind, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gslbd.config.dnssec import ds_text, generate_key_pair, read_key_pair

    zone = "gslb8.example.com."
    ksk = generate_key_pair(zone, 13, True, tmp_path)
    text = site_config(zone, ["{name: ns1.gslb8.example.com., address: 127.0.0.8}"])
    text = text.replace("    ttl: 60\n", f"    ttl: 60\n    dnssec: {{keys: [{ksk}]}}\n")
    config = write(tmp_path, text)
    code, out, err = delegation(
        capsys, "-c", config, "--apply", "--server", bind.server, "--tsig-key", bind.key
    )
    assert (code, err) == (0, ""), out
    expected = ds_text(zone, read_key_pair(ksk, zone)).lower()
    assert bind.records(zone, "DS") == {expected}
