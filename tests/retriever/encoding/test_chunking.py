"""Token-aware chunking: windows fit the model, keep offsets, overlap, cover, respect words."""

from __future__ import annotations

import random

import pytest

from retriever import BadInputError, Document
from retriever.encoding.chunking import TITLE_SEPARATOR, Chunker

WORDS = (
    "the quick brown fox jumps over lazy dog green tea is steamed after picking coffee beans "
    "are roasted at high temperature rivers flow into sea mountains rise above clouds snow "
    "covers peaks in winter neural networks learn representations of text search engines rank "
    "documents python programming language databases store rows tables with indexes "
    "unbelievably extraordinary photosynthesis characterisation"
).split()


def english(n_words: int, seed: int = 0) -> str:
    """Plain English-like text with sentences, commas and paragraph breaks."""
    rng = random.Random(seed)
    out, sentence = [], []
    for i in range(n_words):
        sentence.append(rng.choice(WORDS))
        if len(sentence) > 4 and rng.random() < 0.15:
            out.append(" ".join(sentence).capitalize() + rng.choice([".", ".", "!", "?"]))
            sentence = []
        elif rng.random() < 0.05:
            sentence[-1] += ","
        if i % 90 == 89:
            out.append("\n\n")
    out.append(" ".join(sentence) + ".")
    return " ".join(out)


@pytest.fixture(params=["tiny", "minilm"])
def embedder(request):
    return request.getfixturevalue("tiny_embedder" if request.param == "tiny" else "minilm")


def settings(embedder):
    """(window, overlap) pairs: the collection default and a small window."""
    return [(embedder.max_tokens - 2, min(32, (embedder.max_tokens - 2) // 4)), (24, 6)]


def check_chunks(embedder, chunker, doc, chunks, prefix=""):
    text = doc.text
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        assert 0 <= chunk.start < chunk.end <= len(text)
        assert chunk.embed_text == prefix + text[chunk.start : chunk.end]
        # the chunk fits the window once re-tokenised, special tokens included
        assert embedder.count_tokens([chunk.embed_text])[0] <= chunker.window_tokens + 2
        assert embedder.count_tokens([chunk.embed_text])[0] <= embedder.max_tokens
    for a, b in zip(chunks, chunks[1:]):
        assert a.start < b.start, "chunks move forward"
        assert a.end < b.end
    covered = [False] * len(text)
    for chunk in chunks:
        for i in range(chunk.start, chunk.end):
            covered[i] = True
    missing = [i for i, ch in enumerate(text) if not ch.isspace() and not covered[i]]
    assert not missing, f"characters outside every chunk: {[text[i] for i in missing[:10]]}"


@pytest.mark.parametrize("which", [0, 1])
def test_long_text_becomes_fitting_covering_overlapping_chunks(embedder, which):
    window, overlap = settings(embedder)[which]
    chunker = Chunker(embedder.tokenizer, window, overlap, title_prefix=False)
    doc = Document("d", english(700 if window > 100 else 200))
    n_tokens = embedder.count_tokens([doc.text])[0] - 2
    chunks = chunker.split(doc)
    assert len(chunks) >= max(2, n_tokens // window)
    # no runaway chunk count either: each step advances by about window - overlap
    assert len(chunks) <= n_tokens // (window - overlap) * 2 + 2
    check_chunks(embedder, chunker, doc, chunks)
    for a, b in zip(chunks, chunks[1:]):
        assert b.start < a.end, "consecutive chunks overlap"
    assert chunks[0].start == 0
    assert doc.text[chunks[-1].end :].strip() == ""


def test_chunks_do_not_split_words(embedder):
    for window, overlap in settings(embedder):
        chunker = Chunker(embedder.tokenizer, window, overlap, title_prefix=False)
        doc = Document("d", english(400, seed=3))
        text = doc.text
        for chunk in chunker.split(doc):
            if chunk.start > 0:
                assert not (text[chunk.start - 1].isalnum() and text[chunk.start].isalnum()), (
                    f"chunk starts inside a word: {text[chunk.start - 10 : chunk.start + 10]!r}"
                )
            if chunk.end < len(text):
                assert not (text[chunk.end - 1].isalnum() and text[chunk.end].isalnum()), (
                    f"chunk ends inside a word: {text[chunk.end - 10 : chunk.end + 10]!r}"
                )


def test_zero_overlap_tiles_the_text(tiny_embedder):
    chunker = Chunker(tiny_embedder.tokenizer, 16, 0, title_prefix=False)
    doc = Document("d", english(150, seed=5))
    chunks = chunker.split(doc)
    check_chunks(tiny_embedder, chunker, doc, chunks)
    for a, b in zip(chunks, chunks[1:]):
        assert a.end <= b.start
        assert doc.text[a.end : b.start].strip() == ""


def test_short_text_is_one_chunk(embedder):
    chunker = Chunker(embedder.tokenizer, 30, 4, title_prefix=False)
    doc = Document("d", "  Green tea is steamed.  ")
    (chunk,) = chunker.split(doc)
    assert doc.text[chunk.start : chunk.end] == "Green tea is steamed."


def test_word_longer_than_the_window_is_split_but_covered(minilm):
    # A word of many word pieces (under WordPiece's 100-character limit); such a
    # window is cut inside the word and re-tokenises differently.
    embedder = minilm
    word = ("pneumonoultramicroscopicsilicovolcanoconiosis" * 3)[:96]
    doc = Document("d", f"Green tea is steamed {word} after picking, rivers flow.")
    pieces = len(embedder.tokenizer(word, add_special_tokens=False)["input_ids"])
    window = 12
    assert pieces > window, "the word must not fit one window"
    chunker = Chunker(embedder.tokenizer, window, 4, title_prefix=False)
    chunks = chunker.split(doc)
    check_chunks(embedder, chunker, doc, chunks)
    n_tokens = embedder.count_tokens([doc.text])[0]
    assert len(chunks) <= n_tokens // (window - 4) + 4, f"{len(chunks)} chunks for {n_tokens} tokens"


def test_title_is_prefixed_and_counted(embedder):
    window = 24
    chunker = Chunker(embedder.tokenizer, window, 4, title_prefix=True)
    doc = Document("d", english(120, seed=7), title="  Tea and rivers ")
    chunks = chunker.split(doc)
    prefix = "Tea and rivers" + TITLE_SEPARATOR
    assert len(chunks) > 1
    check_chunks(embedder, chunker, doc, chunks, prefix=prefix)
    assert all(c.embed_text.startswith(prefix) for c in chunks)


def test_long_title_is_not_prefixed(embedder):
    window = 24
    chunker = Chunker(embedder.tokenizer, window, 4, title_prefix=True)
    title = "rivers flow into the sea and mountains rise above the clouds"
    assert len(embedder.tokenizer(title, add_special_tokens=False)["input_ids"]) > window // 4
    doc = Document("d", english(60, seed=8), title=title)
    chunks = chunker.split(doc)
    check_chunks(embedder, chunker, doc, chunks, prefix="")
    assert not any(title in c.embed_text for c in chunks)


def test_title_prefix_off_or_blank_title(tiny_embedder):
    doc = Document("d", "Green tea is steamed after picking.", title="Tea")
    off = Chunker(tiny_embedder.tokenizer, 24, 4, title_prefix=False).split(doc)
    assert off[0].embed_text == doc.text
    blank = Chunker(tiny_embedder.tokenizer, 24, 4).split(Document("d", doc.text, title="   "))
    assert blank[0].embed_text == doc.text


@pytest.mark.parametrize("text", ["   ", "\n\t", "\u200b\u200b", ""])
def test_text_without_tokens_raises(tiny_embedder, text):
    chunker = Chunker(tiny_embedder.tokenizer, 24, 4)
    with pytest.raises(BadInputError, match="no tokens"):
        chunker.split(Document("empty-doc", text))


@pytest.mark.parametrize("window, overlap", [(7, 0), (0, 0), (-5, 0), (24, 12), (24, 20), (24, -1), (8, 4)])
def test_invalid_window_or_overlap_raises(tiny_embedder, window, overlap):
    with pytest.raises(BadInputError, match="chunk"):
        Chunker(tiny_embedder.tokenizer, window, overlap)


@pytest.mark.parametrize("window, overlap", [(8, 0), (8, 3), (24, 11)])
def test_valid_edge_settings(tiny_embedder, window, overlap):
    """The smallest window and the largest overlap allowed are kept as given and chunk as they say."""
    chunker = Chunker(tiny_embedder.tokenizer, window, overlap, title_prefix=False)
    assert chunker.settings() == {"window_tokens": window, "overlap_tokens": overlap, "title_prefix": False}
    doc = Document("d", " ".join(["tea"] * 60))  # one token per word: windows of exactly ``window`` tokens
    assert len(tiny_embedder.tokenizer("tea", add_special_tokens=False)["input_ids"]) == 1
    chunks = chunker.split(doc)
    check_chunks(tiny_embedder, chunker, doc, chunks)
    words = [len(doc.text[c.start : c.end].split()) for c in chunks]
    assert words[:-1] == [window] * (len(chunks) - 1) and 0 < words[-1] <= window
    shared = [len(doc.text[b.start : a.end].split()) if b.start < a.end else 0 for a, b in zip(chunks, chunks[1:])]
    assert shared == [overlap] * (len(chunks) - 1)
    assert len(chunks) == -(-(60 - overlap) // (window - overlap))  # each step moves window - overlap words


def test_slow_tokenizer_is_refused(tiny_embedder):
    class Slow:
        is_fast = False

    with pytest.raises(BadInputError, match="fast tokenizer"):
        Chunker(Slow(), 24, 4)


def test_settings_round_trip(tiny_embedder):
    chunker = Chunker(tiny_embedder.tokenizer, 40, 10, title_prefix=False)
    assert chunker.settings() == {"window_tokens": 40, "overlap_tokens": 10, "title_prefix": False}


HARD_WORDS = (
    "unbelievably extraordinary photosynthesis characterisation electroencephalography "
    "antidisestablishmentarianism tea sea fox, dog. don't rivers"
).split()


@pytest.mark.parametrize("window, overlap", [(8, 3), (12, 5), (24, 9), (30, 13)])
def test_windows_with_many_multi_piece_words(minilm, window, overlap):
    """Words of several word pieces near window boundaries: still no split words,
    overlapping, fitting, covering chunks, and no chunk inside its predecessor."""
    tokenizer = minilm.tokenizer
    longest = max(len(tokenizer(w, add_special_tokens=False)["input_ids"]) for w in HARD_WORDS)
    assert longest > 4, "the word list must hold multi-piece words"
    rng = random.Random(window * 100 + overlap)
    for trial in range(12):
        text = " ".join(rng.choice(HARD_WORDS) for _ in range(rng.randint(20, 120)))
        title = rng.choice(["", "Tea"])
        chunker = Chunker(tokenizer, window, overlap, title_prefix=True)
        doc = Document("d", text, title=title)
        chunks = chunker.split(doc)
        check_chunks(minilm, chunker, doc, chunks, prefix=f"{title}\n" if title else "")
        budget = window - (len(tokenizer(title, add_special_tokens=False)["input_ids"]) if title else 0)
        if longest > budget:
            continue  # a word longer than the window has to be cut
        for chunk in chunks:
            for pos in (chunk.start, chunk.end):
                if 0 < pos < len(text):
                    assert not (text[pos - 1].isalnum() and text[pos].isalnum()), (
                        f"window {window}/{overlap} splits a word: {text[pos - 12 : pos + 12]!r}"
                    )
        if longest <= overlap:
            for a, b in zip(chunks, chunks[1:]):
                assert b.start < a.end, f"window {window}/{overlap}: no overlap at {a.end}"


@pytest.mark.parametrize("title", ["", "Green tea"])
def test_chunk_token_ids_are_the_tokens_of_its_text(embedder, title):
    """The document is tokenised once; each chunk's ids equal its text re-tokenised,
    so embedding the ids gives the vector of the text."""
    doc = Document("d", english(400, seed=7), title=title)
    chunker = Chunker(embedder.tokenizer, 40, 8, title_prefix=True)
    chunks = chunker.split(doc)
    assert len(chunks) > 3
    for chunk in chunks:
        assert list(chunk.token_ids) == embedder.tokenizer(chunk.embed_text, add_special_tokens=False)["input_ids"]
    from_ids = embedder.embed_token_ids([c.token_ids for c in chunks])
    from_text = embedder.embed([c.embed_text for c in chunks])
    assert float((from_ids * from_text).sum(axis=1).min()) > 0.99999


def test_every_kind_of_tokenizer_gives_the_same_chunks(tiny_embedder):
    """A transformers fast tokenizer, its Rust tokenizer and the embedder's torch-free one chunk alike."""
    doc = Document("d", english(300, seed=5) + " Café naïve señor — 東京 ok.", title="A Title")
    kinds = [tiny_embedder.tokenizer, tiny_embedder.tokenizer.backend_tokenizer, tiny_embedder.text_tokenizer]
    chunks = [Chunker(kind, 24, 4).split(doc) for kind in kinds]
    assert len(chunks[0]) > 2
    assert chunks[1] == chunks[0] and chunks[2] == chunks[0]
