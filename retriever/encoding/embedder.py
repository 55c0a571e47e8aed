"""Text to vectors: the one embedding path for documents and queries.

Every vector in semsearch comes from ``Embedder.embed`` (or, for text already
tokenised, ``Embedder.embed_token_ids``): mean pooling over real tokens
(attention mask applied), then L2 normalisation, so cosine similarity equals
inner product. Which runtime computes it is a run-time choice
(``retriever.encoding.backends``); the vectors stay within cosine 0.9999 of torch fp32
unless a lossy backend is asked for.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from functools import cached_property
from typing import Sequence

import numpy as np

from retriever import deadline, validation
from retriever.encoding.models import load_sentence_transformer, resolve_model, weights_sha256
from retriever.encoding.threads import apply as apply_threads
from retriever.encoding.threads import thread_count
from retriever.encoding.tokens import TextTokenizer, padded_batches
from retriever.errors import BadInputError

# Nothing downloads at run time unless the user asks for it explicitly.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

BACKEND_ENV = "SEMSEARCH_BACKEND"
#: Inputs of at most this many texts are encoded by the query backend.
QUERY_BATCH = 8


class InputTooLongWarning(UserWarning):
    """Some inputs are longer than the model's window and were cut for embedding."""


#: Token counts of a mix of short queries (SciFact's claims run 10-40), timed by ``Embedder.batch_queries``.
_QUERY_TOKENS = (9, 12, 12, 14, 16, 17, 18, 19, 21, 22, 24, 26, 28, 31, 34, 38)


class Embedder:
    """Embeds text with a sentence-transformers model, mean-pooled and L2-normalised.

    The encoder runs on one of several backends (see ``retriever.encoding.backends``):
    torch, ONNX Runtime or OpenVINO, in fp32, bf16 where the CPU has it, or
    int8 when asked. ``backend="auto"`` (the default) measures the lossless
    ones once per machine and model and keeps the fastest whose vectors stay
    within cosine 0.9999 of torch fp32. When the model's export and that
    decision are cached, loading imports neither torch nor transformers.

    Args:
        model: A model directory, a hub id, or ``None`` for the packaged
            all-MiniLM-L6-v2.
        device: ``"cpu"``, ``"cuda"``...; ``None`` picks CUDA when available.
            A device other than the CPU runs torch.
        batch_size: Texts per forward pass (default 32).
        backend: ``"auto"``, or a name from ``retriever.encoding.backends.SUPPORTED``
            such as ``"onnx-fp32"`` or ``"openvino-bf16"`` (default:
            ``$SEMSEARCH_BACKEND``, else ``"auto"``).
        cache_dir: Where exports and decisions are kept (default
            ``$SEMSEARCH_CACHE``, else ``~/.cache/semsearch``).
        threads: Threads for the encoder (default: the cores available).

    Attributes:
        name: The model's display name (the path for a local directory).
        dim: Embedding dimension.
        max_tokens: The model's window, special tokens included.
        backend: The backend for passages, e.g. ``"openvino-bf16"``.
        query_backend: The backend for a few texts at a time (queries); the
            same as ``backend`` unless ``auto`` found torch fastest for
            passages, in which case queries run on the fastest runtime
            without torch, so the query path never loads it.
    """

    def __init__(
        self,
        model: str | os.PathLike | None = None,
        *,
        device: str | None = None,
        batch_size: int = 32,
        backend: str | None = None,
        cache_dir: str | os.PathLike | None = None,
        threads: int | None = None,
    ) -> None:
        from retriever.encoding import backends, export

        self.name, self._location = resolve_model(model)
        self.batch_size = batch_size
        self.threads = threads or thread_count()
        self._cache_root = export.cache_root(cache_dir)
        requested = (backend or os.environ.get(BACKEND_ENV) or "auto").strip().lower()
        if requested != "auto":
            requested = backends.parse(requested)
        if device not in (None, "cpu") and requested != "auto" and not requested.startswith("torch"):
            raise BadInputError(f"backend {requested} runs on the CPU, not on {device!r}")
        self._device = device
        self._model = None  # the SentenceTransformer, loaded only when torch is needed
        self._hf_tokenizer = None
        self.decision: dict = {"requested": requested}
        self._export = (
            None
            if requested.startswith("torch") or device not in (None, "cpu")
            else (export.find_export(self._location, self._cache_root))
        )
        chosen = (requested, requested)  # (passage backend, query backend)
        if requested == "auto" and device in (None, "cpu") and self._export is not None:
            from retriever.encoding.backends import choice

            stored = choice.load_choice(self._cache_root, choice.choice_key(self._export.weights_sha256))
            if stored:
                self.decision |= stored
                chosen = (stored["backend"], stored.get("query_backend", stored["backend"]))
        if "auto" in chosen or chosen[1].startswith("torch") or self._export is None:
            self._load_torch()
            chosen = self._prepare(requested, chosen)
        if self._export is not None:  # the window of the model loaded, when it is (the same weights may read less)
            self.dim = self._export.dim
            self.max_tokens = int(self._model.max_seq_length) if self._model is not None else self._export.max_tokens
            self._tokens = TextTokenizer(self._export.tokenizer_path, self.max_tokens, self._export.do_lower_case)
        self.backend, self.query_backend = chosen
        self._backend = self._open(self.query_backend)
        self._passage_backend = self._backend if self.backend == self.query_backend else None
        apply_threads(self.threads)

    def _load_torch(self) -> None:
        self._model = load_sentence_transformer(self._location, self._device)
        apply_threads(self.threads)  # also when torch loads late, for a passage backend
        self.dim = int(self._model.get_embedding_dimension())
        self.max_tokens = int(self._model.max_seq_length)
        self._tokens = TextTokenizer(
            self._model.tokenizer.backend_tokenizer,
            self.max_tokens,
            bool(getattr(self._model[0], "do_lower_case", False)),
        )

    def _prepare(self, requested: str, chosen: tuple[str, str]) -> tuple[str, str]:
        """With torch loaded: export if a non-torch backend may be used, and decide ``auto``.

        Returns:
            ``(passage backend, query backend)``.
        """
        from retriever.encoding import export
        from retriever.encoding.backends import choice

        if requested.startswith("torch") or self._device not in (None, "cpu"):
            name = "torch-fp32" if requested == "auto" else requested
            return name, name
        try:
            self._export = export.export_model(self._model, self.weights_sha256, self._cache_root)
            export.remember_location(self._location, self.weights_sha256, self._cache_root)
        except (export.ExportError, OSError) as exc:  # OSError: the cache cannot be written
            if requested != "auto":
                raise BadInputError(f"backend {requested}: {exc}") from None
            self.decision |= {"backend": "torch-fp32", "reason": f"no export: {exc}"}
            return "torch-fp32", "torch-fp32"
        if "auto" not in chosen:  # asked for, or decided earlier
            return chosen
        key = choice.choice_key(self.weights_sha256)
        stored = choice.load_choice(self._cache_root, key)
        if stored is None:
            stored = choice.measure(
                choice.candidates(),
                self._open,
                lambda backend, texts: self._encode_ids(self._tokens.encode(texts), 32, False, backend),
            ) | {"cpu": choice.cpu_info()}
            with contextlib.suppress(OSError):  # unsaved, it is measured again next time
                choice.save_choice(self._cache_root, key, stored)
        self.decision |= stored
        return stored["backend"], stored.get("query_backend", stored["backend"])

    def _open(self, name: str):
        from retriever.encoding import backends

        if name.startswith("torch") and self._model is None:
            self._load_torch()
        return backends.load(name, export=self._export, model=self._model, threads=self.threads)

    def __repr__(self) -> str:
        return f"Embedder({self.name!r}, dim={self.dim}, max_tokens={self.max_tokens}, backend={self.backend!r})"

    @property
    def passage_backend(self):
        """The backend for batches of passages, opened on first use when it is not the query one."""
        if self._passage_backend is None:
            self._passage_backend = self._open(self.backend)
        return self._passage_backend

    def batch_queries(self, max_batch: int = 64, max_wait_s: float = 0.002, *, when: str = "faster") -> None:
        """Encode concurrent small calls (queries from many threads) together in one pass, where that is faster.

        For servers: calls of ``embed`` with at most ``QUERY_BATCH`` texts,
        from any thread, are merged by a ``retriever.encoding.batching.BatchedBackend``
        (wait of ``max_wait_s`` after the first; up to ``max_batch`` calls).
        Each caller still gets exactly its own vectors. A backend with
        fixed-shape graphs for small inputs compiles them all here, and the
        backend's cost per call is timed here, so that a batch
        of very unequal lengths runs as a few calls instead of padding every
        query to the longest.

        With ``when="faster"`` (default), eight threads' queries are timed
        both ways (``batching.concurrent_rates``, under a second) and the
        faster way is kept: batching wins where a call costs much or calls
        take turns (OpenVINO, AMX), concurrent calls where they share the
        cores well (ONNX Runtime on AVX2). ``decision["query_batching"]``
        holds the choice and the rates. ``when="always"`` batches unmeasured.

        Args:
            max_batch: Most calls encoded together (default 64).
            max_wait_s: Seconds a batch waits for company after its first call (default 0.002).
            when: ``"faster"`` (measure both ways, keep the faster) or ``"always"``.

        Raises:
            BadInputError: ``when`` is neither.
        """
        from retriever.encoding.batching import BatchedBackend, call_overhead_tokens, concurrent_rates

        if when not in ("faster", "always"):
            raise BadInputError(f"when must be 'faster' or 'always', got {when!r}")
        if "query_batching" in self.decision:  # decided (and wrapped, if batched) by an earlier call
            return
        if hasattr(self._backend, "compile_fixed_shapes"):  # the shapes of batched queries, before the first
            self._backend.compile_fixed_shapes()
        overhead = call_overhead_tokens(self._backend, self.max_tokens)
        batched = BatchedBackend(self._backend, max_batch, max_wait_s, overhead_tokens=overhead)
        rates: dict[str, float] = {}
        if when == "faster":
            rates = concurrent_rates(self._backend, batched, [min(n, self.max_tokens) for n in _QUERY_TOKENS])
        chosen = "batched" if not rates or rates["batched"] >= rates["concurrent"] else "concurrent"
        self.decision["query_batching"] = {"chosen": chosen} | {f"{way}_per_s": round(r, 1) for way, r in rates.items()}
        if chosen == "batched":
            self._backend = batched

    @property
    def text_tokenizer(self) -> TextTokenizer:
        """The model's tokenizer without transformers or torch (``retriever.encoding.tokens``); chunking uses it."""
        return self._tokens

    @property
    def tokenizer(self):
        """The model's fast (Rust-backed) transformers tokenizer; loaded on first use (imports transformers)."""
        if self._model is not None:
            return self._model.tokenizer
        if self._hf_tokenizer is None:
            from transformers import AutoTokenizer

            self._hf_tokenizer = AutoTokenizer.from_pretrained(str(self._location))
        return self._hf_tokenizer

    @cached_property
    def weights_sha256(self) -> str:
        """SHA-256 over the model's parameters and buffers, in name order."""
        if self._model is None:
            return self._export.weights_sha256
        return weights_sha256(self._model)

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

    def info(self) -> dict:
        """The run-time encoder: backend, threads, and how ``auto`` decided (timings, cosines)."""
        return {**self.decision, "backend": self.backend, "query_backend": self.query_backend, "threads": self.threads}

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Token counts of ``texts``, including the special tokens the model adds.

        Raises:
            BadInputError: A text is not a string or not UTF-8.
        """
        return self._tokens.count(validation.check_texts(texts))

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
        texts = validation.check_texts(texts)
        validation.check_embed_options(batch_size, on_overflow)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        content = self._tokens.content(texts)
        self._report_overflow([len(ids) + self._tokens.special for ids in content], on_overflow)
        if show_progress is None:
            show_progress = len(texts) >= 1000
        ids = [self._tokens.with_special_tokens(c, cut=True) for c in content]
        return self._encode_ids(ids, batch_size or self.batch_size, show_progress)

    def embed_token_ids(
        self, token_ids: Sequence[Sequence[int]], *, batch_size: int | None = None, show_progress: bool | None = None
    ) -> np.ndarray:
        """Embed texts already tokenised (e.g. by ``Chunker.split``), skipping the tokenizer.

        Args:
            token_ids: Per text, its token ids without special tokens; at most
                ``max_tokens`` once the special tokens are added.
            batch_size: Overrides the embedder's batch size.
            show_progress: Progress bar on stderr; ``None`` shows it for 1,000+ texts.

        Returns:
            float32 array of shape ``(len(token_ids), dim)``, rows of L2 norm 1.

        Raises:
            BadInputError: A text is longer than the window.
            DeadlineExceededError: Run under ``retriever.deadline`` and past it.
        """
        framed = [self._tokens.with_special_tokens(ids) for ids in token_ids]
        longest = max((len(ids) for ids in framed), default=0)
        if longest > self.max_tokens:
            raise BadInputError(f"a text of {longest} tokens exceeds the model's window of {self.max_tokens}")
        if not framed:
            return np.zeros((0, self.dim), dtype=np.float32)
        if show_progress is None:
            show_progress = len(framed) >= 1000
        return self._encode_ids(framed, batch_size or self.batch_size, show_progress)

    def _encode_ids(self, ids: list[list[int]], batch_size: int, show_progress: bool, backend=None) -> np.ndarray:
        """Run the backend over length-bucketed batches; rows come back in input order.

        A few texts (a query, a request) go to the query backend, which
        never needs torch; larger inputs go to the passage backend.
        """
        if backend is None:
            backend = self._backend if len(ids) <= QUERY_BATCH else self.passage_backend
        out = np.empty((len(ids), self.dim), dtype=np.float32)
        progress = None
        if show_progress:
            from tqdm.auto import tqdm

            progress = tqdm(total=len(ids), desc="Embedding", unit="text")
        for positions, input_ids, mask in padded_batches(ids, batch_size):
            deadline.check("embedding")  # under a deadline: stop between batches
            out[positions] = backend.run(input_ids, mask)
            if progress is not None:
                progress.update(len(positions))
        if progress is not None:
            progress.close()
        deadline.check("embedding")  # a late result is not handed on (to a commit, say)
        return out

    def _report_overflow(self, counts: list[int], on_overflow: str) -> None:
        """Warn or raise (``on_overflow``) when token ``counts`` exceed the window."""
        over = [(i, n) for i, n in enumerate(counts) if n > self.max_tokens]
        if not over:
            return
        longest_index, longest = max(over, key=lambda item: item[1])
        message = (
            f"{len(over)} of {len(counts)} text(s) exceed the model's window of "
            f"{self.max_tokens} tokens (longest: text {longest_index}, {longest} tokens); "
            "only the first window is embedded. Index long documents through a "
            "Collection, which splits them into overlapping chunks."
        )
        if on_overflow == "error":
            raise BadInputError(message)
        warnings.warn(message, InputTooLongWarning, stacklevel=3)
