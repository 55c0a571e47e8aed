"""The OpenAI-compatible routes, called by the real ``openai`` client against a running ``semsearch serve``."""

from __future__ import annotations

import base64

import numpy as np
import openai
import pytest

from tests.app.test_server import KEY, serving


@pytest.fixture(scope="module")
def served(tmp_path_factory, tiny_model_dir):
    """An OpenAI client of a running server, the collection's model name, and the server's URL."""
    from retriever import Collection

    with serving(tmp_path_factory.mktemp("openai"), tiny_model_dir) as (base, path):
        with Collection.open(path) as col:
            name = col.manifest.model["name"]
        yield openai.OpenAI(base_url=f"{base}/v1", api_key=KEY, max_retries=0), name, base


def cosines(a, b) -> np.ndarray:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return (a * b).sum(axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


@pytest.mark.parametrize("encoding_format", ["float", "base64"])
def test_embeddings_equal_the_embedder(served, tiny_embedder, encoding_format):
    client, name, _ = served
    texts = ["green tea is steamed", "rivers flow into the sea", "Kaffee wird geröstet"]
    answer = client.embeddings.create(model=name, input=texts, encoding_format=encoding_format)
    assert [item.index for item in answer.data] == [0, 1, 2] and answer.model == name
    got = [item.embedding for item in answer.data]
    if encoding_format == "base64":  # the client hands base64 back as it came
        got = [np.frombuffer(base64.b64decode(e), dtype="<f4") for e in got]
    assert cosines(got, tiny_embedder.embed(texts)).min() >= 0.9999
    assert answer.usage.prompt_tokens == answer.usage.total_tokens == sum(tiny_embedder.count_tokens(texts))


def test_a_single_string_and_the_clients_default_encoding(served, tiny_embedder):
    client, name, _ = served
    answer = client.embeddings.create(model=name, input="green tea")  # the client asks for base64 and decodes it
    assert cosines([answer.data[0].embedding], tiny_embedder.embed(["green tea"]))[0] >= 0.9999
    same = client.embeddings.create(model=name, input="green tea", dimensions=tiny_embedder.dim)
    assert len(same.data[0].embedding) == tiny_embedder.dim


def test_models_list_and_retrieve(served):
    client, name, _ = served
    assert [model.id for model in client.models.list()] == [name]
    assert client.models.retrieve(name).owned_by == "semsearch"
    with pytest.raises(openai.NotFoundError, match="not served here"):
        client.models.retrieve("text-embedding-3-small")


def test_refusals_name_the_problem(served, tiny_embedder):
    client, name, base = served
    with pytest.raises(openai.BadRequestError, match=f"have {tiny_embedder.dim} dimensions, not 1536"):
        client.embeddings.create(model=name, input="tea", dimensions=1536)
    with pytest.raises(openai.NotFoundError, match="is not served here"):
        client.embeddings.create(model="text-embedding-3-small", input="tea")
    with pytest.raises(openai.BadRequestError, match=r"input\[1\] has \d+ tokens"):
        client.embeddings.create(model=name, input=["ok", "tea " * 500])
    with pytest.raises(openai.UnprocessableEntityError, match=r"input\[0\] is empty"):
        client.embeddings.create(model=name, input=[""])
    with pytest.raises(openai.UnprocessableEntityError):
        client.embeddings.create(model=name, input=[[1, 2, 3]])  # token arrays
    with pytest.raises(openai.AuthenticationError, match="wrong API key"):
        openai.OpenAI(base_url=f"{base}/v1", api_key="not-the-key", max_retries=0).models.list()
