"""Embedding a column of a Ray Dataset, for RAG pipelines that already run on Ray.

The vectors are ``Embedder.embed``'s: the same model, mean pooling over real
tokens and L2 normalisation, computed in an actor pool with one model per
actor::

    import ray
    from retriever.encoding.ray_embed import embed_dataset

    ds = ray.data.read_json("chunks.jsonl")
    ds = embed_dataset(ds, "text", model="runs/emb", concurrency=4)   # adds "embedding"
    ds.write_parquet("embedded/")

or, to control ``map_batches`` yourself::

    ds.map_batches(EmbedBatches, fn_constructor_kwargs={"column": "text"},
                   batch_size=64, batch_format="numpy", compute=ray.data.ActorPoolStrategy(size=4))

Ray is an optional extra: ``pip install 'semsearch[ray]'``.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

try:
    import ray.data
except ImportError:
    raise ImportError("retriever.encoding.ray_embed needs Ray: pip install 'semsearch[ray]'") from None

from retriever.encoding.embedder import Embedder

DEFAULT_BATCH_SIZE = 64
OUTPUT_COLUMN = "embedding"


def _model_location(model: str | os.PathLike | Embedder | None) -> str | None:
    """What an actor loads: a name or directory (an ``Embedder`` travels as its name)."""
    if isinstance(model, Embedder):
        return model.name
    return None if model is None else str(model)


class EmbedBatches:
    """A ``map_batches`` callable class: one ``Embedder`` per actor, an embedding column out.

    Args:
        column: Name of the text column.
        model: Model directory, hub id, or ``None`` for the packaged all-MiniLM-L6-v2.
        output_column: Name of the column added (default ``"embedding"``).
        batch_size: Texts per forward pass inside the actor (default 64).
        device: ``"cpu"``, ``"cuda"``...; ``None`` picks CUDA when available.
    """

    def __init__(
        self,
        column: str,
        model: str | os.PathLike | None = None,
        *,
        output_column: str = OUTPUT_COLUMN,
        batch_size: int = DEFAULT_BATCH_SIZE,
        device: str | None = None,
    ) -> None:
        self.column, self.output_column = column, output_column
        self.embedder = Embedder(model, device=device, batch_size=batch_size)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """``batch`` (numpy format) with ``output_column``: float32 ``(rows, dim)``, unit rows."""
        if self.column not in batch:
            raise KeyError(f"no column {self.column!r} to embed; the batch has {', '.join(map(str, batch))}")
        vectors = self.embedder.embed(list(batch[self.column]), show_progress=False)
        return {**batch, self.output_column: vectors}


def embed_dataset(
    ds: "ray.data.Dataset",
    column: str,
    model: str | os.PathLike | Embedder | None = None,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    concurrency: int = 1,
    output_column: str = OUTPUT_COLUMN,
    num_cpus: float = 1,
    device: str | None = None,
    **map_batches_args: Any,
) -> "ray.data.Dataset":
    """``ds`` with a column of the embeddings of ``column`` (lazy, like every Ray transform).

    Args:
        ds: A Ray Dataset with a string column ``column``.
        column: The text column.
        model: Model directory, hub id, ``Embedder`` (its model is loaded again in
            each actor), or ``None`` for the packaged all-MiniLM-L6-v2.
        batch_size: Rows per batch handed to an actor, and texts per forward pass.
        concurrency: Actors in the pool, each holding one model (default 1).
        output_column: Name of the column added (default ``"embedding"``); each
            row's value is a float32 vector of the model's dimension, L2 norm 1.
        num_cpus: CPUs reserved per actor (default 1).
        device: Passed to each actor's ``Embedder``.
        **map_batches_args: Further ``Dataset.map_batches`` arguments (e.g. ``num_gpus``).
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, not {concurrency}")
    return ds.map_batches(
        EmbedBatches,
        fn_constructor_kwargs={
            "column": column,
            "model": _model_location(model),
            "output_column": output_column,
            "batch_size": batch_size,
            "device": device,
        },
        batch_size=batch_size,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=concurrency),
        num_cpus=num_cpus,
        udf_modifying_row_count=False,
        **map_batches_args,
    )
