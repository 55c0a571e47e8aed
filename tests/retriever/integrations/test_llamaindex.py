"""The LlamaIndex adapter against the real llama-index-core: nodes, filters, deletes, modes, an index end to end."""

from __future__ import annotations

import socket
import sys

import numpy as np
import pytest

pytest.importorskip("llama_index.core")

from llama_index.core import Document as LlamaDocument  # noqa: E402
from llama_index.core import StorageContext, VectorStoreIndex  # noqa: E402
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode  # noqa: E402
from llama_index.core.vector_stores.types import (  # noqa: E402
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)
from llama_index.core.vector_stores.utils import build_metadata_filter_fn  # noqa: E402

from retriever import Collection, Embedder, InputTooLongWarning  # noqa: E402
from retriever.errors import BadInputError, FilterError  # noqa: E402
from retriever.integrations.llamaindex import REF_DOC_ID, SemsearchEmbedding, SemsearchVectorStore, where_from_filters  # noqa: E402

F, Op, Cond = MetadataFilter, FilterOperator, FilterCondition
TEXTS = [
    "green tea is steamed after picking",
    "coffee beans are roasted at high temperature",
    "rivers flow into the sea",
    "mountains rise above the clouds",
    "python is a programming language",
    "databases store rows in tables",
]
METADATA = [  # "year" is missing from the last node; "score" mixes ints and floats
    {"year": 2019, "lang": "en", "score": 0.5},
    {"year": 2020, "lang": "de", "score": 1},
    {"year": 2021, "lang": "en", "score": 2.5},
    {"year": 2022, "lang": "fr", "score": 3},
    {"year": 2023, "lang": "en", "score": 4.5},
    {"lang": "de", "score": 5},
]


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Nothing on these paths may reach for the network (tokenizer files, NLTK data, model hubs)."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


@pytest.fixture
def collection(tiny_embedder, tmp_path):
    with Collection.create(tmp_path / "col", tiny_embedder) as col:
        yield col


@pytest.fixture
def store(collection):
    return SemsearchVectorStore(collection)


@pytest.fixture
def embed_model(collection):
    return SemsearchEmbedding(collection)


def make_nodes() -> list[TextNode]:
    """Six nodes: even ones from source document "doc0", odd ones from "doc1"."""
    return [
        TextNode(
            id_=f"n{i}",
            text=text,
            metadata=dict(meta),
            relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=f"doc{i % 2}")},
        )
        for i, (text, meta) in enumerate(zip(TEXTS, METADATA))
    ]


def search_ids(store, filters=None, **query) -> set[str]:
    query = {"query_str": "tea", "similarity_top_k": len(TEXTS), **query}
    return set(store.query(VectorStoreQuery(filters=filters, **query)).ids)


# -- import and embedding model ------------------------------------------------------
def test_missing_llamaindex_names_the_extra(monkeypatch):
    for name in [name for name in sys.modules if name.split(".")[0] == "llama_index"]:
        monkeypatch.setitem(sys.modules, name, None)  # as if llama-index-core were not installed
    monkeypatch.delitem(sys.modules, "retriever.integrations.llamaindex", raising=False)
    with pytest.raises(ImportError) as raised:
        import retriever.integrations.llamaindex  # noqa: F401
    assert "pip install 'semsearch[llamaindex]'" in str(raised.value)
    assert "\n" not in str(raised.value)


def test_embedding_is_the_model_of_a_collection_an_embedder_or_a_directory(collection, tiny_embedder, tiny_model_dir):
    expected = collection.embed(["green tea", "rivers flow"])
    for source in (collection, tiny_embedder, tiny_model_dir):
        model = SemsearchEmbedding(source)
        assert model.model_name == str(tiny_embedder.name)
        np.testing.assert_allclose(model.get_query_embedding("green tea"), expected[0], atol=1e-6)
        np.testing.assert_allclose(model.get_text_embedding_batch(["green tea", "rivers flow"]), expected, atol=1e-6)


async def test_async_embeddings_equal_the_sync_ones(embed_model):
    query = await embed_model.aget_query_embedding("green tea")
    texts = await embed_model.aget_text_embedding_batch(["green tea", "rivers flow"])
    assert np.allclose(query, embed_model.get_query_embedding("green tea"), atol=1e-6)
    assert np.allclose(texts, embed_model.get_text_embedding_batch(["green tea", "rivers flow"]), atol=1e-6)
    assert abs(np.linalg.norm(query) - 1.0) < 1e-5


# -- nodes in and out ------------------------------------------------------------------
def test_nodes_come_back_with_text_metadata_and_relationships(store, collection):
    node = TextNode(
        id_="n0",
        text="green tea is steamed after picking",
        metadata={"lang": "en", "year": 2019, "tags": {"kind": "drink"}},
        excluded_embed_metadata_keys=["year"],
        start_char_idx=10,
        end_char_idx=44,
        relationships={
            NodeRelationship.SOURCE: RelatedNodeInfo(node_id="tea-doc"),
            NodeRelationship.NEXT: RelatedNodeInfo(node_id="n1"),
        },
    )
    assert store.add([node]) == ["n0"]

    result = store.query(VectorStoreQuery(query_str="how is tea made", similarity_top_k=3))
    assert result.ids == ["n0"] and len(result.similarities) == 1 and -1.0 <= result.similarities[0] <= 1.0
    back = result.nodes[0]
    assert isinstance(back, TextNode) and back.node_id == "n0"
    assert back.text == node.text and back.metadata == node.metadata
    assert back.ref_doc_id == "tea-doc" and back.next_node.node_id == "n1"
    assert (back.start_char_idx, back.end_char_idx, back.excluded_embed_metadata_keys) == (10, 44, ["year"])
    assert back.hash == node.hash
    assert store.get_nodes(["n0", "missing"])[0].metadata == node.metadata

    stored = collection.get("n0")  # a semsearch document like any other: filterable by its source document
    assert stored.text == node.text and stored.metadata[REF_DOC_ID] == "tea-doc"
    assert [hit.id for hit in collection.search("tea", where={"lang": "en", REF_DOC_ID: "tea-doc"})] == ["n0"]


def test_documents_semsearch_wrote_come_back_as_passages(store, collection):
    long_text = " ".join(["rivers flow into the sea and mountains rise above the clouds."] * 12)
    collection.add([{"id": "native", "title": "Water", "text": long_text, "metadata": {"lang": "en"}}])
    node = store.query(VectorStoreQuery(query_str="rivers", similarity_top_k=1)).nodes[0]
    assert node.node_id == "native" and node.metadata == {"lang": "en", "title": "Water"}
    assert node.text == long_text[node.start_char_idx : node.end_char_idx] and len(node.text) < len(long_text)


def test_found_nodes_say_where_they_are(store, collection):
    from retriever.locations import LocatedText

    filler = "Rivers flow into the sea and mountains rise above the clouds. " * 8  # past a chunk window
    built = LocatedText()
    for page, phrase in enumerate(["alpha zebra quartz", "bravo walrus harbour"], start=1):
        built.add(f"{filler}{phrase}.", page=page)
    collection.add([{"id": "report", "text": built.text, "metadata": {"locations": built.locations()}}])
    own = {"location": "shelf 3", "locations": {"start": [0], "section": [["Deltas"]]}}
    store.add([TextNode(id_="n0", text=f"{filler} bravo walrus harbour.", metadata=own)])
    query = VectorStoreQuery(query_str="bravo walrus harbour", similarity_top_k=2, mode=VectorStoreQueryMode.SPARSE)
    found = {n.node_id: n for n in store.query(query).nodes}
    assert found["report"].metadata["location"] == {"page": 2} and found["report"].metadata["page_label"] == "2"
    assert "locations" not in found["report"].metadata
    assert found["n0"].metadata["location"] == "shelf 3" and "page_label" not in found["n0"].metadata  # its own
    assert store.get_nodes(["report"])[0].metadata["locations"] == built.locations()


def test_store_over_a_directory_creates_then_opens_the_collection(tiny_model_dir, tmp_path, collection):
    SemsearchVectorStore(tmp_path / "by-path", model=tiny_model_dir).add(make_nodes())
    reopened = SemsearchVectorStore(tmp_path / "by-path", model=tiny_model_dir)
    assert len(reopened.collection) == len(TEXTS) and search_ids(reopened, doc_ids=["doc0"]) == {"n0", "n2", "n4"}
    with pytest.raises(BadInputError, match="model="):
        SemsearchVectorStore(collection, model=tiny_model_dir)


def test_reserved_metadata_fields_are_refused(store, collection):
    with pytest.raises(BadInputError, match="ref_doc_id"):
        store.add([TextNode(id_="x", text="green tea", metadata={"ref_doc_id": "mine"})])
    assert len(collection) == 0


# -- which embedding is stored -----------------------------------------------------------
def test_embeddings_of_the_collection_model_are_stored_as_given(store, collection, embed_model):
    nodes = make_nodes()[:2]
    vectors = embed_model.get_text_embedding_batch(["rivers flow into the sea", "python is a language"])
    for node, vector in zip(nodes, vectors):  # deliberately another text's vector: the store must keep it
        node.embedding = vector
    store.add(nodes)
    for node, vector in zip(nodes, vectors):
        [hit] = collection.search(vector=vector, k=1, mode="dense")
        assert hit.id == node.node_id and hit.score > 1 - 1e-5


def test_other_embeddings_are_replaced_by_the_collections_own(store, collection, embed_model):
    nodes = make_nodes()[:2]
    known = embed_model.get_text_embedding("rivers flow into the sea")
    foreign = np.random.default_rng(0).standard_normal(len(known))
    nodes[0].embedding, nodes[1].embedding = known, (foreign / np.linalg.norm(foreign)).tolist()
    store.add(nodes)  # one vector not known to be the model's: the collection embeds both texts
    for node in nodes:
        [hit] = collection.search(vector=collection.embed([node.text])[0], k=1, mode="dense")
        assert hit.id == node.node_id and hit.score > 1 - 1e-5
    assert collection.search(vector=known, k=1, mode="dense")[0].score < 0.999


def test_embedding_of_another_dimension_is_refused(store, collection):
    node = make_nodes()[0]
    node.embedding = [0.1] * 1536
    with pytest.raises(BadInputError, match=r"1536 dimensions.*makes 32.*SemsearchEmbedding"):
        store.add([node])
    assert len(collection) == 0
    with pytest.raises(BadInputError, match="1536 dimensions"):
        store.query(VectorStoreQuery(query_str="tea", query_embedding=[0.1] * 1536))


def test_long_node_is_chunked_not_cut_and_comes_back_whole(store, collection, embed_model):
    text = " ".join(TEXTS * 8)  # beyond the tiny model's 64-token window
    node = TextNode(id_="long", text=text)
    with pytest.warns(InputTooLongWarning):
        node.embedding = embed_model.get_text_embedding(text)  # the window's vector only: not used
    store.add([node])
    assert len(collection.chunk_spans("long")) > 1
    back = store.query(VectorStoreQuery(query_str="databases store rows", similarity_top_k=1)).nodes[0]
    assert back.node_id == "long" and back.text == text


# -- filters -----------------------------------------------------------------------------
FILTERS = {
    "eq": MetadataFilters(filters=[F(key="lang", value="en")]),
    "ne": MetadataFilters(filters=[F(key="lang", value="en", operator=Op.NE)]),
    "gt": MetadataFilters(filters=[F(key="year", value=2020, operator=Op.GT)]),
    "gte": MetadataFilters(filters=[F(key="year", value=2020, operator=Op.GTE)]),
    "lt": MetadataFilters(filters=[F(key="score", value=2.5, operator=Op.LT)]),
    "lte": MetadataFilters(filters=[F(key="score", value=2.5, operator=Op.LTE)]),
    "in": MetadataFilters(filters=[F(key="lang", value=["de", "fr"], operator=Op.IN)]),
    "nin": MetadataFilters(filters=[F(key="year", value=[2019, 2023], operator=Op.NIN)]),
    "and": MetadataFilters(filters=[F(key="lang", value="en"), F(key="year", value=2020, operator=Op.GT)]),
    "or": MetadataFilters(
        filters=[F(key="lang", value="fr"), F(key="score", value=1, operator=Op.LTE)], condition=Cond.OR
    ),
    "not": MetadataFilters(
        filters=[F(key="lang", value="en"), F(key="year", value=2020, operator=Op.EQ)], condition=Cond.NOT
    ),
    "nested": MetadataFilters(
        filters=[
            MetadataFilters(filters=[F(key="lang", value="en"), F(key="lang", value="de")], condition=Cond.OR),
            MetadataFilters(filters=[F(key="year", value=2021, operator=Op.GTE)], condition=Cond.NOT),
        ],
        condition=Cond.AND,
    ),
}


def reference_match(filters: MetadataFilters, metadata: dict) -> bool:
    """LlamaIndex's own in-memory filtering, leaf by leaf; conditions combine as it documents them."""
    matches = [
        reference_match(item, metadata)
        if isinstance(item, MetadataFilters)
        else build_metadata_filter_fn(lambda _: metadata, MetadataFilters(filters=[item]))("node")
        for item in filters.filters
    ]
    condition = filters.condition or Cond.AND
    return all(matches) if condition == Cond.AND else any(matches) if condition == Cond.OR else not any(matches)


@pytest.mark.parametrize("name", FILTERS)
def test_every_filter_selects_what_llamaindex_would(store, name):
    store.add(make_nodes())
    expected = {f"n{i}" for i, meta in enumerate(METADATA) if reference_match(FILTERS[name], meta)}
    assert 0 < len(expected) < len(TEXTS)  # each case narrows the search, and keeps something
    assert search_ids(store, FILTERS[name]) == expected


def test_filters_translate_to_where():
    assert where_from_filters(FILTERS["nested"]) == {
        "$and": [{"$or": [{"lang": {"$eq": "en"}}, {"lang": {"$eq": "de"}}]}, {"$not": {"year": {"$gte": 2021}}}]
    }
    assert where_from_filters(FILTERS["not"]) == {"$not": {"$or": [{"lang": {"$eq": "en"}}, {"year": {"$eq": 2020}}]}}
    assert where_from_filters(MetadataFilters(filters=[])) == {}


@pytest.mark.parametrize(
    "item, message",
    [
        (F(key="tags", value=["a"], operator=Op.ANY), "ANY has no semsearch equivalent"),
        (F(key="tags", value=["a"], operator=Op.ALL), "ALL has no semsearch equivalent"),
        (F(key="tags", value="a", operator=Op.CONTAINS), "CONTAINS has no semsearch equivalent"),
        (F(key="lang", value="e", operator=Op.TEXT_MATCH), "TEXT_MATCH has no semsearch equivalent"),
        (F(key="lang", value="E", operator=Op.TEXT_MATCH_INSENSITIVE), "TEXT_MATCH_INSENSITIVE has no"),
        (F(key="lang", value=None, operator=Op.IS_EMPTY), "IS_EMPTY has no semsearch equivalent"),
        (F(key="lang", value="en", operator=Op.IN), "IN takes a list"),
        (F(key="lang", value=["en"], operator=Op.EQ), "EQ compares with one string or number"),
        (F(key="lang", value=None), "EQ compares with one string or number"),
    ],
)
def test_unmappable_filters_are_refused(store, item, message):
    store.add(make_nodes())
    nested = MetadataFilters(filters=[F(key="lang", value="en"), MetadataFilters(filters=[item])])
    with pytest.raises(FilterError, match=f"filter on '{item.key}': {message}"):
        store.query(VectorStoreQuery(query_str="tea", filters=nested))


def test_doc_ids_restrict_to_source_documents(store):
    store.add(make_nodes())
    assert search_ids(store, doc_ids=["doc1"]) == {"n1", "n3", "n5"}
    assert search_ids(store, FILTERS["eq"], doc_ids=["doc1"]) == set()
    assert search_ids(store, FILTERS["gt"], doc_ids=["doc1"]) == {"n3"}


# -- deletes -------------------------------------------------------------------------------
def test_delete_removes_every_node_of_a_source_document(store, collection):
    store.add(make_nodes())
    store.delete("doc0")
    assert sorted(collection.ids()) == ["n1", "n3", "n5"]
    assert search_ids(store) == {"n1", "n3", "n5"}
    store.delete("no-such-document")
    assert len(collection) == 3


def test_delete_nodes_by_id_by_filter_or_both(store, collection):
    store.add(make_nodes())
    store.delete_nodes(["n0", "missing"])
    store.delete_nodes(filters=FILTERS["in"])  # lang de or fr: n1, n3, n5
    assert sorted(collection.ids()) == ["n2", "n4"]
    store.delete_nodes(["n2", "n4"], filters=MetadataFilters(filters=[F(key="year", value=2023)]))
    assert sorted(collection.ids()) == ["n2"]
    assert [node.node_id for node in store.get_nodes(filters=FILTERS["eq"])] == ["n2"]
    with pytest.raises(BadInputError, match="node_ids or filters"):
        store.delete_nodes()
    store.clear()
    assert len(collection) == 0


# -- query modes -----------------------------------------------------------------------------
def test_bm25_modes_rank_by_keywords(store):
    store.add(make_nodes())
    for mode in (VectorStoreQueryMode.SPARSE, VectorStoreQueryMode.TEXT_SEARCH):
        result = store.query(VectorStoreQuery(query_str="roasted coffee", mode=mode, similarity_top_k=5))
        assert result.ids == ["n1"] and result.similarities[0] > 1.0  # a BM25 score, only the matching node
    dense = store.query(VectorStoreQuery(query_str="roasted coffee", similarity_top_k=5))
    assert len(dense.ids) == 5 and all(-1.0 <= s <= 1.0 for s in dense.similarities)


def test_hybrid_mode_fuses_with_alpha_weighing_the_dense_side(store, embed_model):
    store.add(make_nodes())
    rivers = embed_model.get_query_embedding(TEXTS[2])  # the dense side's best is n2; only n1 says "coffee"
    query = {"query_str": "coffee", "query_embedding": rivers, "mode": VectorStoreQueryMode.HYBRID}
    dense = store.query(VectorStoreQuery(query_embedding=rivers, similarity_top_k=4))
    keywords_only = store.query(VectorStoreQuery(alpha=0.0, similarity_top_k=4, **query))
    meaning_only = store.query(VectorStoreQuery(alpha=1.0, similarity_top_k=4, **query))
    assert dense.ids[0] == "n2" and keywords_only.ids[0] == "n1" and len(keywords_only.ids) == 4
    assert meaning_only.ids[0] == "n2" and meaning_only.similarities != dense.similarities  # fused scores
    # (alpha 1 ranks by the dense side of the query moved by feedback toward the first fusion's top documents)
    assert len(store.query(VectorStoreQuery(hybrid_top_k=2, similarity_top_k=4, **query)).ids) == 2


def test_query_embedding_alone_or_replaced_when_not_the_models(store, collection, embed_model):
    store.add(make_nodes())
    by_text = store.query(VectorStoreQuery(query_str="rivers", similarity_top_k=3))
    vector = embed_model.get_query_embedding("rivers")
    assert store.query(VectorStoreQuery(query_embedding=vector, similarity_top_k=3)).ids == by_text.ids
    foreign = np.random.default_rng(1).standard_normal(len(vector)).tolist()
    with_text = store.query(VectorStoreQuery(query_str="rivers", query_embedding=foreign, similarity_top_k=3))
    assert with_text.ids == by_text.ids and with_text.similarities == pytest.approx(by_text.similarities)
    alone = store.query(VectorStoreQuery(query_embedding=foreign, similarity_top_k=3))
    assert alone.similarities != pytest.approx(by_text.similarities)  # used as given


@pytest.mark.parametrize(
    "query, message",
    [
        (VectorStoreQuery(query_str="tea", mode=VectorStoreQueryMode.MMR), "MMR is not supported"),
        (VectorStoreQuery(query_str="tea", mode=VectorStoreQueryMode.SVM), "SVM is not supported"),
        (VectorStoreQuery(query_embedding=[0.1] * 32, mode=VectorStoreQueryMode.SPARSE), "SPARSE needs query_str"),
        (VectorStoreQuery(query_embedding=[0.1] * 32, mode=VectorStoreQueryMode.HYBRID), "HYBRID needs query_str"),
        (VectorStoreQuery(), "needs query_str or query_embedding"),
        (VectorStoreQuery(query_str="tea", node_ids=["n0"]), "node_ids cannot restrict"),
    ],
)
def test_queries_semsearch_cannot_answer_are_refused(store, query, message):
    store.add(make_nodes())
    with pytest.raises(BadInputError, match=message):
        store.query(query)


# -- through a LlamaIndex index, with the packaged MiniLM ------------------------------------------
CORPUS = {
    "tea": "Green tea leaves are steamed or pan-fired soon after picking, which stops oxidation.",
    "coffee": "Coffee beans are roasted at high temperature until they turn brown and release oils.",
    "volcano": "A volcano erupts when molten rock, called magma, rises through the crust.",
    "python": "Python is a programming language known for its readable syntax and large library.",
    "football": "A football match has two halves of forty-five minutes and eleven players per side.",
}


@pytest.fixture(scope="module")
def minilm_torch():
    """The packaged all-MiniLM-L6-v2 on torch: the collection's default model, without the backend trials."""
    return Embedder(backend="torch-fp32")


async def test_index_inserts_documents_and_retrieves_the_right_one(minilm_torch, tmp_path):
    with Collection.create(tmp_path / "col", minilm_torch) as collection:
        store = SemsearchVectorStore(collection)
        documents = [
            LlamaDocument(text=text, id_=name, metadata={"topic": "drink" if name in ("tea", "coffee") else "other"})
            for name, text in CORPUS.items()
        ]
        storage = StorageContext.from_defaults(vector_store=store)
        VectorStoreIndex.from_documents(documents, storage_context=storage, embed_model=SemsearchEmbedding(collection))
        assert len(collection) == len(CORPUS)

        index = VectorStoreIndex.from_vector_store(store, embed_model=SemsearchEmbedding(collection))
        [best, *_] = index.as_retriever(similarity_top_k=2).retrieve("How are tea leaves processed after harvest?")
        assert best.node.ref_doc_id == "tea" and best.node.text == CORPUS["tea"] and best.score > 0.4

        drinks = MetadataFilters(filters=[F(key="topic", value="drink")])
        found = await index.as_retriever(similarity_top_k=5, filters=drinks).aretrieve("molten rock")
        assert {hit.node.ref_doc_id for hit in found} == {"tea", "coffee"}

        keyword = index.as_retriever(similarity_top_k=1, vector_store_query_mode="text_search").retrieve("magma")
        assert [hit.node.ref_doc_id for hit in keyword] == ["volcano"]

        index.delete_ref_doc("tea")
        assert "tea" not in {n.node.ref_doc_id for n in index.as_retriever(similarity_top_k=5).retrieve("tea")}
