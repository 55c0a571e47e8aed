"""Which model embedded a collection's generation, and its ``Embedder``, loaded on first use.

A collection's model changes only by a switch (``storage.model_switch``),
which the manifest records as in force from a generation on. Each reader
asks for the model of the generation it searches: the manifest is read again
(one ``stat``) only when a generation it has not seen comes up, and at most
two embedders are kept, the model of the newest generation and the one before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from retriever.encoding.embedder import Embedder
from retriever.encoding.models import check_manifest_model
from retriever.storage.generations import file_stamp
from retriever.storage.manifest import MANIFEST, Manifest


class ModelsInForce:
    """The models of the collection at ``root``.

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

    @property
    def loaded(self) -> list[str]:
        """Weights hashes of the embedders loaded so far."""
        return list(self._embedders)

    def model_at(self, generation: int) -> dict[str, Any]:
        """The identity (``name``, ``sha256``, ``dim``, ...) of the model generation ``generation`` holds."""
        if generation != self._seen:
            self.reload()  # rewritten by a switch, or by compact, in another process
            self._seen = generation
        return self.manifest.model_at(generation)

    def embedder_at(self, generation: int) -> Embedder:
        """The ``Embedder`` of the model generation ``generation`` holds, loaded and checked on first use.

        Raises:
            BadInputError: The manifest names a model directory the user must name themselves
                (``check_manifest_model``).
            ModelMismatchError: The weights found under the model's name are not the ones recorded.
        """
        model = self.model_at(generation)
        embedder = self._embedders.get(model["sha256"])
        if embedder is None:
            check_manifest_model(model["name"])
            embedder = Embedder(model["name"])
            self.adopt(embedder, generation)
        return embedder

    def adopt(self, embedder: Embedder, generation: int) -> None:
        """Use ``embedder`` for generation ``generation``; raise ``ModelMismatchError`` unless it is that model."""
        model = self.model_at(generation)
        self.manifest.check_model_at(self.root, embedder, generation)
        keep = {model["sha256"], self.manifest.model["sha256"]}
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
        self._embedders[embedder.weights_sha256] = embedder
