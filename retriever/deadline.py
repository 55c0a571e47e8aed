"""Per-thread deadlines that stop catalog queries and embedding when they expire.

A caller (the HTTP service, for each request) runs work inside
``with deadline(seconds):``. Inside it, SQLite statements are interrupted once
the deadline passes (a progress handler installed on every SQLite connection),
PostgreSQL ones are cancelled by the server (each gets a ``statement_timeout``
of the time left), and ``Embedder.embed`` stops between batches, both raising
``DeadlineExceededError``; a commit past the deadline is refused, so a write
that runs late rolls back like any failed one.
Outside such a block nothing changes: the Python API and the command line
have no deadline.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Iterator

from sqlalchemy import event
from sqlalchemy.engine import Engine

from retriever.errors import DeadlineExceededError

_local = threading.local()
_CHECK_EVERY = 20_000  # SQLite virtual-machine steps between two looks at the clock


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Run the block with a deadline ``seconds`` from now (in this thread)."""
    previous = getattr(_local, "until", None)
    _local.until = time.monotonic() + seconds
    try:
        yield
    finally:
        _local.until = previous


def active() -> bool:
    """Whether this thread runs under a deadline."""
    return getattr(_local, "until", None) is not None


def expired() -> bool:
    """Whether this thread runs under a deadline that has passed."""
    until = getattr(_local, "until", None)
    return until is not None and time.monotonic() > until


def remaining() -> float | None:
    """Seconds left before this thread's deadline (negative once past), or ``None`` without one."""
    until = getattr(_local, "until", None)
    return None if until is None else until - time.monotonic()


def check(what: str = "the operation") -> None:
    """Raise ``DeadlineExceededError`` when this thread's deadline has passed."""
    if expired():
        raise DeadlineExceededError(f"{what} ran past its deadline and was stopped")


def _progress() -> int:
    return 1 if expired() else 0  # non-zero makes SQLite interrupt the statement


@event.listens_for(Engine, "connect")
def _install_progress_handler(dbapi_connection, _record) -> None:
    if hasattr(dbapi_connection, "set_progress_handler"):  # sqlite3 connections
        dbapi_connection.set_progress_handler(_progress, _CHECK_EVERY)


@event.listens_for(Engine, "commit")
def _refuse_a_late_commit(_connection) -> None:
    check("the write")  # raising here rolls the transaction back: a write past its deadline changes nothing


_PG_TIMEOUT = "semsearch_statement_timeout"  # connection.info key: this connection's statement_timeout is set


@event.listens_for(Engine, "before_cursor_execute")
def _postgres_statement_timeout(conn, cursor, _statement, _parameters, _context, _executemany) -> None:
    """On PostgreSQL, give each statement under a deadline a ``statement_timeout`` of the time left.

    The server then cancels a query that runs past the deadline (there is no
    progress handler as in SQLite); outside a deadline the limit is lifted
    again on a connection that had one.
    """
    if conn.dialect.name != "postgresql":
        return
    left = remaining()
    if left is None and not conn.info.get(_PG_TIMEOUT):
        return
    cursor.execute(f"SET statement_timeout = {0 if left is None else max(1, int(left * 1000))}")
    conn.info[_PG_TIMEOUT] = left is not None
