"""``ExternalEmbedder``: a collection over another library's embedding functions keeps its promises."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from retriever import Collection
from retriever.errors import BadInputError, ModelMismatchError
from retriever.integrations.external_embedder import ExternalEmbedder, byte_tokenizer, decode

DIM = 16


def word_hash_vector(text: str) -> list[float]:
    """A bag of hashed words: texts sharing words point the same way."""
    vector = np.zeros(DIM)
    for word in text.lower().split():
        vector[int(hashlib.md5(word.strip(".,").encode()).hexdigest(), 16) % DIM] += 1.0
    return (vector + 1e-3).tolist()


class Recording:
    """Embedding functions that remember what they were given."""

    def __init__(self) -> None:
        self.documents: list[str] = []
        self.queries: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.documents += texts
        return [word_hash_vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return word_hash_vector(text)

    def embedder(self, name: str = "test:word-hash", **options) -> ExternalEmbedder:
        return ExternalEmbedder(name, self.embed_documents, self.embed_query, **options)


def test_bytes_round_trip_and_words_stay_whole():
    text = "Grüße aus Köln, 日本語 and emoji 🍵\n\nnext   paragraph"
    encoding = byte_tokenizer().encode(text, add_special_tokens=False)
    assert len(encoding.ids) == len(text.encode("utf-8")) + 1  # one byte each, and the leading space
    assert decode(encoding.ids) == text
    starts = {start for start, _ in encoding.offsets}
    assert {text.index("Köln"), text.index("日本語")} <= starts  # offsets are characters of the text


def test_long_documents_are_chunked_in_byte_windows_and_queries_use_the_query_function(tmp_path):
    model = Recording()
    text = " ".join(f"Sentence {i} tells of glaciers, fjords and moraines." for i in range(40))
    with Collection.create(tmp_path / "col", model.embedder(window_bytes=200)) as col:
        assert col.manifest.model["name"] == "test:word-hash" and col.manifest.chunking["window_tokens"] == 200
        col.upsert([{"id": "long", "text": text}, {"id": "tea", "text": "Green tea is steamed after picking."}])
        spans = col.chunk_spans("long")
        assert len(spans) > 5 and spans[0][0] == 0 and spans[-1][1] == len(text)
        assert all(len(text[s:e].encode()) <= 200 for s, e in spans)
        assert all(s2 < e1 for (_, e1), (s2, _) in zip(spans, spans[1:]))  # windows overlap
        assert model.documents[0] == "dimension probe"  # how the dimension was found
        assert model.documents[1 : 1 + len(spans)] == [text[s:e].strip() for s, e in spans]  # each window, as text
        assert [h.id for h in col.search("steamed green tea", k=1, mode="dense")] == ["tea"]
        assert model.queries == ["steamed green tea"]


def test_the_manifest_holds_the_identity_and_another_model_is_refused(tmp_path):
    with Collection.create(tmp_path / "col", Recording().embedder()) as col:
        col.upsert([{"id": "a", "text": "some text"}])
        assert col.manifest.model["dim"] == DIM and col.manifest.model["tokens"] == "utf-8 bytes"
    with Collection.open(tmp_path / "col", Recording().embedder()) as col:
        assert col.search("some text", k=1)[0].id == "a"
    with pytest.raises(ModelMismatchError, match="'test:other'"):
        Collection.open(tmp_path / "col", Recording().embedder("test:other"))


def test_unusable_vectors_and_settings_are_clear_errors():
    def wrong_dim(texts):
        return [[1.0, 0.0]] if texts == ["dimension probe"] else [[1.0, 0.0, 0.0] for _ in texts]

    embedder = ExternalEmbedder("test:wrong", wrong_dim, lambda text: [float("nan"), 0.0])
    with pytest.raises(BadInputError, match=r"vectors of model 'test:wrong' must have shape \(1, 2\)"):
        embedder.embed_token_ids([[104, 105]])
    with pytest.raises(BadInputError, match="NaN"):
        embedder.embed("query")
    with pytest.raises(BadInputError, match="no usable vector"):
        ExternalEmbedder("test:none", lambda texts: [[]], lambda text: [])
    with pytest.raises(BadInputError, match="window_bytes"):
        Recording().embedder(window_bytes=8)
    with pytest.raises(BadInputError, match="name"):
        Recording().embedder(name=" ")
    with pytest.raises(BadInputError, match="on_overflow"):
        Recording().embedder().embed("q", on_overflow="cut")
