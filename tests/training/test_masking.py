"""The masking collator's statistics: 15% selected, 80/10/10, specials never touched."""

from __future__ import annotations

import torch

from training.masking import IGNORE_INDEX, MaskingCollator


def _batch(tokenizer, generator: torch.Generator) -> torch.Tensor:
    """``(32, 32)`` ids: [CLS] random words [SEP], the last rows padded."""
    collator = MaskingCollator(tokenizer)
    words = collator.random_ids[torch.randint(len(collator.random_ids), (32, 32), generator=generator)]
    words[:, 0] = tokenizer.cls_token_id
    words[:, 20] = tokenizer.sep_token_id
    words[:, -1] = tokenizer.sep_token_id
    words[24:, 25:] = tokenizer.pad_token_id
    return words


def test_masking_statistics(tokenizer):
    collator = MaskingCollator(tokenizer, seed=1)
    data = torch.Generator().manual_seed(0)
    special = set(tokenizer.all_special_ids)
    eligible = selected = masked = randomized = kept = 0
    for _ in range(200):
        ids = _batch(tokenizer, data)
        corrupted, labels = collator.mask(ids)
        is_special = collator.special_tokens_mask(ids)
        chosen = labels != IGNORE_INDEX
        assert not (chosen & is_special).any()
        assert torch.equal(labels[chosen], ids[chosen])
        assert torch.equal(corrupted[~chosen], ids[~chosen])
        assert not any(int(t) in special for t in corrupted[chosen & (corrupted != tokenizer.mask_token_id)])
        eligible += int((~is_special).sum())
        selected += int(chosen.sum())
        masked += int((chosen & (corrupted == tokenizer.mask_token_id)).sum())
        same = chosen & (corrupted == ids)
        kept += int(same.sum())
        randomized += int((chosen & (corrupted != ids) & (corrupted != tokenizer.mask_token_id)).sum())
    assert abs(selected / eligible - 0.15) < 0.01
    # a random replacement can draw the original token (1 in ~270): it then counts as kept
    assert abs(masked / selected - 0.8) < 0.02
    assert abs(randomized / selected - 0.1) < 0.02
    assert abs(kept / selected - 0.1) < 0.02


def test_masks_are_redrawn_and_seeded(tokenizer):
    ids = _batch(tokenizer, torch.Generator().manual_seed(0))
    collator = MaskingCollator(tokenizer, seed=3)
    first, second = collator.mask(ids), collator.mask(ids)
    assert not torch.equal(first[1], second[1])
    again = MaskingCollator(tokenizer, seed=3).mask(ids)
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])


def test_call_adds_labels_and_keeps_other_inputs(tokenizer):
    ids = _batch(tokenizer, torch.Generator().manual_seed(0))
    mask = (ids != tokenizer.pad_token_id).long()
    batch = MaskingCollator(tokenizer)({"input_ids": ids, "attention_mask": mask})
    assert set(batch) == {"input_ids", "attention_mask", "labels"}
    assert batch["labels"].shape == ids.shape and batch["attention_mask"] is mask
