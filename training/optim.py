"""The optimizer every training stage uses: AdamW over trainable parameters, linear warmup then decay.

Frozen parameters (``requires_grad`` false, such as RoFormer's fixed
sinusoidal position table) are left out of the optimizer altogether. AdamW
never updates a parameter without a gradient, so leaving them out changes
no result; it keeps them out of the optimizer's state and checkpoints.
Optimizer states saved before frozen parameters were left out still load
(``load_optimizer_state`` maps them onto the trainable parameters).
"""

from __future__ import annotations

import torch


def param_groups(model: torch.nn.Module, weight_decay: float, *, trainable_only: bool = True) -> list[dict]:
    """AdamW groups: decay on weights, none on biases and LayerNorm.

    Args:
        model: Its ``named_parameters()`` (shared parameters once) are grouped.
        weight_decay: The decay of the first group; the second has 0.
        trainable_only: Leave out parameters with ``requires_grad`` false.

    Returns:
        ``[{"params": decayed, "weight_decay": weight_decay}, {"params": others, "weight_decay": 0.0}]``,
        each in ``named_parameters()`` order.
    """
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if param.requires_grad or not trainable_only:
            (no_decay if name.endswith("bias") or "LayerNorm" in name else decay).append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def make_optimizer(model: torch.nn.Module, *, lr: float, weight_decay: float, warmup_ratio: float, total: int):
    """``(optimizer, scheduler)``: AdamW at peak ``lr``; linear warmup for ``int(warmup_ratio * total)`` steps,
    then linear decay to 0 at step ``total``."""
    from transformers import get_linear_schedule_with_warmup

    optimizer = torch.optim.AdamW(param_groups(model, weight_decay), lr=lr)
    return optimizer, get_linear_schedule_with_warmup(optimizer, int(warmup_ratio * total), total)


def load_optimizer_state(optimizer: torch.optim.Optimizer, state: dict, model: torch.nn.Module) -> None:
    """Load a saved ``optimizer.state_dict()`` of the same model's ``param_groups``.

    A state whose groups also held the frozen parameters (as pretraining's
    did before they were left out) is mapped onto the trainable ones first.

    Raises:
        ValueError: The state fits neither grouping (another model).
    """
    sizes = [len(group["params"]) for group in state["param_groups"]]
    if sizes != [len(group["params"]) for group in optimizer.param_groups]:
        every = param_groups(model, 0.0, trainable_only=False)
        if sizes == [len(group["params"]) for group in every]:
            state = _without_frozen(state, [p for group in every for p in group["params"]])
    optimizer.load_state_dict(state)


def _without_frozen(state: dict, every: list[torch.nn.Parameter]) -> dict:
    """``state`` with the frozen parameters of ``every`` (its parameters, in index order) dropped, renumbered."""
    new_index = {old: new for new, old in enumerate(i for i, p in enumerate(every) if p.requires_grad)}
    groups = [
        {**group, "params": [new_index[i] for i in group["params"] if i in new_index]}
        for group in state["param_groups"]
    ]
    kept = {new_index[i]: value for i, value in state["state"].items() if i in new_index}
    return {"state": kept, "param_groups": groups}
