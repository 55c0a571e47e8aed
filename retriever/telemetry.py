"""How long a collection's work takes, for whoever listens (the HTTP API's ``/metrics``).

A ``Timings`` belongs to one collection; its searcher times the stages of a
search (``encode``, ``dense``, ``bm25``, ``fusion``, ``display``) and its
writer each ``commit`` and ``merge``. Listeners are called with the name and
the seconds; with none, timing costs one check.
"""

from __future__ import annotations

import functools
import time
from contextlib import contextmanager
from typing import Callable, Iterator

Listener = Callable[[str, float], None]  # (what, seconds)


class Timings:
    """The listeners of one collection's timings."""

    def __init__(self) -> None:
        self.listeners: list[Listener] = []

    def listen(self, listener: Listener) -> None:
        """Call ``listener(name, seconds)`` after every timed piece of work."""
        self.listeners.append(listener)

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        """Time the block as ``name``, also when it raises."""
        if not self.listeners:
            yield
            return
        started = time.perf_counter()
        try:
            yield
        finally:
            self.record(name, time.perf_counter() - started)

    def record(self, name: str, seconds: float) -> None:
        """Tell every listener that ``name`` took ``seconds``."""
        for listener in self.listeners:
            listener(name, seconds)


def timed_method(name: str) -> Callable:
    """Decorate a method of an object with a ``timings`` attribute: each call is timed as ``name``."""

    def decorate(method: Callable) -> Callable:
        @functools.wraps(method)
        def run(self, *args, **kwargs):
            with self.timings.timed(name):
                return method(self, *args, **kwargs)

        return run

    return decorate
