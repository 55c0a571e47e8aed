"""Training text: find files, split them into documents, and pack token sequences.

Packing concatenates every document's tokens (``[SEP]`` between documents)
and cuts the stream into fixed windows ``[CLS] ... [SEP]`` of ``max_len``
tokens; only the last window is padded. With next-sentence prediction each
window becomes ``[CLS] A [SEP] B [SEP]``, where B is the true continuation or,
for half the windows (chosen once, from ``seed``), the second half of another window.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch

from retriever.errors import BadInputError

_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


def collect_text_files(paths: Sequence[str | os.PathLike]) -> list[Path]:
    """Files as given, and the ``*.txt`` files under directories (sorted).

    Raises:
        BadInputError: A path does not exist, or no file is found.
    """
    files: list[Path] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*.txt") if p.is_file()))
        elif path.is_file():
            files.append(path)
        else:
            raise BadInputError(f"{raw}: no such file or directory")
    if not files:
        raise BadInputError(f"no text files in {', '.join(map(str, paths)) or 'nothing'}")
    return files


def read_documents(files: Sequence[str | os.PathLike]) -> list[str]:
    """Paragraphs (blank-line separated, whitespace-trimmed, non-empty) of UTF-8 files, in order."""
    documents: list[str] = []
    for path in files:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise BadInputError(f"{path}: cannot read as UTF-8 text ({exc})") from None
        documents.extend(p.strip() for p in _PARAGRAPH_BREAK.split(text) if p.strip())
    return documents


@dataclass
class PackedSequences:
    """Fixed-length training sequences.

    Attributes:
        input_ids: ``(N, max_len)`` token ids, ``[PAD]`` after the last real token.
        attention_mask: ``(N, max_len)``, 1 on real tokens.
        token_type_ids: ``(N, max_len)``, 1 on segment B (next-sentence prediction only).
        next_sentence_label: ``(N,)``, 0 when B continues A, 1 when random; ``None`` without NSP.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    token_type_ids: torch.Tensor
    next_sentence_label: torch.Tensor | None = None

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def select(self, index: torch.Tensor | slice) -> dict[str, torch.Tensor]:
        """The model inputs (without masking) of the sequences at ``index``."""
        batch = {
            "input_ids": self.input_ids[index],
            "attention_mask": self.attention_mask[index],
            "token_type_ids": self.token_type_ids[index],
        }
        if self.next_sentence_label is not None:
            batch["next_sentence_label"] = self.next_sentence_label[index]
        return batch

    def split(self, eval_fraction: float) -> tuple[PackedSequences, PackedSequences]:
        """``(train, held_out)``: the held-out part is the last ``ceil(eval_fraction * N)``
        sequences (none when the fraction is 0; at least one sequence stays for training)."""
        n = len(self)
        held = min(math.ceil(eval_fraction * n), n - 1) if eval_fraction > 0 else 0
        return self._slice(slice(0, n - held)), self._slice(slice(n - held, n))

    def _slice(self, index: slice) -> PackedSequences:
        nsp = self.next_sentence_label
        return PackedSequences(
            self.input_ids[index],
            self.attention_mask[index],
            self.token_type_ids[index],
            None if nsp is None else nsp[index],
        )


def pack_sequences(
    documents: Sequence[str], tokenizer, max_len: int, *, nsp: bool = False, seed: int = 0
) -> PackedSequences:
    """Tokenize documents and pack them into windows of ``max_len`` tokens.

    Args:
        documents: Texts, in order.
        tokenizer: A BERT fast tokenizer (has ``[CLS]``, ``[SEP]``, ``[PAD]``).
        max_len: Tokens per sequence, special tokens included (at least 8).
        nsp: Build ``[CLS] A [SEP] B [SEP]`` pairs for next-sentence prediction.
        seed: Chooses the random B segments for next-sentence prediction.

    Raises:
        BadInputError: Too short ``max_len``, no tokens, or fewer than two
            windows for next-sentence prediction.
    """
    if max_len < 8:
        raise BadInputError(f"max length must be at least 8 tokens, got {max_len}")
    sep, cls = tokenizer.sep_token_id, tokenizer.cls_token_id
    body = max_len - (3 if nsp else 2)
    chunks = _chunks(documents, tokenizer, body)
    if not nsp:
        rows = [[cls, *chunk, sep] for chunk in chunks]
        return _padded(rows, [[0] * len(row) for row in rows], max_len, tokenizer.pad_token_id)
    if len(chunks) < 2:
        raise BadInputError("next-sentence prediction needs at least two sequences of text")
    rows, types, labels = _nsp_rows(chunks, cls, sep, body, seed)
    return _padded(rows, types, max_len, tokenizer.pad_token_id, labels)


def _chunks(documents: Sequence[str], tokenizer, body: int) -> list[list[int]]:
    """The documents' tokens, ``[SEP]`` after each, cut into runs of ``body`` tokens (a trailing ``[SEP]`` dropped).

    Raises:
        BadInputError: The documents hold no tokens.
    """
    sep = tokenizer.sep_token_id
    stream: list[int] = []
    for ids in tokenizer(list(documents), add_special_tokens=False, verbose=False)["input_ids"]:
        if ids:
            stream.extend(ids)
            stream.append(sep)
    chunks = [stream[i : i + body] for i in range(0, len(stream), body)]
    chunks = [c[:-1] if c[-1] == sep else c for c in chunks]
    chunks = [c for c in chunks if c]
    if not chunks:
        raise BadInputError("the training text holds no tokens")
    return chunks


def _nsp_rows(
    chunks: list[list[int]], cls: int, sep: int, body: int, seed: int
) -> tuple[list[list[int]], list[list[int]], list[int]]:
    """``(rows, token types, labels)`` of ``[CLS] A [SEP] B [SEP]`` pairs, one per chunk (at least two).

    A is a chunk's first half; B is its second half or, for about half the
    chunks (drawn from ``seed``) or when there is no second half, the second
    half of another chunk (label 1).
    """
    rows: list[list[int]] = []
    types: list[list[int]] = []
    labels: list[int] = []
    generator = torch.Generator().manual_seed(seed)
    for i, chunk in enumerate(chunks):
        half = max(1, len(chunk) // 2)
        first, second = chunk[:half], chunk[half:]
        is_random = bool(torch.rand((), generator=generator) < 0.5) or not second
        if is_random:
            other = (i + 1 + int(torch.randint(len(chunks) - 1, (), generator=generator))) % len(chunks)
            donor = chunks[other]
            second = donor[len(donor) // 2 :][: body - len(first)] or donor[: body - len(first)]
        rows.append([cls, *first, sep, *second, sep])
        types.append([0] * (len(first) + 2) + [1] * (len(second) + 1))
        labels.append(int(is_random))
    return rows, types, labels


def _padded(
    rows: list[list[int]], types: list[list[int]], max_len: int, pad: int, labels: list[int] | None = None
) -> PackedSequences:
    """``rows`` (token ids) and ``types`` (token type ids) as ``(N, max_len)`` tensors padded with ``pad``.

    ``labels`` (next-sentence labels, one per row) become ``next_sentence_label``.
    """
    input_ids = torch.full((len(rows), max_len), pad, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), max_len), dtype=torch.long)
    token_type_ids = torch.zeros((len(rows), max_len), dtype=torch.long)
    for i, (row, kinds) in enumerate(zip(rows, types)):
        input_ids[i, : len(row)] = torch.tensor(row)
        attention_mask[i, : len(row)] = 1
        token_type_ids[i, : len(row)] = torch.tensor(kinds)
    return PackedSequences(input_ids, attention_mask, token_type_ids, None if labels is None else torch.tensor(labels))
