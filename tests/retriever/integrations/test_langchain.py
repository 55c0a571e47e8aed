"""The LangChain adapter: LangChain's own standard suites, and semsearch's behaviour through the adapter."""

from __future__ import annotations

import gc
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("langchain_tests")
from langchain_core.documents import Document  # noqa: E402
from langchain_core.embeddings import DeterministicFakeEmbedding  # noqa: E402
from langchain_tests.integration_tests import EmbeddingsIntegrationTests, VectorStoreIntegrationTests  # noqa: E402
from langchain_tests.unit_tests import EmbeddingsUnitTests  # noqa: E402

from retriever import Collection  # noqa: E402
from retriever.errors import BadInputError, FilterError, ModelMismatchError  # noqa: E402
from retriever.integrations.langchain import SemsearchEmbeddings, SemsearchVectorStore, embedder_for  # noqa: E402
from retriever.remote import RemoteCollection  # noqa: E402
from tests.retriever.live_server import live_server  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
KEY = "langchain-test-key"
DOCS = [
    ("rivers", "Rivers slow down where they meet the sea and drop their sediment, building deltas.", 2019),
    ("tea", "Green tea leaves are steamed right after picking, then rolled and dried.", 2021),
    ("coffee", "Coffee beans are roasted at high temperature until they crack.", 2022),
]


def add_docs(store: SemsearchVectorStore) -> list[str]:
    return store.add_texts(
        [text for _, text, _ in DOCS], [{"year": year} for _, _, year in DOCS], ids=[doc_id for doc_id, _, _ in DOCS]
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory, tiny_model_dir):
    """``(url, collection path)`` of a server (key ``KEY``) over an empty collection of the tiny model."""
    path = tmp_path_factory.mktemp("langchain-server") / "col"
    Collection.create(path, tiny_model_dir).close()
    with live_server(path, api_key=KEY) as url:
        yield url, path


# -- LangChain's standard suites ------------------------------------------------------------------
class TestStoreWithLangChainEmbeddings(VectorStoreIntegrationTests):
    """The suite as LangChain means it: its fake embeddings (6 dimensions) embed a local collection."""

    @pytest.fixture()
    def vectorstore(self, tmp_path):
        store = SemsearchVectorStore(tmp_path / "col", self.get_embeddings())
        yield store
        store.close()


class TestStoreWithSemsearchModel(VectorStoreIntegrationTests):
    """The suite over a local collection embedded by a semsearch model (the tiny BERT)."""

    @pytest.fixture()
    def vectorstore(self, tmp_path, tiny_embedder):
        store = SemsearchVectorStore(tmp_path / "col", SemsearchEmbeddings(tiny_embedder))
        yield store
        store.close()


class TestStoreOverServer(VectorStoreIntegrationTests):
    """The suite over ``semsearch serve``; the served collection is emptied after each test."""

    @pytest.fixture()
    def vectorstore(self, server):
        url, path = server
        store = SemsearchVectorStore(RemoteCollection(url, api_key=KEY))
        try:
            yield store
        finally:
            with Collection.open(path) as col:
                store.delete(list(col.ids()))


class TinyModelParams:
    """``SemsearchEmbeddings`` of the tiny BERT's directory, for the embeddings suites."""

    @pytest.fixture(autouse=True)
    def tiny_model(self, tiny_model_dir):
        self.model_dir = tiny_model_dir

    @property
    def embeddings_class(self):
        return SemsearchEmbeddings

    @property
    def embedding_model_params(self) -> dict:
        return {"model": self.model_dir}


class TestEmbeddingsUnit(TinyModelParams, EmbeddingsUnitTests):
    """Embeddings from a model directory, loaded on first use."""


class TestEmbeddings(TinyModelParams, EmbeddingsIntegrationTests):
    """Embeddings from a model directory."""


class TestEmbeddingsFromServer(EmbeddingsIntegrationTests):
    """Embeddings from a running server's model."""

    @pytest.fixture(autouse=True)
    def served(self, server):
        self.url = server[0]

    @property
    def embeddings_class(self):
        return SemsearchEmbeddings

    @property
    def embedding_model_params(self) -> dict:
        return {"model": RemoteCollection(self.url, api_key=KEY)}


# -- semsearch's behaviour through the adapter -----------------------------------------------------
def test_filters_modes_scores_and_the_retriever(tmp_path, tiny_embedder):
    with Collection.create(tmp_path / "col", tiny_embedder) as col:
        store = SemsearchVectorStore(col)
        add_docs(store)
        assert [d.id for d in store.similarity_search("sediment deltas", k=1, mode="bm25")] == ["rivers"]
        assert [d.id for d in store.similarity_search(DOCS[1][1], k=1, mode="dense")] == ["tea"]  # its own text
        recent = store.similarity_search("picking roasting", k=3, filter={"year": {"$gte": 2021}})
        assert {d.id for d in recent} == {"tea", "coffee"} and recent[0].metadata["year"] >= 2021
        either = {"$or": [{"year": 2019}, {"year": 2022}]}
        assert {d.id for d in store.similarity_search("beans", k=3, filter=either, mode="bm25")} == {"coffee"}
        scored = store.similarity_search_with_score(DOCS[1][1], k=3)  # first in both rankings
        assert scored[0][0].id == "tea" and [s for _, s in scored] == sorted((s for _, s in scored), reverse=True)
        for mode in ("hybrid", "dense"):
            relevance = SemsearchVectorStore(col, mode=mode).similarity_search_with_relevance_scores("tea", k=3)
            assert len(relevance) == 3 and all(0.0 <= s <= 1.0 for _, s in relevance), mode
        with pytest.raises(BadInputError, match="BM25 scores have no upper bound"):
            SemsearchVectorStore(col, mode="bm25").similarity_search_with_relevance_scores("tea")
        retriever = store.as_retriever(search_kwargs={"k": 1, "mode": "bm25", "filter": {"year": 2022}})
        assert [d.id for d in retriever.invoke("roasted beans")] == ["coffee"]
        threshold = store.as_retriever(
            search_type="similarity_score_threshold", search_kwargs={"score_threshold": 0.5, "k": 3}
        )
        assert [d.id for d in threshold.invoke(DOCS[1][1])][:1] == ["tea"]
        with pytest.raises(FilterError, match="unknown operator"):
            store.similarity_search("tea", filter={"year": {"$near": 2020}})
        with pytest.raises(BadInputError, match="takes no argument.*fetch_k"):
            store.similarity_search("tea", fetch_k=3)
        with pytest.raises(BadInputError, match="k must be"):
            store.similarity_search("tea", k=0)


def test_a_collection_over_langchain_embeddings_keeps_the_collections_promises(tmp_path):
    fake = DeterministicFakeEmbedding(size=6)
    long_text = " ".join(f"Sentence {i} of a long note about glaciers and fjords." for i in range(60))
    store = SemsearchVectorStore(tmp_path / "col", fake)
    assert store.embeddings is fake
    assert store.collection.manifest.model | {"sha256": "-"} == {
        "name": "langchain:langchain_core.DeterministicFakeEmbedding",
        "sha256": "-",
        "dim": 6,
        "max_tokens": 1002,
        "pooling": "external",
        "normalize": True,
        "tokens": "utf-8 bytes",
    }
    store.add_texts([long_text, "foo"], ids=["long", "foo"])
    spans = store.collection.chunk_spans("long")  # nothing cut: overlapping windows of 1,000 bytes
    assert len(spans) == 4 and spans[-1][1] == len(long_text) and all(e - s <= 1_000 for s, e in spans)
    passage = store.similarity_search("glaciers fjords", k=1, mode="bm25")[0]
    assert passage.id == "long" and passage.page_content in long_text and len(passage.page_content) < 1_000
    assert store.get_by_ids(["long"])[0].page_content == long_text  # the whole document
    assert store.similarity_search_by_vector(fake.embed_query("foo"), k=1)[0].id == "foo"
    store.close()
    assert len(SemsearchVectorStore(tmp_path / "col", DeterministicFakeEmbedding(size=6)).collection) == 2
    with pytest.raises(ModelMismatchError, match="dim 6.*dim 8"):
        SemsearchVectorStore(tmp_path / "col", DeterministicFakeEmbedding(size=8))
    with pytest.raises(BadInputError, match="built with the LangChain model .*pass that model as embedding="):
        SemsearchVectorStore(tmp_path / "col")
    with Collection.open(tmp_path / "col", model=embedder_for(fake)) as col:
        reopened = SemsearchVectorStore(col)
        assert reopened.embeddings is fake and reopened.similarity_search("foo", k=1, mode="dense")[0].id == "foo"
        with pytest.raises(ModelMismatchError, match="the embedding given is"):
            SemsearchVectorStore(col, DeterministicFakeEmbedding(size=8))


def test_ids_and_arguments(tmp_path, tiny_embedder):
    store = SemsearchVectorStore(tmp_path / "col", SemsearchEmbeddings(tiny_embedder))
    made = store.add_texts(["one", "two"])
    assert [uuid.UUID(doc_id).version for doc_id in made] == [4, 4]
    mixed = store.add_documents([Document(page_content="three", id="3"), Document(page_content="four")], batch_size=1)
    assert mixed[0] == "3" and uuid.UUID(mixed[1]).version == 4
    assert [d.page_content for d in store.get_by_ids([mixed[1], "nope", made[0]])] == ["four", "one"]
    assert store.delete([made[0], "nope"]) is True and store.get_by_ids([made[0]]) == []
    for call, message in [
        (lambda: store.add_texts(["a", "b"], [{}]), "2 texts, 1 metadatas and 2 ids"),
        (lambda: store.add_texts(["a"], [{"when": object()}]), "object is not JSON-serialisable"),
        (lambda: store.add_texts(["a", "b"], ids=["x", "x"]), "appears twice"),
        (lambda: store.add_texts([""]), "text is empty"),
        (lambda: store.add_texts(["a"], batch_size=0), "batch_size"),
        (lambda: store.add_texts(["a"], upsert=False), "takes no argument.*upsert"),
        (lambda: store.delete(), "delete needs the ids"),
        (lambda: SemsearchVectorStore(tmp_path / "col", mode="fast"), "mode must be one of"),
        (lambda: SemsearchVectorStore(tmp_path / "col", embedding="all-MiniLM-L6-v2"), "LangChain Embeddings"),
        (lambda: SemsearchVectorStore(42), "collection must be a Collection"),
    ]:
        with pytest.raises(BadInputError, match=message):
            call()
    store.close()


def test_from_texts_in_a_temporary_or_named_directory(tmp_path, tiny_model_dir):
    store = SemsearchVectorStore.from_texts(["foo", "bar"], DeterministicFakeEmbedding(size=6), ids=["f", "b"])
    folder = store.collection.root
    assert folder.is_dir() and [d.id for d in store.similarity_search("foo", k=1)] == ["f"]
    del store
    gc.collect()
    assert not folder.exists()  # the temporary collection goes with its store
    named = SemsearchVectorStore.from_documents(
        [Document(page_content="tea is steamed", metadata={"year": 2021}, id="tea")],
        SemsearchEmbeddings(tiny_model_dir),
        collection=tmp_path / "named",
        mode="bm25",
    )
    assert named.mode == "bm25" and named.collection.manifest.model["name"] == str(tiny_model_dir.resolve())
    assert named.similarity_search("steamed", k=1)[0].metadata == {"year": 2021}
    named.close()


def test_a_store_over_a_server(server, tiny_embedder):
    url, _ = server
    remote = RemoteCollection(url, api_key=KEY)
    store = SemsearchVectorStore(remote, SemsearchEmbeddings(tiny_embedder), mode="bm25")  # the server's model
    try:
        add_docs(store)
        assert [d.id for d in store.similarity_search("sediment deltas", k=3)] == ["rivers"]
        assert [d.id for d in store.similarity_search("roasted tea", k=3, filter={"year": 2022})] == ["coffee"]
        query = store.embeddings.embed_query("green tea")
        assert np.allclose(query, tiny_embedder.embed(["green tea"])[0], atol=1e-5)
        assert store.similarity_search_by_vector(store.embeddings.embed_query(DOCS[1][1]), k=1)[0].id == "tea"
        with pytest.raises(BadInputError, match="delete needs the ids"):
            store.delete()
    finally:
        store.delete([doc_id for doc_id, _, _ in DOCS])
    with pytest.raises(ModelMismatchError, match="the embedding given is 'langchain:"):
        SemsearchVectorStore(remote, DeterministicFakeEmbedding(size=6))
    with pytest.raises(BadInputError, match="a server's embeddings cannot build a local collection"):
        SemsearchVectorStore(Path(server[1]).parent / "other", SemsearchEmbeddings(remote))


def test_hits_say_where_they_are_as_langchain_pdf_loaders_do(tmp_path, tiny_embedder):
    from retriever.locations import LocatedText

    filler = "Rivers flow into the sea and mountains rise above the clouds. " * 8  # past a chunk window
    built = LocatedText()
    for page, phrase in enumerate(["alpha zebra quartz", "bravo walrus harbour"], start=1):
        built.add(f"{filler}{phrase}.", page=page)
    report = {"id": "report", "text": built.text, "metadata": {"source": "/r.pdf", "locations": built.locations()}}
    cover = {
        "id": "cover",
        "text": built.text,
        "metadata": {"page": "cover", "locations": built.locations()},
    }  # its own "page" stays
    with Collection.create(tmp_path / "col", tiny_embedder) as col:
        col.upsert([report, cover])
        store = SemsearchVectorStore(col, mode="bm25")
        found = {doc.id: doc for doc in store.similarity_search("bravo walrus harbour", k=2)}
        shown = ("source", "location", "page", "page_label", "locations")
        assert {key: found["report"].metadata.get(key) for key in shown} == {
            "source": "/r.pdf",
            "location": {"page": 2},
            "page": 1,
            "page_label": "2",
            "locations": None,
        }
        assert {key: found["cover"].metadata.get(key) for key in shown} == {
            "source": None,
            "location": {"page": 2},
            "page": "cover",
            "page_label": "2",
            "locations": None,
        }
        (stored,) = store.get_by_ids(["report"])  # the stored document, its columns whole
        assert stored.metadata["locations"] == built.locations() and "location" not in stored.metadata
        vector = col.embed(["Rivers flow into the sea."])[0].tolist()
        (by_vector,) = SemsearchVectorStore(col).similarity_search_by_vector(vector, k=1)
        assert by_vector.metadata["location"] in ({"page": 1}, {"page": 2})  # whichever chunk is closest


def test_semsearch_embeddings_agree_across_sources(tmp_path, tiny_model_dir, tiny_embedder, server):
    texts = ["green tea", "coffee beans"]
    with Collection.create(tmp_path / "col", tiny_embedder) as col:
        sources = [tiny_embedder, str(tiny_model_dir), col, RemoteCollection(server[0], api_key=KEY)]
        vectors = [np.asarray(SemsearchEmbeddings(source).embed_documents(texts)) for source in sources]
    for other in vectors[1:]:
        assert np.allclose(vectors[0], other, atol=1e-5)
    assert SemsearchEmbeddings(tiny_embedder).embed_documents([]) == []
    with pytest.raises(BadInputError, match="model must be"):
        SemsearchEmbeddings(3.5)
    with pytest.raises(BadInputError, match="on_overflow"):
        SemsearchEmbeddings(tiny_embedder, on_overflow="cut")


def test_without_langchain_the_import_names_the_extra():
    code = "import sys; sys.modules['langchain_core'] = None; import retriever.integrations.langchain"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode != 0 and last.startswith("ImportError") and "pip install 'semsearch[langchain]'" in last


def test_marginal_relevance_gives_a_near_duplicate_way(tmp_path, minilm):
    from retriever import Collection
    from retriever.integrations.langchain import SemsearchVectorStore

    with Collection.create(tmp_path / "mmr", minilm) as col:
        store = SemsearchVectorStore(col, mode="dense")
        store.add_texts(
            [
                "Tea is steamed after picking.",
                "Tea is steamed right after it is picked.",
                "Rivers build deltas of sediment.",
            ],
            ids=["a", "a2", "b"],
        )
        assert [d.id for d in store.similarity_search("tea steamed after picking", k=2)] == ["a", "a2"]
        diverse = store.max_marginal_relevance_search("tea steamed after picking", k=2, fetch_k=3, lambda_mult=0.3)
        assert [d.id for d in diverse] == ["a", "b"]
        assert store.max_marginal_relevance_search("tea", k=2, filter={"nothing": 1}) == []
