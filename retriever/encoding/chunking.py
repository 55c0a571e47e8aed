"""Token-aware chunking: long text becomes overlapping windows, never truncated.

Windows are counted in the model's own tokens and end on word boundaries, so
re-tokenising a chunk gives no more tokens than the window allows. Each chunk
keeps the character offsets of its span in the document, and its token ids:
the document is tokenised once, and the encoder takes a window's ids as they
are (``Embedder.embed_token_ids``) instead of tokenising its text again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from retriever.documents import Document
from retriever.errors import BadInputError

TITLE_SEPARATOR = "\n"


@dataclass(frozen=True)
class Chunk:
    """A span of a document.

    Attributes:
        ordinal: Position of the chunk in its document, from 0.
        start: Character offset of the span in ``Document.text``.
        end: Character offset one past the span.
        embed_text: What is embedded: the span, with the title in front when
            the chunker prefixes titles.
        token_ids: ``embed_text``'s token ids, special tokens excluded (the
            title's, then the span's as they occur in the document).
    """

    ordinal: int
    start: int
    end: int
    embed_text: str
    token_ids: tuple[int, ...] = field(default=(), compare=False, repr=False)


class Chunker:
    """Splits documents into overlapping token windows.

    Args:
        tokenizer: The model's Rust tokenizer: a ``tokenizers.Tokenizer``, an
            embedder's ``text_tokenizer``, or a transformers fast tokenizer.
        window_tokens: Tokens per chunk, special tokens excluded; title tokens
            count against it when titles are prefixed.
        overlap_tokens: Tokens shared by consecutive chunks (default 32).
        title_prefix: Embed ``title + "\\n" + span`` so every chunk carries its
            document's title (default True). A title longer than a quarter of
            the window is not prefixed.
    """

    def __init__(self, tokenizer, window_tokens: int, overlap_tokens: int = 32, title_prefix: bool = True) -> None:
        if window_tokens < 8:
            raise BadInputError(f"chunk window must be at least 8 tokens, got {window_tokens}")
        if not 0 <= overlap_tokens < window_tokens // 2:
            raise BadInputError(f"chunk overlap must be in [0, {window_tokens // 2}) tokens, got {overlap_tokens}")
        self.tokenizer = _rust_tokenizer(tokenizer)
        self.window_tokens = window_tokens
        self.overlap_tokens = overlap_tokens
        self.title_prefix = title_prefix

    def settings(self) -> dict:
        """The settings a collection records in its manifest."""
        return {
            "window_tokens": self.window_tokens,
            "overlap_tokens": self.overlap_tokens,
            "title_prefix": self.title_prefix,
        }

    def split(self, doc: Document) -> list[Chunk]:
        """Chunk one document.

        A document whose text has no tokens but whose title has (a title
        alone) is one chunk: ``title_chunk``.

        Raises:
            BadInputError: neither its text nor its title has a token.
        """
        encoding = self.tokenizer.encode(doc.text, add_special_tokens=False)
        offsets, word_ids, ids = encoding.offsets, encoding.word_ids, encoding.ids
        if not offsets:
            return [self.title_chunk(doc)]
        prefix, title_ids = self._title_prefix(doc.title)
        budget = self.window_tokens - len(title_ids)

        def fits(first: int, last: int) -> bool:
            # Only a window cut inside a word can re-tokenise into more tokens.
            if not (_inside_word(word_ids, first) or _inside_word(word_ids, last)):
                return True
            span = prefix + doc.text[offsets[first][0] : offsets[last - 1][1]]
            n = len(self.tokenizer.encode(span, add_special_tokens=False).ids)
            return n <= self.window_tokens

        chunks = []
        for ordinal, (first, last) in enumerate(_windows(word_ids, budget, self.overlap_tokens, fits)):
            start, end = offsets[first][0], offsets[last - 1][1]
            chunks.append(Chunk(ordinal, start, end, prefix + doc.text[start:end], (*title_ids, *ids[first:last])))
        return chunks

    def title_chunk(self, doc: Document) -> Chunk:
        """The one chunk of a document of a title alone: its title is what is embedded, whatever
        ``title_prefix`` says, and the chunk spans no text (``start == end == 0``). A title longer than the
        window is embedded by its first ``window_tokens`` tokens (BM25 indexes all of it).

        Raises:
            BadInputError: the title has no tokens either.
        """
        title = doc.title.strip()
        title_ids = self.tokenizer.encode(title, add_special_tokens=False).ids if title else []
        if not title_ids:
            raise BadInputError(f"document {doc.id!r}: text has no tokens")
        return Chunk(0, 0, 0, title, tuple(title_ids[: self.window_tokens]))

    def prefix(self, title: str) -> str:
        """The text put in front of every chunk of a document titled ``title`` (``""``: none)."""
        return self._title_prefix(title)[0]

    def _title_prefix(self, title: str) -> tuple[str, list[int]]:
        """The text and token ids put in front of every chunk (none when the title is long or blank)."""
        if not self.title_prefix or not title.strip():
            return "", []
        title_ids = self.tokenizer.encode(title.strip(), add_special_tokens=False).ids
        if len(title_ids) > self.window_tokens // 4:
            return "", []
        return title.strip() + TITLE_SEPARATOR, title_ids


def _rust_tokenizer(tokenizer):
    """A ``tokenizers.Tokenizer`` that neither pads nor cuts, from any of the kinds ``Chunker`` takes.

    A transformers fast tokenizer is a wrapper of one: its ids, offsets and
    words are the Rust tokenizer's, so chunks come out the same either way.
    """
    from tokenizers import Tokenizer

    from retriever.encoding.tokens import TextTokenizer

    rust = None
    if isinstance(tokenizer, Tokenizer):
        rust = tokenizer
    elif isinstance(tokenizer, TextTokenizer):  # an embedder's
        rust = tokenizer.backend
    elif getattr(tokenizer, "is_fast", False):  # a transformers fast tokenizer
        rust = tokenizer.backend_tokenizer
    if not isinstance(rust, Tokenizer):
        raise BadInputError("token-aware chunking needs a fast tokenizer (tokenizer.json)")
    rust = Tokenizer.from_str(rust.to_str())  # a copy: the settings below stay ours
    rust.no_truncation()
    rust.no_padding()
    return rust


def _inside_word(word_ids: list[int | None], i: int) -> bool:
    """Whether token ``i`` continues the word of token ``i - 1`` (a cut there splits a word)."""
    return 0 < i < len(word_ids) and word_ids[i] is not None and word_ids[i] == word_ids[i - 1]


def _windows(word_ids: list[int | None], size: int, overlap: int, fits=None) -> list[tuple[int, int]]:
    """Token index ranges ``[first, last)`` of at most ``size`` tokens.

    Ends move back to a word start when they would split a word (unless the
    word alone fills the window); each next window starts ``overlap`` tokens
    before the previous end, moved back to a word start, or forward to the
    next one when moving back would reach the previous window's start, and
    later by whole words while the overlap leaves no room for the next word.
    ``fits(first, last)``, when given, shrinks a window until it holds.
    """

    def word_start(i: int, floor: int) -> int:
        while i > floor and word_ids[i] is not None and word_ids[i] == word_ids[i - 1]:
            i -= 1
        return i

    n = len(word_ids)
    windows = []
    first = prev_last = 0
    while first < n:
        last = min(first + size, n)
        if last < n:
            snapped = word_start(last, first)
            while snapped <= prev_last and first < prev_last:
                # The overlap leaves no room for the next word, so this window
                # would add nothing: start it one word later.
                first += 1
                while first < prev_last and word_ids[first] is not None and word_ids[first] == word_ids[first - 1]:
                    first += 1
                last = min(first + size, n)
                snapped = word_start(last, first) if last < n else last
            last = snapped if snapped > first else last
        while fits is not None and last - first > 1 and not fits(first, last):
            last -= 1
        windows.append((first, last))
        if last >= n:
            break
        prev_last = last
        target = max(last - overlap, first + 1)
        nxt = word_start(target, first)
        if nxt <= first:  # that word began this window: start at the next word instead
            nxt = target
            while nxt < last and word_ids[nxt] is not None and word_ids[nxt] == word_ids[nxt - 1]:
                nxt += 1
        first = nxt
    return windows
