"""Which model embedded a collection's generation, and its ``Embedder``, loaded on first use.

A collection's model changes only by a switch (``storage.model_switch``),
which the manifest records as in force from a generation on. Each reader
asks for the model of the generation it searches: the manifest is read again
(one ``stat``) only when a generation it has not seen comes up, and at most
two embedders are kept, the model of the newest generation and the one before.

Each model is loaded once, however many threads ask for it at once (the
searches of a server after another process switched the model): the first
loads it, the others wait for that load and share its embedder, or its
error. A failed load is not remembered; the next caller loads again.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from retriever import deadline
from retriever.encoding.embedder import Embedder
from retriever.encoding.models import check_manifest_model
from retriever.errors import DeadlineExceededError
from retriever.storage.generations import file_stamp
from retriever.storage.manifest import MANIFEST, Manifest


class _Load:
    """One load of a model in progress: the embedder it made or the error it raised, once ``finished``.

    Attributes:
        waiting: Callers waiting for it (besides the one loading), changed under ``ModelsInForce``'s lock.
    """

    def __init__(self) -> None:
        self.finished = threading.Event()
        self.embedder: Embedder | None = None
        self.error: BaseException | None = None
        self.waiting = 0

    def result(self, name: str) -> Embedder:
        """The loaded embedder, waiting for it until this thread's deadline (``retriever.deadline``), if any.

        Raises:
            DeadlineExceededError: The deadline passed first (the load goes on for the next caller).
            BaseException: What the load raised.
        """
        left = deadline.remaining()
        if not self.finished.wait(None if left is None else max(left, 0.0)):
            raise DeadlineExceededError(f"ran past its deadline while waiting for the model {name} to load")
        if self.error is not None:
            raise self.error
        assert self.embedder is not None
        return self.embedder


class ModelsInForce:
    """The models of the collection at ``root``; safe to use from several threads.

    Args:
        root: The collection directory.
        manifest: Its manifest, as loaded.
    """

    def __init__(self, root: Path, manifest: Manifest) -> None:
        self.root = Path(root)
        self.manifest = manifest
        self._stamp = file_stamp(self.root / MANIFEST)
        self._seen = -1  # the last generation the manifest was checked for
        self._embedders: dict[str, Embedder] = {}  # by weights sha256
        self._loads: dict[str, _Load] = {}  # by weights sha256: the loads in progress
        self._lock = threading.Lock()  # over ``_embedders`` and ``_loads``

    @property
    def loaded(self) -> list[str]:
        """Weights hashes of the embedders loaded so far."""
        with self._lock:
            return list(self._embedders)

    @property
    def loading(self) -> dict[str, int]:
        """Weights hashes of the models being loaded now, each with how many other callers wait for its load."""
        with self._lock:
            return {sha: load.waiting for sha, load in self._loads.items()}

    def model_at(self, generation: int) -> dict[str, Any]:
        """The identity (``name``, ``sha256``, ``dim``, ...) of the model generation ``generation`` holds."""
        if generation != self._seen:
            self.reload()  # rewritten by a switch, or by compact, in another process
            self._seen = generation
        return self.manifest.model_at(generation)

    def embedder_at(self, generation: int) -> Embedder:
        """The ``Embedder`` of the model generation ``generation`` holds, loaded and checked on first use.

        A model is loaded by one caller at a time: callers that ask while it
        loads wait for that load (until their thread's deadline, if any) and
        get its embedder, or the error it raised.

        Raises:
            BadInputError: The manifest names a model directory the user must name themselves
                (``check_manifest_model``).
            ModelMismatchError: The weights found under the model's name are not the ones recorded.
            DeadlineExceededError: This thread's deadline passed while another one loaded the model.
        """
        model = self.model_at(generation)
        sha = model["sha256"]
        with self._lock:
            embedder = self._embedders.get(sha)
            if embedder is not None:
                return embedder
            load = self._loads.get(sha)
            waits = load is not None  # for the load another caller started
            if waits:
                load.waiting += 1
            else:
                load = self._loads[sha] = _Load()
        if waits:
            return self._wait_for(load, model["name"])
        return self._load(load, model, generation)

    def _wait_for(self, load: _Load, name: str) -> Embedder:
        """``load``'s embedder once it finished (``_Load.result``); counted among its waiters meanwhile."""
        try:
            return load.result(name)
        finally:
            with self._lock:
                load.waiting -= 1

    def _load(self, load: _Load, model: dict[str, Any], generation: int) -> Embedder:
        """Load the model ``model`` names for generation ``generation``, and hand the outcome to ``load``'s waiters."""
        try:
            check_manifest_model(model["name"])
            embedder = Embedder(model["name"])
            self.adopt(embedder, generation)
        except BaseException as exc:
            load.error = exc
            raise
        else:
            load.embedder = embedder
            return embedder
        finally:
            with self._lock:
                del self._loads[model["sha256"]]  # the next caller finds the embedder, or (on failure) loads again
            load.finished.set()

    def adopt(self, embedder: Embedder, generation: int) -> None:
        """Use ``embedder`` for generation ``generation``; raise ``ModelMismatchError`` unless it is that model."""
        model = self.model_at(generation)
        self.manifest.check_model_at(self.root, embedder, generation)
        keep = {model["sha256"], self.manifest.model["sha256"]}
        with self._lock:
            self._embedders = {sha: e for sha, e in self._embedders.items() if sha in keep}
            self._embedders[model["sha256"]] = embedder

    def reload(self) -> Manifest:
        """The manifest as the file holds it now (read again when it changed)."""
        stamp = file_stamp(self.root / MANIFEST)
        if stamp != self._stamp:
            self.manifest, self._stamp, self._seen = Manifest.load(self.root), stamp, -1
        return self.manifest

    def switched(self, manifest: Manifest, embedder: Embedder) -> None:
        """Take ``manifest`` (just saved by a switch this process published) and the new model's ``embedder``."""
        self.manifest, self._stamp, self._seen = manifest, file_stamp(self.root / MANIFEST), -1
        with self._lock:
            self._embedders[embedder.weights_sha256] = embedder
