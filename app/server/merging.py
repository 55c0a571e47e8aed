"""The service's background merge: what a write under its deadline leaves for later.

A write through the API commits within its request's deadline and runs no
merge (``Writer.merge_after_commit``); after it answers, one thread of the
service runs the merge the policy asks for, under the write lock and with no
deadline, so an API-only collection keeps few segments.
"""

from __future__ import annotations

import logging
import threading

from retriever.collection import Collection
from retriever.errors import SemsearchError

log = logging.getLogger("semsearch.server")


class BackgroundMerges:
    """Runs at most one merge at a time, in a thread of its own, after a write.

    Args:
        collection: The served collection.
    """

    def __init__(self, collection: Collection) -> None:
        self.collection = collection
        self.running = threading.Lock()

    def kick(self) -> threading.Thread | None:
        """Start a merge unless one is running; returns its thread (``None`` when one was running)."""
        if not self.running.acquire(blocking=False):
            return None
        thread = threading.Thread(target=self._merge, name="semsearch-merge", daemon=True)
        thread.start()
        return thread

    def _merge(self) -> None:
        try:
            writer = self.collection.writer
            with writer.locked():
                writer.merge_after_commit()
        except SemsearchError as exc:  # busy, say: the next write tries again
            log.warning("background merge skipped: %s", exc)
        except Exception:  # noqa: BLE001 - a merge never takes the service down
            log.exception("background merge failed")
        finally:
            self.running.release()
