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
"""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from retriever.errors import SemsearchError

PASSWORD_ENV = "SEMSEARCH_CATALOG_PASSWORD"
PASSWORD_FILE_ENV = "SEMSEARCH_CATALOG_PASSWORD_FILE"

_remembered: dict[str, str] = {}  # URL without password -> password, for this process only


def _parse(url: str | URL) -> URL | None:
    """``url`` parsed, or ``None`` when it is not a SQLAlchemy URL."""
    if isinstance(url, URL):
        return url
    try:
        return make_url(str(url))
    except (ArgumentError, ValueError):
        return None


def _bare(url: URL) -> str:
    """The URL as text with no password at all (a key and a stored form)."""
    return url._replace(password=None).render_as_string(hide_password=False)


def redact(url: str | URL | None) -> str:
    """``url`` for a message: its password, if any, shown as ``***``."""
    if url is None:
        return "None"
    parsed = _parse(url)
    if parsed is None:  # not a URL; it cannot be shown safely in part
        return "<unparseable catalog URL>"
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
    if parsed.password is None:
        return str(url)
    bare = _bare(parsed)
    _remembered[bare] = str(parsed.password)
    return bare


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


def with_password(url: str | URL) -> str | URL:
    """``url`` ready to connect: a ``URL`` carrying the password when one is known.

    A SQLite URL, or one that is not a URL, comes back unchanged; a URL's own
    password comes first. The result renders with the password hidden in
    ``str()`` and ``repr()``, so it is safe in messages too.
    """
    parsed = _parse(url)
    if parsed is None or parsed.get_backend_name() == "sqlite":
        return url
    if parsed.password is not None:
        return parsed
    password = _remembered.get(_bare(parsed)) or password_from_environment()
    return parsed if password is None else parsed.set(password=password)
