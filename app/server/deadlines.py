"""Request deadlines of the HTTP API: blocking work runs in a thread and is stopped at the deadline.

Past the deadline the answer is 503 and the work behind it is stopped
(catalog queries are interrupted, embedding stops between batches, a write
rolls back), so the worker thread is free again.
"""

from __future__ import annotations

from typing import Any, Callable

import anyio

from retriever.deadline import deadline, expired
from retriever.errors import DeadlineExceededError


class Deadline:
    """Runs blocking work of one request within ``seconds``.

    Args:
        seconds: The longest a request's work may take (the service's ``deadline_s``).
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.on_cancel: Callable[[], None] = lambda: None  # told of each request stopped at its deadline
        self.message = f"the request ran past its deadline of {seconds:g} s and was stopped; try again, or narrow it"

    async def run(self, work: Callable[..., Any], *args: Any) -> Any:
        """``work(*args)`` in a worker thread, stopped at the deadline.

        Raises:
            DeadlineExceededError: the deadline passed (whatever the stopped work raised).
        """
        try:
            with anyio.move_on_after(self.seconds):
                return await anyio.to_thread.run_sync(self._within, work, args, abandon_on_cancel=True)
            raise DeadlineExceededError(self.message)
        except DeadlineExceededError:
            self.on_cancel()
            raise

    def _within(self, work: Callable[..., Any], args: tuple) -> Any:
        with deadline(self.seconds):
            try:
                return work(*args)
            except Exception:
                if expired():  # whatever the stopped work raised, the cause is the deadline
                    raise DeadlineExceededError(self.message) from None
                raise
