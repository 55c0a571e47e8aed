"""BM25: analysis, Lucene scoring pinned against bm25s on real text, updates, files."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from retriever.search.bm25 import Analyzer, bm25_top
from retriever.search.bm25_matrix import BM25Index
from retriever.storage.postings import Postings

REPO = Path(__file__).resolve().parents[3]

DOCS = {
    "tea": "Green tea is steamed right after picking; black tea is fully oxidised.",
    "coffee": "Coffee beans are roasted. Roasting coffee develops its aroma.",
    "rivers": "Rivers flow into the sea; a river delta forms where rivers slow down.",
    "both": "Tea or coffee? Many drink tea in the morning and coffee after lunch.",
}


@pytest.fixture()
def analyzer() -> Analyzer:
    return Analyzer()


def build(analyzer, docs: dict[str, str]) -> BM25Index:
    return BM25Index.empty().updated([], [(doc_id, analyzer(text)) for doc_id, text in docs.items()])


def test_analyzer_lowercases_drops_stopwords_and_stems(analyzer):
    assert analyzer("The Rivers are FLOWING into the sea") == ["river", "flow", "sea"]
    assert analyzer("a an the of") == []
    assert Analyzer(stemmer=None, stopwords=None)("The Rivers") == ["the", "rivers"]


def test_stopwords_are_lucenes_english_set_as_bm25s_lists_it():
    from bm25s.stopwords import STOPWORDS_EN as reference

    from retriever.search.bm25 import STOPWORDS_EN

    assert STOPWORDS_EN == frozenset(reference) and len(STOPWORDS_EN) == 33


def test_searching_loads_neither_scipy_nor_bm25s_nor_numba():
    """A command-line search imports what it uses: scipy alone costs it a fifth of a second, numba (the
    compiled skipping scorer, for large collections only) a third."""
    probe = (
        "import sys\n"
        "import retriever.search.ranking\n"
        "from retriever.search.bm25 import Analyzer, bm25_top\n"
        "Analyzer()('the rivers flow')\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'scipy', 'bm25s', 'numba'}))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def word_by_word_term_spans(analyzer, text: str, terms: set[str]) -> list[tuple[int, int, str]]:
    """The reference: every token of ``text``, lower-cased and stemmed alone, kept when its stem is wanted."""
    import re

    import Stemmer

    from retriever.search.bm25 import STOPWORDS_EN

    stem = Stemmer.Stemmer("porter").stemWord
    found = []
    for match in re.finditer(r"(?u)\b\w\w+\b", text):
        word = match.group().lower()
        if word not in STOPWORDS_EN and stem(word) in terms:
            found.append((match.start(), match.end(), stem(word)))
    return found


@pytest.mark.parametrize(
    "text",
    [
        DOCS["rivers"] + " " + DOCS["both"],
        "Running runs run; the runner ran. RUN_TIME run_x x_run run9 9run run٣ runs",
        "İstanbul STRASSE straße ǅemal, ﬁne ﬁles filed: Ünïcödé wörds wörd",  # lower-casing changes lengths
        "flow flows flowing overflow flowchart FLOW-RATE",
        "β-run·runs±running — run–runner ‘run’ ×run µrun runµ run runs ruńs",  # non-ASCII between words
    ],
)
def test_term_spans_find_the_whole_words_that_analyse_to_the_terms(analyzer, text):
    terms = set(analyzer(text)) | {"absent"}
    for wanted in (terms, {t for t in terms if len(t) % 2}, {"run", "flow"}, set()):
        assert analyzer.term_spans(text, wanted) == word_by_word_term_spans(analyzer, text, wanted)


@given(st.text(alphabet=st.sampled_from("runs flow-_.,9٣βµ±·—\u00a0\u0301\u200bİßÜ\n"), max_size=200))
def test_term_spans_agree_with_the_reference_on_any_text(text):
    analyzer = Analyzer()
    terms = set(analyzer(text)) | {"run", "flow"}
    assert analyzer.term_spans(text, terms) == word_by_word_term_spans(analyzer, text, terms)


def test_term_spans_from_many_threads_while_the_stem_cache_fills_and_empties(analyzer, monkeypatch):
    """Threads share an analyzer's remembered stems; emptied when full, they never lose a thread's words."""
    import threading

    from retriever.search import bm25

    monkeypatch.setattr(bm25, "STEM_CACHE", 40)
    texts = [" ".join(f"word{i}x{j} rivers flowing run{j % 7}s" for j in range(30)) for i in range(8)]
    terms = {"river", "flow", "run3"}
    expected = [word_by_word_term_spans(analyzer, text, terms) for text in texts]
    got: dict[int, list] = {}
    start = threading.Barrier(len(texts))

    def spans(i: int) -> None:
        start.wait()
        got[i] = [analyzer.term_spans(texts[i], terms) for _ in range(20)]

    threads = [threading.Thread(target=spans, args=(i,)) for i in range(len(texts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(got[i] == [expected[i]] * 20 for i in range(len(texts)))
    assert len(analyzer._stem_of) <= 40


def test_term_spans_on_real_text(analyzer, datasets_dir):
    corpus = datasets_dir / "scifact" / "corpus.jsonl"
    queries = datasets_dir / "scifact" / "queries.jsonl"
    if not corpus.exists():
        pytest.skip(f"needs {corpus}")
    rows = [json.loads(line) for line in itertools.islice(corpus.open(encoding="utf-8"), 150)]
    questions = [json.loads(line)["text"] for line in itertools.islice(queries.open(encoding="utf-8"), 150)]
    for row, question in zip(rows, questions):
        text = f"{row['title']}. {row['text']}"
        terms = set(analyzer(question)) | set(analyzer(text)[:4])
        assert analyzer.term_spans(text, terms) == word_by_word_term_spans(analyzer, text, terms)


def test_porter_stems_less_their_last_character_begin_their_words(datasets_dir):
    """What term_spans' search by prefix rests on, over every distinct word of the shared collections."""
    import re

    import Stemmer

    words = set()
    for name in ("scifact", "cisi", "cranfield", "medline", "time"):
        corpus = datasets_dir / name / "corpus.jsonl"
        if not corpus.exists():
            pytest.skip(f"needs {corpus}")
        words.update(re.findall(r"(?u)\b\w\w+\b", corpus.read_text(encoding="utf-8").lower()))
    words = sorted(words)
    stems = Stemmer.Stemmer("porter").stemWords(words)
    assert len(words) > 50_000
    assert [(w, s) for w, s in zip(words, stems) if not w.startswith(s[:-1])] == []


@pytest.mark.parametrize("terms", [{"u"}, {"u", "us"}, {"us"}, {"use", "u"}, {"cell", "ca"}])
def test_term_spans_with_stems_of_one_or_two_characters(analyzer, terms):
    text = "Us, u.s. uses us; U and US usual cells, CA cas ca2 cae caed: use used"
    assert analyzer.term_spans(text, terms) == word_by_word_term_spans(analyzer, text, terms)


def test_ranking_follows_term_statistics(analyzer):
    index = build(analyzer, DOCS)
    ranked = [doc_id for doc_id, _ in index.top(analyzer("river delta"), 10)]
    assert ranked == ["rivers"]  # only documents sharing a term are returned
    ranked = [doc_id for doc_id, _ in index.top(analyzer("coffee roasting"), 10)]
    assert ranked[0] == "coffee" and set(ranked) == {"coffee", "both"}
    assert index.top(analyzer("zebra"), 10) == []


def test_scores_match_bm25s_lucene_on_real_text(analyzer, datasets_dir):
    import bm25s

    corpus_path = datasets_dir / "cisi" / "corpus.jsonl"
    if not corpus_path.is_file():
        pytest.skip(f"needs {corpus_path}")
    with corpus_path.open(encoding="utf-8") as lines:
        records = [json.loads(line) for line in itertools.islice(lines, 400)]
    tokens = [analyzer(f"{r['title']}\n{r['text']}") for r in records]
    ours = BM25Index.empty(k1=0.9, b=0.4).updated([], list(zip([r["_id"] for r in records], tokens)))
    reference = bm25s.BM25(k1=0.9, b=0.4, method="lucene")
    vocabulary = {term: i for i, term in enumerate(sorted({t for doc in tokens for t in doc}))}
    reference.index(
        bm25s.tokenization.Tokenized([[vocabulary[t] for t in doc] for doc in tokens], vocabulary), show_progress=False
    )
    queries = [records[i]["title"] for i in range(0, 400, 20)]
    for query in queries:
        terms = [t for t in analyzer(query) if t in vocabulary]
        expected = reference.get_scores(terms)
        np.testing.assert_allclose(ours.scores(terms), expected, rtol=1e-4, atol=1e-5)


def test_updates_match_a_fresh_build(analyzer):
    incremental = build(analyzer, {k: DOCS[k] for k in ("tea", "coffee")})
    incremental = incremental.updated(["tea"], [("rivers", analyzer(DOCS["rivers"])), ("both", analyzer(DOCS["both"]))])
    incremental = incremental.updated([], [("tea", analyzer(DOCS["tea"]))])
    fresh = build(analyzer, DOCS)
    for query in ("tea", "coffee roasting", "rivers sea", "morning lunch"):
        terms = analyzer(query)
        assert dict(incremental.top(terms, 10)) == pytest.approx(dict(fresh.top(terms, 10)))


def test_allowed_restricts_results(analyzer):
    index = build(analyzer, DOCS)
    ranked = index.top(analyzer("tea coffee"), 10, allowed={"coffee", "rivers"})
    assert [doc_id for doc_id, _ in ranked] == ["coffee"]


def test_save_and_load_round_trip(analyzer, tmp_path):
    index = build(analyzer, {**DOCS, "ünïcode-id/ß": "Tee und Kaffee, grüner Tee"})
    index.save(tmp_path / "bm25.npz")
    loaded = BM25Index.load(tmp_path / "bm25.npz")
    assert loaded.doc_ids == index.doc_ids and loaded.terms == index.terms
    assert (loaded.k1, loaded.b) == (index.k1, index.b)
    terms = analyzer("tee tea coffee")
    assert loaded.top(terms, 10) == index.top(terms, 10)
    assert [p.name for p in tmp_path.iterdir()] == ["bm25.npz"]


MORE_DOCS = {
    **DOCS,
    "delta": "The delta of a river is where the river meets the sea and slows down.",
    "roast": "Dark roast coffee beans, light roast coffee beans: roasting decides the taste.",
    "green": "Green tea, white tea and black tea come from one plant.",
    "sea": "The sea is salty; rivers bring fresh water into the sea.",
}


def segment_postings(analyzer, texts: list[str]) -> tuple[Postings, np.ndarray]:
    """One segment's ``(postings, doc_lengths)`` of ``texts``, a row each."""
    tokens = [analyzer(text) for text in texts]
    terms = sorted({t for doc in tokens for t in doc})
    term_id = {t: i for i, t in enumerate(terms)}
    term_ids = np.asarray([term_id[t] for doc in tokens for t in doc], dtype=np.int64)
    rows = np.asarray([row for row, doc in enumerate(tokens) for _ in doc], dtype=np.int64)
    return Postings.from_pairs(terms, term_ids, rows, None), np.asarray([len(d) for d in tokens], np.float32)


@pytest.mark.parametrize("query", ["tea", "coffee roasting beans", "rivers sea delta", "tea tea coffee", "zebra"])
def test_bm25_top_over_segments_equals_one_index_of_the_live_documents(analyzer, query):
    """Deleted rows leave the statistics and the results, filtered rows the results only."""
    ids = list(MORE_DOCS)
    segments = [ids[0:3], ids[3:5], ids[5:8]]
    deleted = {"coffee", "delta"}
    allowed = set(ids) - {"green"}
    parts = []
    for segment in segments:
        postings, lengths = segment_postings(analyzer, [MORE_DOCS[i] for i in segment])
        live = np.asarray([i not in deleted for i in segment])
        parts.append((postings, lengths, live, np.asarray([i in allowed for i in segment])))
    live_ids = [i for i in ids if i not in deleted]
    totals = (len(live_ids), float(sum(len(analyzer(MORE_DOCS[i])) for i in live_ids)))
    reference = build(analyzer, {i: MORE_DOCS[i] for i in live_ids})
    terms = analyzer(query)
    for k in (2, 10):
        top = bm25_top(parts, terms, k, 0.9, 0.4, totals=totals)
        expected = reference.top(terms, k, allowed=allowed)
        assert [segments[part][row] for part, row, _ in top] == [doc_id for doc_id, _ in expected]
        np.testing.assert_allclose([s for *_, s in top], [s for _, s in expected], rtol=1e-6)
    unfiltered = bm25_top([(p, n, live, None) for p, n, live, _ in parts], terms, 10, totals=totals)
    assert [segments[part][row] for part, row, _ in unfiltered] == [d for d, _ in reference.top(terms, 10)]
    assert bm25_top(parts, terms, 10, totals=(0, 0.0)) == []
