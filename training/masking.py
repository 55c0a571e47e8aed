"""Dynamic masking for masked-language-model training (BERT's 80/10/10 recipe).

Masks are drawn at batch time from the collator's ``torch.Generator``, so a
sequence gets a fresh mask every time it is seen, and saving the generator's
state makes a resumed run draw the same masks as an uninterrupted one.
"""

from __future__ import annotations

import torch

IGNORE_INDEX = -100


class MaskingCollator:
    """Selects tokens for prediction and corrupts them.

    Of the non-special tokens, ``mlm_probability`` are selected; of those,
    80% become ``[MASK]``, 10% a random non-special token, 10% stay unchanged.

    Args:
        tokenizer: A tokenizer with ``mask_token_id``, ``all_special_ids`` and ``len()``.
        mlm_probability: Share of non-special tokens selected (default 0.15).
        mask_ratio: Share of selected tokens replaced by ``[MASK]`` (default 0.8).
        random_ratio: Share of selected tokens replaced by a random token (default 0.1).
        seed: Seeds the collator's generator (default 0).

    Attributes:
        generator: The ``torch.Generator`` every mask is drawn from.
    """

    def __init__(
        self,
        tokenizer,
        mlm_probability: float = 0.15,
        mask_ratio: float = 0.8,
        random_ratio: float = 0.1,
        seed: int = 0,
    ) -> None:
        if not 0 < mlm_probability < 1:
            raise ValueError(f"mlm_probability must be in (0, 1), got {mlm_probability}")
        if mask_ratio < 0 or random_ratio < 0 or mask_ratio + random_ratio > 1:
            raise ValueError("mask_ratio and random_ratio must be non-negative and sum to at most 1")
        self.mask_id = tokenizer.mask_token_id
        self.special_ids = torch.tensor(sorted(set(tokenizer.all_special_ids)), dtype=torch.long)
        vocab = torch.arange(len(tokenizer))
        self.random_ids = vocab[~torch.isin(vocab, self.special_ids)]
        self.mlm_probability = mlm_probability
        self.mask_ratio = mask_ratio
        self.random_ratio = random_ratio
        self.generator = torch.Generator().manual_seed(seed)

    def special_tokens_mask(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Bool tensor shaped like ``input_ids``: True on ``[CLS]``, ``[SEP]``, ``[PAD]``... tokens."""
        return torch.isin(input_ids, self.special_ids)

    def mask(self, input_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Draw a fresh mask.

        Args:
            input_ids: ``(batch, length)`` token ids; not modified.

        Returns:
            ``(corrupted_ids, labels)``, both ``(batch, length)``: labels hold
            the original id at selected positions and -100 elsewhere.
        """
        g = self.generator
        shape = input_ids.shape
        selected = (torch.rand(shape, generator=g) < self.mlm_probability) & ~self.special_tokens_mask(input_ids)
        labels = torch.where(selected, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
        fate = torch.rand(shape, generator=g)
        to_mask = selected & (fate < self.mask_ratio)
        to_random = selected & (fate >= self.mask_ratio) & (fate < self.mask_ratio + self.random_ratio)
        random_tokens = self.random_ids[torch.randint(len(self.random_ids), shape, generator=g)]
        corrupted = input_ids.clone()
        corrupted[to_mask] = self.mask_id
        corrupted[to_random] = random_tokens[to_random]
        return corrupted, labels

    def __call__(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Model inputs with ``input_ids`` masked and ``labels`` added (other keys kept)."""
        corrupted, labels = self.mask(batch["input_ids"])
        return {**batch, "input_ids": corrupted, "labels": labels}
