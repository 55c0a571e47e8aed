"""The committed generation a collection's readers see, reloaded when ``HEAD`` moves.

One ``stat`` of ``HEAD`` per search tells whether the view in memory is
still current; only when it moved is the catalog asked, and the new view
reuses every segment the old one had (``view.load_view``).
"""

from __future__ import annotations

import threading
from pathlib import Path

from retriever.errors import CollectionLockedError, CorruptCollectionError
from retriever.storage.catalog import Catalog, CatalogState
from retriever.storage.generations import head_stamp
from retriever.storage.view import View, load_view

RELOAD_TRIES = 10  # generations a reader may see pass while it loads one


class GenerationReader:
    """Holds the view of the last committed generation of the collection at ``root``."""

    def __init__(self, root: Path, catalog: Catalog) -> None:
        self.root = Path(root)
        self.catalog = catalog
        self._view: View | None = None
        self._head_seen: tuple | None = None
        self._reload = threading.Lock()

    def current(self) -> View:
        """The committed generation's view, reloaded when ``HEAD`` says it moved.

        Raises:
            CorruptCollectionError: A file of the committed generation is missing.
            CollectionLockedError: Writers published faster than a view could load.
        """
        stamp = head_stamp(self.root)
        view = self._view
        if view is not None and stamp is not None and stamp == self._head_seen:
            return view
        with self._reload:
            view = self._view  # another thread may have reloaded while this one waited
            if view is not None and stamp is not None and stamp == self._head_seen:
                return view
            for _ in range(RELOAD_TRIES):
                state = self.catalog.state()
                if view is not None and view.generation == state.generation:
                    self._head_seen = stamp
                    return view
                try:
                    view = load_view(self.root, state, view)
                except FileNotFoundError as exc:
                    if self.catalog.state().generation != state.generation:
                        continue  # a writer moved on and removed this generation's files
                    raise CorruptCollectionError(
                        f"generation {state.generation} of {self.root}: {exc} is missing"
                    ) from None
                self._view, self._head_seen = view, stamp
                return view
        raise CollectionLockedError(f"{self.root} changes too fast to load a consistent generation")

    def at(self, state: CatalogState) -> View:
        """The view of ``state`` (the writer's: committed, lock held), reusing the current one's segments."""
        view = self.current()
        return view if view.generation == state.generation else load_view(self.root, state, view)

    def advance(self, state: CatalogState) -> None:
        """Take ``state``, just published by this process's writer, as the current generation."""
        with self._reload:
            self._view = load_view(self.root, state, self._view)
            self._head_seen = head_stamp(self.root)
