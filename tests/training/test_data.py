"""Reading and packing training text."""

from __future__ import annotations

import pytest
import torch

from retriever.errors import BadInputError
from training.data import collect_text_files, pack_sequences, read_documents


def test_directories_are_walked_for_txt(corpus_dir):
    files = collect_text_files([corpus_dir])
    assert [f.name for f in files] == ["a.txt", "b.txt"]
    assert collect_text_files([corpus_dir / "ignored.md"]) == [corpus_dir / "ignored.md"]
    with pytest.raises(BadInputError):
        collect_text_files([corpus_dir / "nope.txt"])


def test_documents_are_paragraphs(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("one\ntwo\n\n  \n\nthree\n", encoding="utf-8")
    assert read_documents([path]) == ["one\ntwo", "three"]


def test_packing_fills_windows_and_holds_out_the_tail(corpus_dir, tokenizer):
    data = pack_sequences(read_documents(collect_text_files([corpus_dir])), tokenizer, 32)
    assert data.input_ids.shape[1] == 32 and len(data) > 10
    assert (data.input_ids[:, 0] == tokenizer.cls_token_id).all()
    lengths = data.attention_mask.sum(1)
    assert (lengths[:-1] >= 31).all()  # a window ending at a document break drops that [SEP]
    assert int(data.input_ids[-1, lengths[-1] - 1]) == tokenizer.sep_token_id
    assert (data.input_ids[data.attention_mask == 0] == tokenizer.pad_token_id).all()
    train, held = data.split(0.1)
    assert len(held) == -(-len(data) // 10) and len(train) + len(held) == len(data)
    assert torch.equal(held.input_ids, data.input_ids[len(train) :])


def test_nsp_pairs(corpus_dir, tokenizer):
    data = pack_sequences(read_documents(collect_text_files([corpus_dir])), tokenizer, 32, nsp=True)
    labels = data.next_sentence_label
    assert 0.2 < labels.float().mean() < 0.8
    for ids, types, mask in zip(data.input_ids, data.token_type_ids, data.attention_mask):
        real, kinds = ids[mask.bool()], types[mask.bool()]
        assert kinds.tolist() == sorted(kinds.tolist()) and 0 < int(kinds.sum()) < len(kinds) - 2
        a_end = int((kinds == 0).sum()) - 1
        assert real[a_end] == tokenizer.sep_token_id and real[-1] == tokenizer.sep_token_id
