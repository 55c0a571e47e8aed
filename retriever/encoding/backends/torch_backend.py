"""The reference backend: the sentence-transformers model run by torch (fp32, or bf16 autocast)."""

from __future__ import annotations

import numpy as np

from retriever.encoding.backends.rows import normalize_rows


class TorchBackend:
    """Runs the model's transformer with torch and mean-pools over real tokens.

    Args:
        model: A loaded ``SentenceTransformer`` (Transformer + mean Pooling).
        precision: ``"fp32"`` or ``"bf16"`` (CPU autocast).
    """

    def __init__(self, model, precision: str = "fp32") -> None:
        import torch

        if precision not in ("fp32", "bf16"):
            raise ValueError(f"torch runs fp32 or bf16, not {precision}")
        self.name = f"torch-{precision}"
        self._model = model
        self._torch = torch
        self._device = model.device
        self._bf16 = precision == "bf16"

    def run(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        torch = self._torch
        features = {
            "input_ids": torch.from_numpy(input_ids).to(self._device),
            "attention_mask": torch.from_numpy(attention_mask).to(self._device),
        }
        with torch.inference_mode(), torch.autocast(self._device.type, torch.bfloat16, enabled=self._bf16):
            pooled = self._model(features)["sentence_embedding"]
        return normalize_rows(pooled.float().cpu().numpy())
