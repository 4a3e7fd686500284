"""`gslbd import k8gb|octodns` as a process: the services file it writes is served by gslbd as the
k8gb strategy meant, the report goes where asked, and bad input exits 1 with a located error and
nothing written."""

from __future__ import annotations

import subprocess
from pathlib import Path

from gslbd_harness import gslbd_command, running_gslbd

DATA = Path(__file__).parents[1] / "unit" / "importers" / "data"

CONFIG = """\
site: {name: eu}
sites: {us: {}}
dns:
  listen: @LISTEN@
zones:
  - origin: cloud.example.com.
    nameservers: [{name: ns1, address: 192.0.2.53}]
services_file: services.jsonl
"""


def gslbd(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        gslbd_command(*args), capture_output=True, text=True, timeout=60, check=False, cwd=cwd
    )


def test_an_imported_k8gb_failover_is_served_from_the_primary_geotag_site(tmp_path: Path) -> None:
    out = gslbd(
        "import", "k8gb", str(DATA / "eu-cluster.yaml"), str(DATA / "us-cluster.yaml"),
        "-o", str(tmp_path / "services.jsonl"), "--report", str(tmp_path / "report.txt"),
    )  # fmt: skip
    assert (out.returncode, out.stdout, out.stderr) == (0, "", "")
    assert (tmp_path / "report.txt").read_text() == ""  # both clusters mapped whole
    assert len((tmp_path / "services.jsonl").read_text().splitlines()) == 2
    with running_gslbd(tmp_path, CONFIG, zone="cloud.example.com.") as server:
        reply = server.ask("shop.cloud.example.com.")
        assert sorted(rr.to_text() for rrset in reply.answer for rr in rrset) == ["10.0.1.10", "10.0.1.11"]
        assert reply.answer[0].ttl == 30  # dnsTtlSeconds


def test_the_report_goes_to_stderr_and_the_lines_to_stdout_by_default(tmp_path: Path) -> None:
    out = gslbd("import", "octodns", str(DATA / "example.com.yaml"))
    assert out.returncode == 0
    assert [line.split('"')[3] for line in out.stdout.splitlines()] == [
        "www.example.com.",
        "api.example.com.",
        "split.example.com.",
    ]
    assert out.stderr.splitlines()[0] == (
        "record/@/A: dynamic: only dynamic A, AAAA and CNAME records are imported: not imported"
    )


def test_bad_input_exits_1_with_a_located_error_and_writes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text((DATA / "eu-cluster.yaml").read_text() + "---\napiVersion: apps/v1\nkind: Deployment\n")
    kept = tmp_path / "services.jsonl"
    kept.write_text("# the previous import\n")
    out = gslbd("import", "k8gb", str(bad), "-o", str(kept), "--report", str(tmp_path / "report.txt"))
    assert out.returncode == 1
    assert out.stdout == ""
    assert out.stderr.startswith(f"{bad}:96: unknown kind 'Deployment' of apiVersion 'apps/v1'; known: ")
    assert kept.read_text() == "# the previous import\n"
    assert not (tmp_path / "report.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml", "services.jsonl"]
