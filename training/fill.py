"""Fill-mask: a masked-language model's top guesses for each ``[MASK]`` in a text."""

from __future__ import annotations

import os

from retriever.errors import BadInputError


def fill_mask(text: str, model_dir: str | os.PathLike, k: int = 5) -> list[list[tuple[str, float]]]:
    """Top-``k`` tokens for every mask token in ``text``.

    Args:
        text: Text holding one or more mask tokens (``[MASK]`` for BERT).
        model_dir: Directory of a masked-LM model and its tokenizer.
        k: Guesses per mask (default 5).

    Returns:
        One list per mask, in text order, of ``(token, probability)`` sorted
        by descending probability.

    Raises:
        BadInputError: No mask token in the text, ``k < 1``, or no loadable model.
    """
    import torch
    from transformers import AutoModelForMaskedLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    if k < 1:
        raise BadInputError(f"k must be at least 1, got {k}")
    if not os.path.isdir(model_dir):
        raise BadInputError(f"model {str(model_dir)!r}: no such model directory")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        model = AutoModelForMaskedLM.from_pretrained(str(model_dir))
    except (OSError, ValueError) as exc:
        reason = str(exc).splitlines()[0]
        raise BadInputError(f"cannot load a masked-LM model from {str(model_dir)!r}: {reason}") from None
    if tokenizer.mask_token is None or tokenizer.mask_token not in text:
        raise BadInputError(f"the text holds no {tokenizer.mask_token or '[MASK]'} token to fill")
    encoded = tokenizer(text, return_tensors="pt", truncation=True)
    positions = (encoded["input_ids"][0] == tokenizer.mask_token_id).nonzero().flatten()
    if len(positions) == 0:
        raise BadInputError(
            f"every {tokenizer.mask_token} lies beyond the model's {tokenizer.model_max_length}-token window"
        )
    model.eval()
    with torch.no_grad():
        probabilities = model(**encoded).logits[0, positions].softmax(-1)
    top = probabilities.topk(min(k, probabilities.shape[-1]), dim=-1)
    return [
        [(tokenizer.convert_ids_to_tokens(int(i)), float(p)) for p, i in zip(values, indices)]
        for values, indices in zip(top.values, top.indices)
    ]
