"""The keys added with run-time state: `state.file` and `dns.lame_duck`."""

from __future__ import annotations

from pathlib import Path

from gslbd.config import check_config, check_config_text, load_config_text


def test_state_file_and_lame_duck_default_to_memory_and_two_seconds() -> None:
    config = load_config_text("version: 1\nzones: []\n")
    assert config.state.file is None
    assert config.dns.lame_duck == 2.0


def test_state_file_is_relative_to_the_config_and_lame_duck_a_duration(tmp_path: Path) -> None:
    path = tmp_path / "gslbd.yaml"
    path.write_text("version: 1\nzones: []\ndns: {lame_duck: 500ms}\nstate: {file: state/admin.json}\n")
    (tmp_path / "state").mkdir()
    config, problems = check_config(path)
    assert problems == [] or all(p.severity == "warning" for p in problems)
    assert config is not None
    assert config.state.file == str(tmp_path / "state" / "admin.json")
    assert config.dns.lame_duck == 0.5


def test_state_file_in_a_missing_directory_or_on_a_directory_is_an_error(tmp_path: Path) -> None:
    text = f"version: 1\nzones: []\nstate:\n  file: {tmp_path}/nowhere/admin.json\n  extra: 1\n"
    config, problems = check_config_text(text, "t.yaml")
    assert config is None
    assert [str(p) for p in problems if p.severity == "error"] == [
        f"t.yaml:4: state.file: the directory of state file '{tmp_path}/nowhere/admin.json' does not exist",
        "t.yaml:5: state.extra: unknown key 'extra'; valid keys: file",
    ]
    _, problems = check_config_text(f"version: 1\nzones: []\nstate: {{file: {tmp_path}}}\n", "t.yaml")
    assert [str(p) for p in problems if p.severity == "error"] == [
        f"t.yaml:3: state.file: state file '{tmp_path}' is a directory"
    ]


def test_lame_duck_may_be_zero_but_not_negative() -> None:
    assert load_config_text("version: 1\nzones: []\ndns: {lame_duck: 0}\n").dns.lame_duck == 0.0
    _, problems = check_config_text("version: 1\nzones: []\ndns: {lame_duck: -1s}\n", "t.yaml")
    assert [p.path for p in problems if p.severity == "error"] == ["dns.lame_duck"]
