"""WordPiece tokenizer training."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer, BertTokenizerFast

from retriever.errors import BadInputError
from training.tokenizer import SPECIAL_TOKENS, train_tokenizer


def test_saved_tokenizer_loads_with_auto_tokenizer(tokenizer_dir, tokenizer):
    assert (tokenizer_dir / "tokenizer.json").is_file()
    assert isinstance(tokenizer, BertTokenizerFast)
    assert set(SPECIAL_TOKENS) <= set(tokenizer.get_vocab())
    assert len(tokenizer) <= 300
    ids = tokenizer("Rivers flow into the sea.")["input_ids"]
    assert ids[0] == tokenizer.cls_token_id and ids[-1] == tokenizer.sep_token_id
    assert tokenizer.unk_token_id not in ids
    assert tokenizer.tokenize("RIVERS") == ["rivers"]


def test_cased_keeps_case(corpus_dir, tmp_path):
    out = train_tokenizer([corpus_dir / "a.txt"], tmp_path / "cased", vocab_size=300, lowercase=False, min_frequency=1)
    tok = AutoTokenizer.from_pretrained(str(out))
    assert tok.tokenize("The") == ["The"]
    assert "the" not in tok.tokenize("The")


def test_bad_inputs(tmp_path):
    with pytest.raises(BadInputError, match="no such file"):
        train_tokenizer([tmp_path / "missing"], tmp_path / "out")
    with pytest.raises(BadInputError, match="no text files"):
        train_tokenizer([tmp_path], tmp_path / "out")
