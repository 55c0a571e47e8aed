"""OpenAI-compatible embeddings: ``POST /v1/embeddings``, ``GET /v1/models`` and ``GET /v1/models/{id}``.

Any OpenAI client pointed at ``base_url=http://HOST:PORT/v1`` (and the API
key, sent as a Bearer token) embeds with the collection's model, through the
same ``Embedder`` that embeds its queries and chunks. The one model served
is the collection's, by its name (``GET /v1/models``); ``dimensions`` is
accepted only when it equals the model's. Vectors come as floats or, with
``encoding_format: "base64"``, as little-endian float32 bytes in base64,
which is what the OpenAI clients ask for by default.
"""

from __future__ import annotations

import base64
import datetime as dt
import warnings
from typing import Any, Literal

import numpy as np
from fastapi import FastAPI, HTTPException
from pydantic import Field, field_validator

from app.server.deadlines import Deadline
from app.server.limits import MAX_EMBED_CHARS, MAX_EMBED_TEXTS, MAX_TEXT_CHARS
from app.server.schemas import Strict
from retriever.collection import Collection
from retriever.unicode_policy import check_utf8, printable


class EmbeddingsRequest(Strict):
    input: str | list[str] = Field(description="a text, or a list of texts (token arrays are not accepted)")
    model: str = Field(description="the collection's model name, as GET /v1/models lists it")
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = Field(None, description="refused unless it equals the model's dimension")
    user: str | None = Field(None, max_length=256, description="ignored")

    @field_validator("input")
    @classmethod
    def _texts(cls, value: str | list[str]) -> str | list[str]:
        texts = [value] if isinstance(value, str) else value
        if not 1 <= len(texts) <= MAX_EMBED_TEXTS:
            raise ValueError(f"give 1 to {MAX_EMBED_TEXTS} texts, got {len(texts)}")
        for i, text in enumerate(texts):
            if not text.strip():
                raise ValueError(f"input[{i}] is empty")
            if len(text) > MAX_TEXT_CHARS:
                raise ValueError(f"input[{i}] has {len(text):,} characters; the limit is {MAX_TEXT_CHARS:,}")
            check_utf8(text, f"input[{i}]")
        if sum(map(len, texts)) > MAX_EMBED_CHARS:
            raise ValueError(f"the texts hold more than {MAX_EMBED_CHARS:,} characters together")
        return value


def add_openai_routes(app: FastAPI, collection: Collection, limit: Deadline) -> None:
    """The OpenAI-compatible routes (``tags=["openai"]``), behind the same key as every route."""

    @app.get("/v1/models", tags=["openai"])
    def list_models() -> dict[str, Any]:
        """The one model this server embeds with: the collection's."""
        return {"object": "list", "data": [model_card(collection)]}

    @app.get("/v1/models/{model_id:path}", tags=["openai"])
    def retrieve_model(model_id: str) -> dict[str, Any]:
        """The collection's model, when ``model_id`` names it."""
        check_model(collection, model_id)
        return model_card(collection)

    @app.post("/v1/embeddings", tags=["openai"])
    async def create_embeddings(request: EmbeddingsRequest) -> dict[str, Any]:
        """Embeddings of `input` from the collection's model, in OpenAI's response shape."""
        check_model(collection, request.model)
        dim = int(collection.model["dim"])
        if request.dimensions is not None and request.dimensions != dim:
            raise HTTPException(
                400,
                f"dimensions: this model's embeddings have {dim} dimensions, not "
                f"{request.dimensions}; leave dimensions out or send {dim}",
            )
        return await limit.run(embeddings_answer, collection, request)


def model_card(collection: Collection) -> dict[str, Any]:
    created = dt.datetime.fromisoformat(collection.manifest.created_at)
    return {
        "id": collection.model["name"],
        "object": "model",
        "created": int(created.timestamp()),
        "owned_by": "semsearch",
    }


def check_model(collection: Collection, name: str) -> None:
    """404 unless ``name`` is the collection's model."""
    served = collection.model["name"]
    if name != served:
        raise HTTPException(
            404,
            f"model: {printable(name, 80)} is not served here; this collection's model is {served!r} (GET /v1/models)",
        )


def embeddings_answer(collection: Collection, request: EmbeddingsRequest) -> dict[str, Any]:
    """The ``/v1/embeddings`` answer; a text over the model's window is a 400 naming it."""
    texts = [request.input] if isinstance(request.input, str) else request.input
    embedder = collection.embedder
    counts = embedder.count_tokens(texts)
    too_long = [i for i, n in enumerate(counts) if n > embedder.max_tokens]
    if too_long:
        first = too_long[0]
        raise HTTPException(
            400,
            f"input[{first}] has {counts[first]} tokens, more than the model's window of "
            f"{embedder.max_tokens}; split it into shorter texts",
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        vectors = embedder.embed(texts)
    data = [
        {"object": "embedding", "index": i, "embedding": encode(vector, request.encoding_format)}
        for i, vector in enumerate(vectors)
    ]
    tokens = int(sum(counts))
    return {
        "object": "list",
        "data": data,
        "model": collection.model["name"],
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def encode(vector: np.ndarray, encoding_format: str) -> list[float] | str:
    """A vector as floats, or as base64 of its little-endian float32 bytes."""
    if encoding_format == "base64":
        return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")
    return [float(x) for x in vector]
