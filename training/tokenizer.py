"""WordPiece tokenizer training: plain text in, a transformers-loadable fast tokenizer out."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Sequence

from training.data import collect_text_files

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
DEFAULT_VOCAB_SIZE = 30522


def train_tokenizer(
    files: Sequence[str | os.PathLike],
    output_dir: str | os.PathLike,
    vocab_size: int = DEFAULT_VOCAB_SIZE,
    lowercase: bool = True,
    min_frequency: int = 2,
) -> Path:
    """Train a BERT WordPiece tokenizer and save it as a ``BertTokenizerFast``.

    Args:
        files: Text files, or directories walked for ``*.txt`` files.
        output_dir: Where ``tokenizer.json``, ``vocab.txt`` and the tokenizer
            configs are written; ``AutoTokenizer.from_pretrained`` loads it.
        vocab_size: Largest vocabulary, special tokens included (default 30522).
        lowercase: Lowercase and strip accents (default) or keep case.
        min_frequency: Fewest occurrences for a merge to enter the vocabulary (default 2).

    Returns:
        The output directory.

    Raises:
        BadInputError: No text files, or a vocabulary too small for the special tokens.
    """
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertTokenizerFast

    from retriever.errors import BadInputError

    if vocab_size <= len(SPECIAL_TOKENS):
        raise BadInputError(f"vocab size must exceed {len(SPECIAL_TOKENS)}, got {vocab_size}")
    if min_frequency < 1:
        raise BadInputError(f"min frequency must be at least 1, got {min_frequency}")
    paths = collect_text_files(files)
    trainer = BertWordPieceTokenizer(lowercase=lowercase)
    trainer.train(
        [str(path) for path in paths],
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=SPECIAL_TOKENS,
        show_progress=False,
    )
    output = Path(output_dir)
    output.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        trainer.save_model(tmp)
        tokenizer = BertTokenizerFast(os.path.join(tmp, "vocab.txt"), do_lower_case=lowercase)
    tokenizer.save_pretrained(str(output))
    return output
