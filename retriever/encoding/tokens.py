"""Tokenising for the encoder with the ``tokenizers`` library alone (no torch, no transformers).

Texts are prepared as sentence-transformers prepares them (stripped,
lower-cased when the model says so), cut to the model's window with its
special tokens kept, and grouped into length-bucketed, padded batches so that
short texts do not pay for long ones.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Sequence

import numpy as np


class TextTokenizer:
    """The model's tokenizer, configured for embedding.

    Each text is tokenised once: its content ids give both its length and,
    cut to the window and framed by the special tokens, its model input
    (what a transformers tokenizer does with ``truncation=True``).

    Args:
        tokenizer: A ``tokenizers.Tokenizer``, or the path of a ``tokenizer.json``.
        max_tokens: The model's window, special tokens included.
        do_lower_case: Lower-case texts first (a sentence-transformers setting).
    """

    def __init__(self, tokenizer, max_tokens: int, do_lower_case: bool = False) -> None:
        from tokenizers import Tokenizer

        if isinstance(tokenizer, (str, Path)):
            tokenizer = Tokenizer.from_file(str(tokenizer))
        else:
            tokenizer = Tokenizer.from_str(tokenizer.to_str())  # a copy: settings below stay ours
        tokenizer.no_truncation()
        tokenizer.no_padding()
        self._tokenizer = tokenizer
        self.backend = tokenizer  # the Rust tokenizer, for chunking (``retriever.encoding.chunking.Chunker``)
        self.max_tokens = max_tokens
        self.do_lower_case = do_lower_case
        self.prefix, self.suffix = _special_tokens(tokenizer)
        self.special = len(self.prefix) + len(self.suffix)

    def content(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids per text, special tokens excluded, nothing cut."""
        if not texts:
            return []
        texts = [text.strip() for text in texts]
        if self.do_lower_case:
            texts = [text.lower() for text in texts]
        return [e.ids for e in self._tokenizer.encode_batch(texts, add_special_tokens=False)]

    def count(self, texts: Sequence[str]) -> list[int]:
        """Tokens per text, special tokens included, nothing cut."""
        return [len(ids) + self.special for ids in self.content(texts)]

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids per text with special tokens, cut to ``max_tokens``."""
        return [self.with_special_tokens(ids, cut=True) for ids in self.content(texts)]

    def with_special_tokens(self, content_ids: Sequence[int], cut: bool = False) -> list[int]:
        """``content_ids`` (tokens of one text, no special tokens) framed as the model expects.

        With ``cut``, content beyond the window is dropped first.
        """
        if cut:
            content_ids = content_ids[: max(0, self.max_tokens - self.special)]
        return [*self.prefix, *content_ids, *self.suffix]


def _special_tokens(tokenizer) -> tuple[list[int], list[int]]:
    """The ids the post-processor puts before and after a single text ([CLS] and [SEP] for BERT)."""
    probe = "a"
    plain = tokenizer.encode(probe, add_special_tokens=False).ids
    framed = tokenizer.encode(probe, add_special_tokens=True).ids
    for start in range(len(framed) - len(plain) + 1):
        if framed[start : start + len(plain)] == plain:
            return framed[:start], framed[start + len(plain) :]
    return [], []


def padded_batches(
    ids: Sequence[Sequence[int]], batch_size: int
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Length-bucketed batches: texts sorted by length, each batch padded to its longest.

    Args:
        ids: Token ids per text (special tokens included).
        batch_size: Texts per batch.

    Yields:
        ``(positions, input_ids, attention_mask)``: the texts' positions in
        ``ids`` (shape ``(b,)``), and int64 arrays of shape ``(b, longest)``.
    """
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    for begin in range(0, len(order), batch_size):
        positions = np.asarray(order[begin : begin + batch_size], dtype=np.int64)
        longest = max(len(ids[i]) for i in positions)
        input_ids = np.zeros((len(positions), longest), dtype=np.int64)
        mask = np.zeros((len(positions), longest), dtype=np.int64)
        for row, i in enumerate(positions):
            input_ids[row, : len(ids[i])] = ids[i]
            mask[row, : len(ids[i])] = 1
        yield positions, input_ids, mask
