"""Catalog URLs without their password: what is stored, shown and connected to.

A catalog password never lands on disk or in a message. The manifest keeps
the URL without it (``for_manifest``); every message shows it hidden
(``redact``); a connection gets it at run time (``with_password``) from, in
order:

1. the URL itself, when the caller wrote one into it;
2. a URL with a password given to ``for_manifest`` earlier in this process
   (so ``Collection.create(catalog_url="postgresql+psycopg://u:pw@h/db")``
   works at once, without writing ``pw`` anywhere);
3. the environment variable ``SEMSEARCH_CATALOG_PASSWORD``;
4. the file named by ``SEMSEARCH_CATALOG_PASSWORD_FILE`` (its first line).

A collection directory may come from someone else, so the password from the
environment (3, 4) goes only to a URL the user gave in this process
(``for_manifest``, as ``Collection.create`` does) or whose every host is listed in
``SEMSEARCH_CATALOG_HOSTS`` (comma-separated ``host`` or ``host:port``); a
manifest naming any other host is refused with an error that says so. A
PostgreSQL connection that carries a password always requires SCRAM
(libpq's ``require_auth=scram-sha-256``), so the server never sees the
password itself. A password written as a query parameter (``?password=``)
is treated like one in the URL: remembered, never stored or shown.
"""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy import event
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError

from retriever.errors import SemsearchError

PASSWORD_ENV = "SEMSEARCH_CATALOG_PASSWORD"
PASSWORD_FILE_ENV = "SEMSEARCH_CATALOG_PASSWORD_FILE"
HOSTS_ENV = "SEMSEARCH_CATALOG_HOSTS"
SCRAM = "scram-sha-256"
LIBPQ_DRIVERS = ("psycopg", "psycopg2")  # the PostgreSQL drivers that honour ``require_auth``
_HOST_KEYS = ("host", "hostaddr")  # query parameters that override a URL's host in libpq
_SECRET_KEYS = ("password",)  # query parameters that carry the password

_remembered: dict[str, str] = {}  # URL without password -> password, for this process only
_given: set[str] = set()  # URLs without password the user gave in this process


def sqlite_url(path: str | os.PathLike) -> str:
    """The SQLAlchemy URL of the SQLite file at ``path``, its ``?``, ``#`` and ``%`` escaped (a folder may be
    named ``a?b``; a plain ``f"sqlite:///{path}"`` would read the rest as the URL's query)."""
    return URL.create("sqlite", database=str(path)).render_as_string(hide_password=False)


def _parse(url: str | URL) -> URL | None:
    """``url`` parsed, or ``None`` when it is not a SQLAlchemy URL."""
    if isinstance(url, URL):
        return url
    try:
        return make_url(str(url))
    except (ArgumentError, ValueError):
        return None


def _query_password(url: URL) -> str | None:
    """The password written as a ``?password=`` query parameter, or ``None``."""
    value = url.query.get("password")
    if isinstance(value, tuple):
        value = value[-1] if value else None
    return None if value is None else str(value)


def _bare(url: URL) -> str:
    """The URL as text with no password at all (a key and a stored form)."""
    return url._replace(password=None).difference_update_query(_SECRET_KEYS).render_as_string(hide_password=False)


def redact(url: str | URL | None) -> str:
    """``url`` for a message: its password, if any, shown as ``***``."""
    if url is None:
        return "None"
    parsed = _parse(url)
    if parsed is None:  # not a URL; it cannot be shown safely in part
        return "<unparseable catalog URL>"
    if _query_password(parsed) is not None:
        parsed = parsed.update_query_dict({"password": "***"})
    return parsed.render_as_string(hide_password=True)


def for_manifest(url: str | None) -> str | None:
    """The URL to store: ``url`` without its password, which this process remembers.

    Args:
        url: A SQLAlchemy URL, or ``None`` (the default SQLite catalog).
    Returns:
        The same URL without the password, or ``None``.
    """
    if url is None:
        return None
    parsed = _parse(url)
    if parsed is None:
        raise SemsearchError(f"cannot use catalog URL {redact(url)}: not a SQLAlchemy URL")
    password = parsed.password if parsed.password is not None else _query_password(parsed)
    if password is None:
        _given.add(_bare(parsed))
        return str(url)
    bare = _bare(parsed)
    _remembered[bare] = str(password)
    _given.add(bare)
    return bare


def hosts(url: URL) -> list[str]:
    """Every host ``url`` may connect to: its own and those its query names (libpq ``host``, ``hostaddr``).

    Returns:
        ``host`` or ``host:port`` strings, lower-case; ``""`` stands for the local socket.
    """
    found = [f"{url.host or ''}:{url.port}" if url.port else (url.host or "")]
    for key in _HOST_KEYS:
        values = url.query.get(key, ())
        for value in (values,) if isinstance(values, str) else values:
            found.extend(part.strip() for part in str(value).split(","))
    return [host.lower() for host in found]


def allowed_hosts() -> set[str]:
    """The hosts in ``SEMSEARCH_CATALOG_HOSTS``, lower-case (empty when unset)."""
    return {h.strip().lower() for h in os.environ.get(HOSTS_ENV, "").split(",") if h.strip()}


def _allowed(url: URL) -> bool:
    """Whether the environment's password may go to ``url``: given here, or every host allow-listed."""
    if _bare(url) in _given:
        return True
    listed = allowed_hosts()
    return all(host in listed or host.rsplit(":", 1)[0] in listed for host in hosts(url))


def password_from_environment() -> str | None:
    """The catalog password from ``SEMSEARCH_CATALOG_PASSWORD`` or the file named by
    ``SEMSEARCH_CATALOG_PASSWORD_FILE``; ``None`` when neither is set."""
    password = os.environ.get(PASSWORD_ENV)
    if password:
        return password
    path = os.environ.get(PASSWORD_FILE_ENV)
    if not path:
        return None
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise SemsearchError(f"cannot read the catalog password file named by {PASSWORD_FILE_ENV}: {exc}") from None
    return lines[0] if lines and lines[0] else None


def _require_scram(url: URL) -> URL:
    """``url`` (which carries a password), refused unless its PostgreSQL driver can require SCRAM.

    Raises:
        SemsearchError: A PostgreSQL driver that cannot require SCRAM.
    """
    if url.get_backend_name() == "postgresql" and url.get_driver_name() not in LIBPQ_DRIVERS:
        raise SemsearchError(
            f"catalog URL {redact(url)}: a password is sent only through psycopg, which can "
            f"require SCRAM authentication; use postgresql+psycopg://"
        )
    return url


@event.listens_for(Engine, "do_connect")
def _scram_only(dialect, _record, _cargs, cparams) -> None:
    """Every PostgreSQL connection that sends a password requires SCRAM, whatever its URL's query says."""
    if dialect.name == "postgresql" and cparams.get("password"):
        cparams["require_auth"] = SCRAM


def with_password(url: str | URL) -> str | URL:
    """``url`` ready to connect: a ``URL`` carrying the password when one is known.

    A SQLite URL, or one that is not a URL, comes back unchanged; a URL's own
    password comes first. The result renders with the password hidden in
    ``str()`` and ``repr()``, so it is safe in messages too; on PostgreSQL it
    requires SCRAM.

    Raises:
        SemsearchError: The password is in the environment but ``url`` was
            neither given in this process nor allow-listed in
            ``SEMSEARCH_CATALOG_HOSTS``.
    """
    parsed = _parse(url)
    if parsed is None or parsed.get_backend_name() == "sqlite":
        return url
    password = parsed.password if parsed.password is not None else _query_password(parsed)
    parsed = parsed.difference_update_query(_SECRET_KEYS)
    if password is None:
        password = _remembered.get(_bare(parsed))
    if password is None:
        password = password_from_environment()
        if password is not None and not _allowed(parsed):
            raise SemsearchError(
                f"catalog URL {redact(parsed)} names host(s) {', '.join(repr(h) for h in hosts(parsed))}, "
                f"which this process was not given: the password from {PASSWORD_ENV} goes only to a catalog "
                f"URL given here or to a host listed in {HOSTS_ENV} (comma-separated host or host:port)"
            )
    return parsed if password is None else _require_scram(parsed.set(password=password))
