"""``ExternalEmbedder``: an embedder over another library's model (a LangChain ``Embeddings``, say).

A collection keeps its promises with any object that has ``Embedder``'s
interface (``validation.is_embedder``): it records the model's identity in
its manifest and refuses another one later, chunks long documents in the
model's tokens, and embeds chunks and queries through that one object. A
model from another library brings two functions (documents, queries) and
nothing else, so this class supplies the rest:

- identity: ``name`` (the library's class and model name) and the dimension.
  Its weights are out of reach, so ``weights_sha256`` hashes the name: a
  collection built with it opens only with a model of that name and dimension.
- tokens: the text's UTF-8 bytes (``byte_tokenizer``), a tokenizer every
  text round-trips through. Chunk windows count bytes (``window_bytes``,
  default 1,000: 150 to 250 English words, inside the window of common
  sentence encoders), long documents are split into overlapping windows as
  with semsearch's own models, and a window's ids decode back to its text.
- embedding: chunks (``embed_token_ids``) go to the documents function,
  queries (``embed``) to the query function; every vector comes back as a
  float32 row of unit norm, so cosine equals inner product as for
  semsearch's models.
"""

from __future__ import annotations

import hashlib
from typing import Any, Callable, Sequence

import numpy as np

from retriever import deadline, validation
from retriever.encoding.tokens import TextTokenizer
from retriever.errors import BadInputError

DEFAULT_WINDOW_BYTES = 1_000
DocumentsFn = Callable[[list[str]], Sequence[Sequence[float]]]
QueryFn = Callable[[str], Sequence[float]]


class ExternalEmbedder:
    """An ``Embedder`` for a collection whose vectors come from another library's model.

    Args:
        name: The model's identity, recorded in the collection's manifest,
            e.g. ``"langchain:langchain_openai.OpenAIEmbeddings/text-embedding-3-small"``.
        embed_documents: Texts to one vector each (for chunks).
        embed_query: A text to its vector (for queries).
        window_bytes: Chunk window in UTF-8 bytes (default 1,000).
        source: The library's model object, kept for the adapters (``source``).

    Attributes:
        dim: The vectors' dimension, found by embedding a probe text once.
        max_tokens: ``window_bytes`` plus the two special tokens a collection
            leaves room for, so that its chunk window is ``window_bytes``.

    Raises:
        BadInputError: ``name`` is empty, ``window_bytes`` is under 16, or the
            probe vector is not a list of finite numbers.
    """

    backend = query_backend = "external"

    def __init__(
        self,
        name: str,
        embed_documents: DocumentsFn,
        embed_query: QueryFn,
        *,
        window_bytes: int = DEFAULT_WINDOW_BYTES,
        source: Any = None,
    ) -> None:
        if not isinstance(name, str) or not name.strip():
            raise BadInputError(f"an external model needs a non-empty name, got {name!r}")
        if isinstance(window_bytes, bool) or not isinstance(window_bytes, int) or window_bytes < 16:
            raise BadInputError(f"window_bytes must be an integer of at least 16, got {window_bytes!r}")
        self.name, self.source = name, source
        self._embed_documents, self._embed_query = embed_documents, embed_query
        self.max_tokens = window_bytes + 2
        self._tokens = TextTokenizer(byte_tokenizer(), self.max_tokens)
        probe = np.asarray(embed_documents(["dimension probe"]), dtype=np.float32)
        if probe.ndim != 2 or probe.shape[0] != 1 or probe.shape[1] == 0 or not np.isfinite(probe).all():
            raise BadInputError(f"model {name!r} gave no usable vector for a probe text (shape {probe.shape})")
        self.dim = int(probe.shape[1])

    def __repr__(self) -> str:
        return f"ExternalEmbedder({self.name!r}, dim={self.dim}, window_bytes={self.max_tokens - 2})"

    @property
    def weights_sha256(self) -> str:
        """SHA-256 of the name: the identity a collection checks (the weights are the other library's)."""
        return hashlib.sha256(self.name.encode("utf-8")).hexdigest()

    def identity(self) -> dict[str, Any]:
        """What a collection records to refuse a different model later."""
        return {
            "name": self.name,
            "sha256": self.weights_sha256,
            "dim": self.dim,
            "max_tokens": self.max_tokens,
            "pooling": "external",
            "normalize": True,
            "tokens": "utf-8 bytes",
        }

    def info(self) -> dict[str, Any]:
        """The run-time encoder, as ``Embedder.info`` describes its own."""
        return {"backend": self.backend, "query_backend": self.query_backend, "model": self.name}

    @property
    def text_tokenizer(self) -> TextTokenizer:
        """The byte tokenizer, for chunking."""
        return self._tokens

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """UTF-8 bytes per text (and one for the leading space the tokenizer adds)."""
        return self._tokens.count(validation.check_texts(texts))

    def embed(self, texts: Sequence[str] | str, **options: Any) -> np.ndarray:
        """Queries to unit vectors ``(len(texts), dim)`` float32, through the query function.

        ``options`` (``batch_size``, ``show_progress``, ``on_overflow``) are
        checked as ``Embedder.embed`` checks them; the other library cuts or
        refuses over-long text by its own rules.
        """
        texts = validation.check_texts(texts)
        validation.check_embed_options(options.get("batch_size"), options.get("on_overflow", "warn"))
        return self._unit_rows([self._embed_query(text) for text in texts], len(texts))

    def embed_token_ids(self, token_ids: Sequence[Sequence[int]], **options: Any) -> np.ndarray:
        """Chunks (their byte ids, from the ``Chunker``) to unit vectors ``(len(token_ids), dim)`` float32."""
        texts = [decode(ids) for ids in token_ids]
        return self._unit_rows(self._embed_documents(texts) if texts else [], len(texts))

    def _unit_rows(self, vectors: Any, n: int) -> np.ndarray:
        if n == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        rows = validation.check_vectors(vectors, n, self.dim, f"vectors of model {self.name!r}")
        deadline.check("embedding")
        return rows


def decode(token_ids: Sequence[int]) -> str:
    """The text of byte ids, less the space the tokenizer puts in front (a character cut in two shows as U+FFFD)."""
    text = bytes(token_ids).decode("utf-8", errors="replace")
    return text.strip() or text


def byte_tokenizer():
    """A ``tokenizers.Tokenizer`` whose ids are the UTF-8 bytes of the text, with a space put in front.

    Words (GPT-2's pre-tokenizer: a word carries the space before it) let the
    chunker end windows between words, offsets are character offsets into the
    text, and the leading space keeps a chunk's title apart from its text.
    """
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    symbols = _byte_symbols()
    tokenizer = Tokenizer(models.BPE(vocab={symbols[b]: b for b in range(256)}, merges=[]))
    tokenizer.normalizer = normalizers.Prepend(" ")
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    return tokenizer


def _byte_symbols() -> dict[int, str]:
    """The printable character ``ByteLevel`` writes for each byte (GPT-2's table)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]
    return {b: chr(b) for b in printable} | {b: chr(256 + i) for i, b in enumerate(others)}
