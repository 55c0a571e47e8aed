"""Which language a document is written in: py3langid's naive Bayes identifier, trusted only when sure.

``detect_language`` reads a document's title and the start of its text. A
short text, or one the identifier is not sure of, gets the caller's default
(a collection's default language) instead of a guess: for short texts the
identifier's best guess is often wrong, and an English text taken for
another language would be stemmed and matched as that language. The
identifier knows about a hundred languages; a guess outside ``LANGUAGES``
(codes of three letters, ``zxx`` for no language) also falls back to the default.
"""

from __future__ import annotations

import threading

from retriever.search.languages import LANGUAGES

#: Characters of a document the identifier reads (its title, then its text): enough to be sure of a language.
DETECT_CHARS = 2000
#: Fewer word characters than this: too short to tell, the default language.
MIN_WORD_CHARS = 24
#: The identifier's probability (normalised over its languages) from which its guess is taken.
MIN_CONFIDENCE = 0.9

_identifier = None
_identifier_lock = threading.Lock()


def detect_language(text: str, title: str = "", default: str = "en") -> str:
    """The ISO 639-1 code of the language ``title`` and ``text`` are written in, or ``default``.

    Args:
        text: The document's text (its first ``DETECT_CHARS`` characters, less the title's, are read).
        title: Its title, read first.
        default: The code returned when the text is too short (``MIN_WORD_CHARS``), the identifier's
            probability is below ``MIN_CONFIDENCE``, or its guess is not one of ``LANGUAGES``.

    Returns:
        One of ``LANGUAGES``, or ``default``.
    """
    sample = f"{title}\n{text}" if title else text
    sample = sample[:DETECT_CHARS]
    if sum(character.isalpha() for character in sample) < MIN_WORD_CHARS:
        return default
    code, probability = _language_identifier().classify(sample)
    return code if probability >= MIN_CONFIDENCE and code in LANGUAGES else default


def _language_identifier():
    """py3langid's identifier with normalised probabilities, loaded once per process (under a second)."""
    global _identifier
    with _identifier_lock:
        if _identifier is None:
            from py3langid.langid import MODEL_FILE, LanguageIdentifier

            _identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        return _identifier
