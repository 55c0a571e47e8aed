"""The PostgreSQL test server's set-up: where it looks for binaries and how it installs them.

apt-get itself is not run here (that is what the catalog tests do on a machine
without PostgreSQL); a recording runner stands in for it and lays out the
files the Debian package would.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests import postgres

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="installing with apt-get needs root")


class FakeApt:
    """Records commands; ``install`` lays out a Debian-style bin folder under ``root``."""

    def __init__(self, root: Path, fail: str | None = None):
        self.root, self.fail, self.commands = root, fail, []

    def __call__(self, command):
        self.commands.append(tuple(command))
        if self.fail and self.fail in command:
            return subprocess.CompletedProcess(command, 100, "", "E: Unable to locate package postgresql\n")
        if "install" in command:
            bindir = self.root / "lib" / "postgresql" / "16" / "bin"
            bindir.mkdir(parents=True)
            for name in postgres.NEEDED:
                (bindir / name).write_text("#!/bin/sh\n")
                (bindir / name).chmod(0o755)
        return subprocess.CompletedProcess(command, 0, "", "")


@pytest.fixture()
def nowhere(tmp_path, monkeypatch) -> Path:
    """No PostgreSQL anywhere: the search folder is empty and so is the Debian location."""
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv(postgres.BIN_ENV, str(empty))
    monkeypatch.setattr(postgres, "DEBIAN_BIN_GLOB", str(tmp_path / "lib" / "postgresql" / "*" / "bin"))
    return tmp_path


def test_the_override_folder_replaces_the_usual_places(nowhere, monkeypatch):
    assert postgres.candidate_folders() == [nowhere / "empty"]
    assert postgres.find_binaries(postgres.candidate_folders()) is None
    monkeypatch.delenv(postgres.BIN_ENV)
    assert nowhere / "empty" not in postgres.candidate_folders()


@needs_root
def test_missing_binaries_are_installed_with_apt_get_then_found(nowhere):
    apt = FakeApt(nowhere)
    found = postgres.ensure_binaries(run=apt)
    assert apt.commands == list(postgres.APT_COMMANDS)
    assert apt.commands[0][:2] == ("apt-get", "update") and "postgresql" in apt.commands[1]
    assert found == nowhere / "lib" / "postgresql" / "16" / "bin"


@needs_root
def test_present_binaries_need_no_install(nowhere, monkeypatch):
    FakeApt(nowhere)(["apt-get", "install"])  # lays the folder out
    monkeypatch.setenv(postgres.BIN_ENV, str(nowhere / "lib" / "postgresql" / "16" / "bin"))
    apt = FakeApt(nowhere / "unused")
    assert postgres.ensure_binaries(run=apt) == nowhere / "lib" / "postgresql" / "16" / "bin"
    assert apt.commands == []


@needs_root
@pytest.mark.parametrize("failing", ["update", "install"])
def test_a_failed_install_says_which_command_and_why(nowhere, failing):
    apt = FakeApt(nowhere, fail=failing)
    with pytest.raises(postgres.PostgresUnavailable) as info:
        postgres.ensure_binaries(run=apt)
    message = str(info.value)
    assert f"apt-get {failing}" in message and "exited with 100" in message and "Unable to locate" in message


@pytest.mark.skipif(os.geteuid() == 0, reason="only without root")
def test_without_root_missing_binaries_are_reported_not_installed(nowhere):
    apt = FakeApt(nowhere)
    with pytest.raises(postgres.PostgresUnavailable, match="needs root"):
        postgres.ensure_binaries(run=apt)
    assert apt.commands == []
