"""Keyword search in each document's language: detection, per-language analysis, the query's language,
highlighting, and collections made before languages were told apart."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request

import numpy as np
import pytest

from retriever.collection import Collection
from retriever.collection_info import dense_language_note, english_only_note
from retriever.documents import Document
from retriever.errors import BadInputError
from retriever.search.bm25 import Analyzer
from retriever.search.language_detection import detect_language
from retriever.search.languages import LANGUAGES, SNOWBALL, STOP_LISTS, check_language, language_analyzer, stop_words
from retriever.search.multilingual import MultilingualAnalyzer, view_languages
from retriever.storage.manifest import MANIFEST

GERMAN = {
    "de-houses": "Die alten Häuser am Marktplatz wurden im neunzehnten Jahrhundert gebaut. Viele Familien wohnen "
    "seit Generationen in diesen Gebäuden. Im Sommer kommen zahlreiche Touristen in die kleine Stadt.",
    "de-train": "Der Zug nach Berlin fährt jeden Morgen um sieben Uhr ab. Die Fahrt dauert ungefähr drei Stunden. "
    "Im Speisewagen gibt es Kaffee und frische Brötchen für die Reisenden.",
}
FRENCH = {
    "fr-horses": "Les chevaux galopent dans la prairie au lever du soleil. Le fermier les nourrit chaque matin avec "
    "du foin et de l'avoine. Pendant l'hiver, ils restent à l'abri dans l'écurie.",
    "fr-library": "La bibliothèque municipale ouvre ses portes à neuf heures. Les étudiants y travaillent souvent "
    "jusqu'au soir. On peut emprunter des livres pendant trois semaines.",
}
ENGLISH = {
    "en-river": "The river flows slowly through the valley toward the sea. Fishermen cast their nets at dawn. "
    "In spring the water rises and floods the meadows along its banks.",
    "en-house": "The old house on the hill was built in the nineteenth century. Several families have lived "
    "there for generations. Tourists visit the gardens every summer.",
    "en-coffee": "Coffee beans are roasted at a high temperature before they are ground. The roasting brings "
    "out oils and aromas. Dark roasts taste more bitter than light ones.",
}
ENGLISH_QUERIES = ["river valley", "families lived in the house", "roasted coffee beans", "summer tourists", "the"]


def documents(texts: dict[str, str]) -> list[dict]:
    return [{"id": doc_id, "text": text} for doc_id, text in texts.items()]


@pytest.fixture(scope="module")
def mixed(tiny_embedder, tmp_path_factory):
    """A new collection holding German, French and English documents, their languages detected."""
    collection = Collection.create(tmp_path_factory.mktemp("mixed") / "c", tiny_embedder)
    collection.upsert(documents(GERMAN) + documents(FRENCH) + documents(ENGLISH))
    yield collection
    collection.close()


def english_only_the_old_way(path, embedder) -> Collection:
    """A collection whose manifest is shaped as before languages were told apart (no ``bm25.languages``)."""
    Collection.create(path, embedder).close()
    manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    del manifest["bm25"]["languages"]
    (path / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
    return Collection.open(path, embedder)


def ids(hits) -> list[str]:
    return [hit.id for hit in hits]


def test_each_document_gets_its_detected_language_in_its_metadata(mixed):
    for texts, code in ((GERMAN, "de"), (FRENCH, "fr")):
        for doc_id in texts:
            assert mixed.get(doc_id).metadata["lang"] == code
    for doc_id in ENGLISH:  # the default language is not written: the caller's metadata come back as given
        assert mixed.get(doc_id).metadata == {}
    assert sorted(mixed.ids(where={"lang": "fr"})) == sorted(FRENCH)
    assert set(ids(mixed.search("morning", k=10, where={"lang": "de"}, mode="dense"))) == set(GERMAN)
    assert mixed.info()["languages"]["documents"] == {"de": 2, "en": 3, "fr": 2}


@pytest.mark.parametrize(
    "query, lang, wanted",
    [
        ("Haus", None, "de-houses"),
        ("Haus", "de", "de-houses"),
        ("cheval", None, "fr-horses"),
        ("cheval", "fr", "fr-horses"),
    ],
)
def test_bm25_matches_a_word_in_its_own_language_with_and_without_the_query_language(mixed, query, lang, wanted):
    hits = mixed.search(query, mode="bm25", lang=lang)
    assert ids(hits)[:1] == [wanted]


def test_a_query_language_matches_documents_in_that_language_only(mixed):
    assert ids(mixed.search("Berlin", mode="bm25", lang="de")) == ["de-train"]
    assert mixed.search("Berlin", mode="bm25", lang="en") == []
    assert set(ids(mixed.search("tourists Touristen", mode="bm25"))) == {"de-houses", "en-house"}


def test_a_hit_is_highlighted_in_its_own_language(mixed):
    hit = mixed.search("Haus", mode="bm25", k=1)[0]
    words = [term.term for evidence in hit.evidence for term in evidence.terms]
    assert words == ["Häuser"]
    text = mixed.get(hit.id).text
    term = hit.evidence[0].terms[0]
    assert text[term.start : term.end] == "Häuser"
    horses = mixed.search("cheval", mode="bm25", k=1)[0]
    assert horses.id == "fr-horses"
    assert [term.term for evidence in horses.evidence for term in evidence.terms] == ["chevaux"]
    french = mixed.search("chevaux écurie", mode="hybrid", k=10, lang="fr")
    shown = {
        term.term for hit in french if hit.id == "fr-horses" for evidence in hit.evidence for term in evidence.terms
    }
    assert shown and shown <= {"chevaux", "écurie"}  # whichever chunk shows, its French words are marked


def test_stop_words_are_the_documents_language(mixed):
    assert mixed.search("die", mode="bm25", lang="de") == []  # a German stop word
    assert mixed.search("les", mode="bm25", lang="fr") == []


def test_english_scores_equal_an_english_only_collection_analysed_the_old_way(tiny_embedder, tmp_path):
    new = Collection.create(tmp_path / "new", tiny_embedder)
    old = english_only_the_old_way(tmp_path / "old", tiny_embedder)
    for collection in (new, old):
        collection.upsert(documents(ENGLISH))
    assert "languages" in new.manifest.bm25 and "languages" not in old.manifest.bm25
    for query in ENGLISH_QUERIES:
        for mode in ("bm25", "hybrid"):
            found_new, found_old = new.search(query, mode=mode), old.search(query, mode=mode)
            assert [(h.id, h.score) for h in found_new] == [(h.id, h.score) for h in found_old]
            assert [h.evidence for h in found_new] == [h.evidence for h in found_old]
    assert ids(new.search("river", mode="bm25")) == ["en-river"]
    new.close()
    old.close()


def test_a_collection_with_an_old_manifest_stays_english_only(tiny_embedder, tmp_path):
    old = english_only_the_old_way(tmp_path / "old", tiny_embedder)
    old.upsert(documents(GERMAN) + [{"id": "mine", "text": ENGLISH["en-river"], "metadata": {"lang": "english"}}])
    assert "lang" not in old.get("de-houses").metadata  # no detection, and any lang of the caller's is kept
    assert old.get("mine").metadata["lang"] == "english"
    assert old.search("Haus", mode="bm25") == []  # Porter stems: "häuser" is no "haus"
    assert ids(old.search("Häuser", mode="bm25")) == ["de-houses"]
    assert old.info()["languages"] == {"default": "en", "detect": False, "documents": {"en": 3}}
    assert old.upsert(documents(GERMAN)).unchanged == sorted(GERMAN)
    report = old.check()
    assert report.segments == 1 and not report.damaged and not report.unreadable
    old.close()
    reopened = Collection.open(tmp_path / "old", tiny_embedder)
    assert "languages" not in reopened.manifest.bm25
    reopened.close()


def test_writing_an_unchanged_document_again_is_no_work(mixed):
    again = mixed.upsert(documents(GERMAN) + documents(FRENCH) + documents(ENGLISH))
    assert sorted(again.unchanged) == sorted([*GERMAN, *FRENCH, *ENGLISH]) and not again.added and not again.updated
    assert [change for _, change in mixed.classify(documents(GERMAN))] == ["unchanged", "unchanged"]
    given = mixed.upsert([{"id": "de-houses", "text": GERMAN["de-houses"], "metadata": {"lang": "de"}}])
    assert given.unchanged == ["de-houses"]


def test_a_document_given_another_language_is_analysed_again_its_vectors_kept(tiny_embedder, tmp_path):
    collection = Collection.create(tmp_path / "c", tiny_embedder)
    vectors = np.random.default_rng(0).normal(size=(2, tiny_embedder.dim)).astype(np.float32)
    collection.upsert(documents(GERMAN), vectors=vectors)  # vectors of the caller's: a new embedding would differ
    moved = collection.upsert([{"id": "de-houses", "text": GERMAN["de-houses"], "metadata": {"lang": "nl"}}])
    assert moved.updated == ["de-houses"]
    assert collection.get("de-houses").metadata["lang"] == "nl"
    assert collection.search("Haus", mode="bm25", lang="de") == []
    assert ids(collection.search("Häuser", mode="bm25", lang="nl")) == ["de-houses"]
    found = collection.search(vector=vectors[0], mode="dense", k=1)[0]
    assert found.id == "de-houses" and found.score == pytest.approx(1.0, abs=1e-5)
    # the language stays when the document comes again without one, its text unchanged
    assert collection.upsert([{"id": "de-houses", "text": GERMAN["de-houses"]}]).unchanged == ["de-houses"]
    assert collection.get("de-houses").metadata["lang"] == "nl"
    collection.close()


def test_a_short_text_gets_the_collections_default_language(tiny_embedder, tmp_path):
    german = Collection.create(tmp_path / "de", tiny_embedder, language="de")
    german.upsert([{"id": "short", "text": "Häuser"}, {"id": "en", "text": ENGLISH["en-river"]}])
    assert "lang" not in german.get("short").metadata  # the default language, not written
    assert german.get("en").metadata["lang"] == "en"
    assert ids(german.search("Haus", mode="bm25")) == ["short"]
    assert german.info()["languages"] == {"default": "de", "detect": True, "documents": {"de": 1, "en": 1}}
    german.close()
    undetected = Collection.create(tmp_path / "fixed", tiny_embedder, language="fr", detect_languages=False)
    undetected.upsert(documents(FRENCH)[:1] + [{"id": "given", "text": GERMAN["de-train"], "metadata": {"lang": "de"}}])
    assert undetected.get("fr-horses").metadata == {}  # without detection, only a given lang is stored
    assert ids(undetected.search("cheval", mode="bm25")) == ["fr-horses"]  # analysed in the default language
    assert ids(undetected.search("Züge", mode="bm25")) == ["given"]
    assert undetected.info()["languages"] == {"default": "fr", "detect": False, "documents": {"de": 1, "fr": 1}}
    undetected.close()


def test_a_callers_own_lang_is_kept_and_read_where_bm25_knows_it(mixed):
    mixed.upsert(
        [
            {"id": "austrian", "text": "Die Häuser stehen am Fluss.", "metadata": {"lang": "de-AT"}},
            {"id": "own-code", "text": "Die Häuser stehen am Berg.", "metadata": {"lang": "german"}},
        ]
    )
    assert mixed.get("austrian").metadata["lang"] == "de-AT"  # kept as given
    assert mixed.get("own-code").metadata["lang"] == "german"
    assert "austrian" in ids(mixed.search("Haus", mode="bm25", lang="de"))  # de-AT is read as German
    assert "own-code" not in ids(mixed.search("Haus", mode="bm25", lang="de"))  # "german": the default language
    mixed.delete(["austrian", "own-code"])  # the collection is shared by the module's tests


def test_a_bad_language_is_a_clear_error(mixed, tiny_embedder, tmp_path):
    with pytest.raises(BadInputError, match="lang must be an ISO 639-1"):
        mixed.search("Haus", lang="xx")
    with pytest.raises(BadInputError, match="language must be"):
        Collection.create(tmp_path / "bad", tiny_embedder, language="klingon")
    assert not (tmp_path / "bad").exists()


def test_detection_is_sure_or_falls_back():
    assert detect_language(GERMAN["de-train"]) == "de"
    assert detect_language(FRENCH["fr-library"]) == "fr"
    assert detect_language(ENGLISH["en-coffee"], default="de") == "en"
    assert detect_language("Haus", default="fr") == "fr"  # too short to tell
    assert detect_language("12345 67890 12345 67890 12345 67890", default="it") == "it"


def test_every_language_the_identifier_names_is_one_bm25_analyses():
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    two_letter = {code for code in LanguageIdentifier.from_model_file(MODEL_FILE).labels if len(code) == 2}
    assert two_letter <= LANGUAGES
    assert set(STOP_LISTS) <= LANGUAGES and set(SNOWBALL) <= LANGUAGES
    assert check_language("de") == "de"
    assert {"der", "die", "und"} <= stop_words("de") and "chevaux" not in stop_words("fr")


def test_languages_load_no_scipy():
    code = (
        "import sys\n"
        "from retriever.search.languages import stop_words, language_analyzer\n"
        "from retriever.search.bm25 import Analyzer\n"
        "assert language_analyzer('de', Analyzer())('Die Häuser') == ['haus']\n"
        "assert 'scipy' not in sys.modules and 'bm25s' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_segments_say_which_languages_they_hold(mixed):
    assert view_languages(mixed.reader.current()) == ["en", "de", "fr"]


def test_texts_being_written_are_analysed_in_their_documents_languages():
    analyzer = MultilingualAnalyzer(Analyzer(), {"default": "en", "detect": True})
    same = "Die Häuser"
    docs = [Document("a", same, metadata={"lang": "de"}), Document("b", same, "Häuser", metadata={"lang": "nl"})]
    assert analyzer.positions(same)[1] == ["die", "häuser"]  # English outside a write
    dutch = ["nl:" + term for term in language_analyzer("nl", Analyzer())(same)]
    assert dutch and dutch != ["nl:haus"]
    with analyzer.writing(docs):  # the same text twice: in the order written
        assert analyzer.positions(same)[1] == ["de:haus"]
        assert analyzer.positions(same)[1] == dutch
        assert analyzer("Häuser") == dutch  # the second document's title
    english_only = MultilingualAnalyzer(Analyzer())
    with english_only.writing(docs):
        assert english_only.positions(same)[1] == ["die", "häuser"]


def test_a_note_names_the_documents_the_english_only_model_reads_poorly(mixed):
    counts = mixed.info()["languages"]["documents"]
    note = english_only_note("all-MiniLM-L6-v2", counts)
    assert "all-MiniLM-L6-v2 reads English only" in note and "4 document(s)" in note and "(de 2, fr 2)" in note
    assert english_only_note("all-MiniLM-L6-v2", {"en": 3}) is None
    assert english_only_note(mixed.model["name"], counts) is None  # another model: nothing known of its languages
    assert dense_language_note(mixed) is None  # the tiny model is not the packaged one


def test_the_query_language_travels_over_http(mixed):
    pytest.importorskip("uvicorn")
    from retriever.remote import RemoteCollection
    from tests.retriever.live_server import live_server

    with live_server(mixed.root) as url:
        remote = RemoteCollection(url)
        assert ids(remote.search("Haus", mode="bm25", lang="de")) == ["de-houses"]
        assert remote.search("Haus", mode="bm25", lang="fr") == []
        found = remote.search("cheval", mode="bm25")[0]
        assert found.id == "fr-horses" and found.metadata["lang"] == "fr"
        assert [t.term for e in found.evidence for t in e.terms] == ["chevaux"]
        with pytest.raises(BadInputError, match="lang must be"):
            remote.search("Haus", lang="deu")
        request = urllib.request.Request(
            f"{url}/search", json.dumps({"query": "Haus", "lang": "deu"}).encode(), {"Content-Type": "application/json"}
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 422 and "lang must be" in refused.value.read().decode()
