"""A throwaway PostgreSQL server for the catalog tests.

``postgres_server`` (session): finds PostgreSQL's binaries (``/usr/lib/postgresql/*/bin``,
then ``PATH``; ``SEMSEARCH_TEST_PG_BIN`` replaces both with one folder), installs the
Debian ``postgresql`` package with apt-get when they are missing, runs ``initdb`` on a
temporary data directory (as the ``postgres`` user when run as root, since the server
refuses root), and starts it on a free loopback port with password (SCRAM) authentication
over TCP. It is stopped and its directory removed at the end of the session. Tests skip
with the reason only where PostgreSQL cannot be installed.

``postgres_url`` (function): a fresh database per test, as a SQLAlchemy URL without the
password; the password is in ``SEMSEARCH_CATALOG_PASSWORD`` for the test's duration.

``catalog_url`` (function, parametrized): ``None`` (the SQLite default) or a fresh
PostgreSQL URL, for tests that must hold on both.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import pytest

BIN_ENV = "SEMSEARCH_TEST_PG_BIN"
DEBIAN_BIN_GLOB = "/usr/lib/postgresql/*/bin"
NEEDED = ("initdb", "pg_ctl", "postgres")
SERVER_USER = "postgres"  # the account the Debian package creates
SUPERUSER = "semsearch"
APT_COMMANDS = (
    ("apt-get", "update", "-q"),
    ("apt-get", "install", "-y", "-q", "--no-install-recommends", "postgresql"),
)

Runner = Callable[[Sequence[str]], subprocess.CompletedProcess]


class PostgresUnavailable(Exception):
    """PostgreSQL is missing and cannot be installed here; the message says why."""


def _has_binaries(folder: Path) -> bool:
    return all(os.access(folder / name, os.X_OK) for name in NEEDED)


def _debian_folders() -> list[Path]:
    """``/usr/lib/postgresql/<version>/bin``, newest version first."""
    folders = [Path(p) for p in sorted(Path("/").glob(DEBIAN_BIN_GLOB.lstrip("/")))]
    return sorted(folders, key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0, reverse=True)


def candidate_folders() -> list[Path]:
    """Where to look for the binaries, in order (``SEMSEARCH_TEST_PG_BIN`` alone when set)."""
    if os.environ.get(BIN_ENV):
        return [Path(os.environ[BIN_ENV])]
    folders = _debian_folders()
    on_path = shutil.which("initdb")
    if on_path:
        folders.append(Path(on_path).resolve().parent)
    return folders


def find_binaries(folders: Sequence[Path]) -> Path | None:
    """The first folder holding initdb, pg_ctl and postgres, or ``None``."""
    return next((folder for folder in folders if _has_binaries(folder)), None)


def _run(command: Sequence[str]) -> subprocess.CompletedProcess:
    env = os.environ | {"DEBIAN_FRONTEND": "noninteractive"}
    return subprocess.run(list(command), env=env, capture_output=True, text=True, timeout=900, check=False)


def ensure_binaries(run: Runner = _run) -> Path:
    """The folder of PostgreSQL's binaries, installing the Debian package when they are missing.

    Args:
        run: Runs one command and returns its completed process (apt-get goes through it).
    Raises:
        PostgresUnavailable: with the reason, when they are missing and cannot be installed.
    """
    found = find_binaries(candidate_folders())
    if found is not None:
        return found
    if os.geteuid() != 0:
        raise PostgresUnavailable("PostgreSQL is not installed and installing it with apt-get needs root")
    if shutil.which("apt-get") is None and run is _run:
        raise PostgresUnavailable("PostgreSQL is not installed and there is no apt-get to install it")
    for command in APT_COMMANDS:
        try:
            done = run(command)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise PostgresUnavailable(f"`{' '.join(command)}` failed: {exc}") from None
        if done.returncode != 0:
            tail = " ".join((done.stderr or done.stdout or "").split()[-30:])
            raise PostgresUnavailable(f"`{' '.join(command)}` exited with {done.returncode}: {tail}")
    found = find_binaries(_debian_folders())
    if found is None:
        raise PostgresUnavailable(f"apt-get installed postgresql but no {DEBIAN_BIN_GLOB} holds {', '.join(NEEDED)}")
    return found


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class PostgresServer:
    """A running server: ``url(database)`` gives a SQLAlchemy URL without the password."""

    bindir: Path
    root: Path
    port: int
    password: str
    user: str = SUPERUSER
    host: str = "127.0.0.1"
    options: str = ""  # the server's command-line settings, for a restart

    @property
    def datadir(self) -> Path:
        return self.root / "data"

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://{self.user}@{self.host}:{self.port}/{database}"

    def url_with_password(self, database: str) -> str:
        """The URL with the password written into it (quoted), as a user might pass it."""
        from sqlalchemy.engine import make_url

        return make_url(self.url(database)).set(password=self.password).render_as_string(hide_password=False)

    def _admin(self):
        import psycopg

        return psycopg.connect(
            host=self.host, port=self.port, user=self.user, password=self.password, dbname="postgres", autocommit=True
        )

    def create_database(self) -> str:
        """A new empty database; returns its name."""
        name = f"t_{secrets.token_hex(6)}"
        with self._admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return name

    def halt(self) -> None:
        """Stop the server at once (``immediate``: as if it crashed); ``restart`` brings it back on its port."""
        _pg(
            [str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-m", "immediate", "-w", "stop"],
            _as_server_user(),
            "pg_ctl stop",
        )

    def restart(self) -> None:
        _pg(
            [
                str(self.bindir / "pg_ctl"),
                "-D",
                str(self.datadir),
                "-l",
                str(self.root / "server.log"),
                "-w",
                "-t",
                "60",
                "-o",
                self.options,
                "start",
            ],
            _as_server_user(),
            "pg_ctl start",
        )

    def drop_database(self, name: str) -> None:
        with self._admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _as_server_user() -> dict:
    """``subprocess`` arguments that run a command as the server's account (root cannot run it)."""
    if os.geteuid() != 0:
        return {}
    try:
        account = pwd.getpwnam(SERVER_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", SERVER_USER], check=True, capture_output=True)
        account = pwd.getpwnam(SERVER_USER)
    return {
        "user": account.pw_uid,
        "group": account.pw_gid,
        "extra_groups": [],
        "cwd": "/",
        "env": {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/", "LC_ALL": "C"},
    }


def _pg(command: Sequence[str], as_server: dict, what: str) -> None:
    done = subprocess.run(list(command), capture_output=True, text=True, timeout=120, check=False, **as_server)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({done.returncode}): {done.stdout}\n{done.stderr}")


def start_server(bindir: Path) -> PostgresServer:
    """initdb a temporary data directory and start a server on a free loopback port."""
    as_server = _as_server_user()
    root = Path(tempfile.mkdtemp(prefix="semsearch-pg-"))
    password = secrets.token_urlsafe(18) + "@:/%"  # characters a URL must quote
    server = PostgresServer(bindir, root, free_port(), password)
    pwfile = root / "pwfile"
    pwfile.write_text(password + "\n")
    if as_server:
        for path in (root, pwfile):
            os.chown(path, as_server["user"], as_server["group"])
    try:
        _pg(
            [
                str(bindir / "initdb"),
                "-D",
                str(server.datadir),
                "-U",
                SUPERUSER,
                f"--pwfile={pwfile}",
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "-E",
                "UTF8",
                "--no-locale",
                "--no-sync",
            ],
            as_server,
            "initdb",
        )
    finally:
        pwfile.unlink()
    options = f"-p {server.port} -k {root} -c listen_addresses={server.host} -c fsync=off -c full_page_writes=off"
    server.options = options
    _pg(
        [
            str(bindir / "pg_ctl"),
            "-D",
            str(server.datadir),
            "-l",
            str(root / "server.log"),
            "-w",
            "-t",
            "60",
            "-o",
            options,
            "start",
        ],
        as_server,
        "pg_ctl start",
    )
    return server


def stop_server(server: PostgresServer) -> None:
    try:
        _pg(
            [str(server.bindir / "pg_ctl"), "-D", str(server.datadir), "-m", "fast", "-w", "stop"],
            _as_server_user(),
            "pg_ctl stop",
        )
    finally:
        shutil.rmtree(server.root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server():
    """A PostgreSQL server for the whole session (skips with the reason if it cannot be installed)."""
    pytest.importorskip("psycopg", reason="the PostgreSQL driver is an extra: pip install 'semsearch[postgresql]'")
    try:
        bindir = ensure_binaries()
    except PostgresUnavailable as exc:
        pytest.skip(f"no PostgreSQL server for the catalog tests: {exc}")
    server = start_server(bindir)
    try:
        yield server
    finally:
        stop_server(server)


@pytest.fixture()
def postgres_url(postgres_server, monkeypatch):
    """A fresh database's URL (no password in it); the password is in the environment."""
    monkeypatch.setenv("SEMSEARCH_CATALOG_PASSWORD", postgres_server.password)
    monkeypatch.delenv("SEMSEARCH_CATALOG_PASSWORD_FILE", raising=False)
    name = postgres_server.create_database()
    yield postgres_server.url(name)
    postgres_server.drop_database(name)


@pytest.fixture(params=["sqlite", "postgresql"])
def catalog_url(request):
    """``None`` (SQLite inside the collection) or a fresh PostgreSQL database's URL."""
    if request.param == "sqlite":
        return None
    return request.getfixturevalue("postgres_url")


def catalog_url_for(request) -> str | None:
    """For a fixture of any scope parametrized ``["sqlite", "postgresql"]``: ``None``, or
    a new database's URL with the password in it (dropped when the server stops)."""
    if request.param == "sqlite":
        return None
    server = request.getfixturevalue("postgres_server")
    return server.url_with_password(server.create_database())
