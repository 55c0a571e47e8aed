"""The evidence of hits: sentences scored by the query's terms or by the model."""

from __future__ import annotations

import pytest

from retriever.errors import BadInputError
from retriever.search.bm25 import Analyzer
from retriever.search.evidence import AUTO_MODEL_SENTENCES, EvidenceFinder, Passage

ANALYZER = Analyzer()


class CountingEmbed:
    """The real embedder's ``embed``, recording how many sentences each call encodes."""

    def __init__(self, embedder):
        self.embedder, self.calls = embedder, []

    def __call__(self, texts):
        self.calls.append(len(texts))
        return self.embedder.embed(texts)


def finder(embed, idf=None) -> EvidenceFinder:
    return EvidenceFinder(ANALYZER, idf or (lambda terms: {t: 1.0 for t in terms}), embed)


def test_terms_pick_the_sentence_with_the_rarer_term_and_report_every_word(minilm):
    text = "Coffee is popular everywhere. Arabica coffee grows in the highlands. Tea is different."
    idf = {"coffe": 0.2, "arabica": 3.0, "highland": 2.0}
    embed = CountingEmbed(minilm)
    found = finder(embed, lambda terms: {t: idf.get(t, 1.0) for t in terms}).find(
        [Passage(text, 100)], "arabica coffee highlands", lambda: None, "terms"
    )[0]
    best = found[0]
    assert best.text == "Arabica coffee grows in the highlands." and best.method == "terms"
    assert best.start == 100 + text.index("Arabica") and best.end == best.start + len(best.text)
    assert [(t.term, t.start - 100) for t in best.terms] == [
        ("Arabica", text.index("Arabica")),
        ("coffee", text.index("coffee grows")),
        ("highlands", text.index("highlands")),
    ]
    # the first sentence holds only the common term: far below half the best score, so it is not kept
    assert len(found) == 1 and embed.calls == []


def test_a_second_sentence_is_kept_when_it_scores_at_least_half_the_best():
    text = "Rivers carve valleys. Glaciers carve valleys too. Nothing here."
    found = finder(None).find([Passage(text, 0)], "carve valleys", lambda: None, "terms")[0]
    assert [e.text for e in found] == ["Rivers carve valleys.", "Glaciers carve valleys too."]
    assert found[0].score >= found[1].score > 0


def test_auto_turns_to_the_model_only_where_no_query_term_occurs(minilm):
    passages = [
        Passage("The cat slept on the mat. Interest rates rose sharply after the central bank met.", 0),
        Passage("Monetary policy is set by committees. Bread is baked daily.", 0),
    ]
    query = "monetary tightening"
    embed = CountingEmbed(minilm)
    vector = minilm.embed([query])
    found = finder(embed).find(passages, query, lambda: vector, "auto")
    assert found[0][0].method == "semantic"
    assert found[0][0].text == "Interest rates rose sharply after the central bank met."
    assert found[0][0].terms == () and -1 <= found[0][0].score <= 1
    assert found[1][0].method == "terms" and found[1][0].text == "Monetary policy is set by committees."
    assert embed.calls == [2]  # only the first passage's two sentences were encoded
    assert finder(embed).find(passages, query, lambda: vector, "terms")[0] == ()


def test_semantic_scores_every_passage_and_auto_keeps_to_its_budget(minilm):
    many = " ".join(f"Sentence number {i} talks about gardening." for i in range(10))
    passages = [Passage(many, 0) for _ in range(4)]  # 40 sentences, none holding the query's term
    vector = minilm.embed(["astronomy"])
    embed = CountingEmbed(minilm)
    found = finder(embed).find(passages, "astronomy", lambda: vector, "auto")
    assert sum(embed.calls) == 20 <= AUTO_MODEL_SENTENCES < 30
    assert [bool(e) for e in found] == [True, True, False, False]  # best hits first, the rest go without
    embed.calls.clear()
    found = finder(embed).find(passages, "astronomy", lambda: vector, "semantic")
    assert sum(embed.calls) == 40 and all(e and e[0].method == "semantic" for e in found)
    assert finder(embed).find(passages, "astronomy", lambda: vector, "none") == [(), (), (), ()]


def test_collection_hits_carry_evidence_in_document_offsets(tmp_path, tiny_embedder):
    from retriever import Collection

    filler = " ".join(f"Plain filler sentence {i} about nothing." for i in range(60))
    text = filler + " The zeppelin landed in Lakehurst. " + filler
    with Collection.create(tmp_path / "col", tiny_embedder) as col:
        col.add([{"id": "long", "text": text}, {"id": "short", "text": "Zeppelin rides are rare."}])
        assert len(col.chunk_spans("long")) > 2
        hits = {hit.id: hit for hit in col.search("zeppelin Lakehurst", mode="bm25")}
        sentence = hits["long"].evidence[0]
        assert sentence.text == "The zeppelin landed in Lakehurst." and sentence.start > 0
        assert text[sentence.start : sentence.end] == sentence.text
        assert [text[t.start : t.end] for t in sentence.terms] == ["zeppelin", "Lakehurst"]
        assert all(hit.evidence == () for hit in col.search("zeppelin", mode="bm25", evidence="none"))
        vector = tiny_embedder.embed(["zeppelin"])[0]
        by_vector = col.search(vector=vector, k=2, evidence="semantic")
        assert all(hit.evidence and hit.evidence[0].method == "semantic" for hit in by_vector)
        # auto never compares sentences with a bare vector: it may come from another model
        assert all(hit.evidence == () for hit in col.search(vector=vector, k=2))
        with pytest.raises(BadInputError, match="evidence must be one of auto, terms, semantic, none"):
            col.search("zeppelin", evidence="all")


def test_a_sentence_the_chunk_cuts_comes_back_whole_and_others_outside_the_chunk_do_not():
    document = "Far before. Lead in. The quick fox jumps over the dog. Far after."
    start = document.index("quick")  # the chunk begins mid-sentence
    end = document.index("Far after")
    passage = Passage.around(document, 0, start, end)
    found = finder(None).find([passage], "fox dog far", lambda: None, "terms")[0]
    assert [e.text for e in found] == ["The quick fox jumps over the dog."]
    assert found[0].start == document.index("The quick")


def test_no_terms_and_no_vector_means_no_evidence():
    passages = [Passage("Some sentence. Another one.", 0)]
    assert finder(None).find(passages, "zzz", lambda: None, "auto") == [()]
