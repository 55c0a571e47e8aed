"""Text from page images through Tesseract: the settings, the bounds, word confidence and progress.

A loader that meets page images (a scanned PDF page, a PNG, a TIFF frame)
opens one ``OcrRun`` per document and hands it the images in page order.
The run checks once that Tesseract and the settings' languages are
installed, makes each page ready (``scan_pages``: a speckled page
median-filtered, a turned page straightened), reads it with ``pytesseract``
(again as one block of text when the first reading leaves most of the
page's text lines unread), keeps the confidence of every word it read and
the share of the page's text it covers, reports each page to the progress
hook, and stops the
document with ``Rejected`` when a bound is passed (``NotRead``, a kind of
``Rejected``, when Tesseract or a language is not installed):

- pages: at most ``OcrSettings.max_pages`` pages to read in one document
  (default ``MAX_OCR_PAGES``, 500), refused before any is read;
- time: at most ``OcrSettings.max_seconds`` for one document's OCR, rendering
  included (default ``MAX_OCR_SECONDS``); the document is refused with the
  page reached, never indexed in part;
- pixels: at most ``OcrSettings.max_pixels`` per image (default
  ``MAX_OCR_PIXELS``), checked from the image's header before it is decoded
  (``check_pixels``); a PDF page is rendered at the resolution that fits,
  and a coarse speckled page is enlarged for filtering only within it.

Settings are process-wide: ``configure_ocr`` sets them, and until it is
called they come from the environment (``OcrSettings.from_env``:
``SEMSEARCH_OCR_LANG``, ``SEMSEARCH_TESSERACT``). ``check_ocr`` checks them
up front and raises ``BadInputError`` with the same one-line reasons.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import numpy as np
import pytesseract
from PIL import Image

from indexer.loaders.common import NotRead, Rejected, error_line
from indexer.loaders.scan_pages import despeckle, estimate_skew, ink_map, read_share, straighten, text_lines
from retriever.errors import BadInputError

LANGUAGES_ENV = "SEMSEARCH_OCR_LANG"
TESSERACT_ENV = "SEMSEARCH_TESSERACT"
DEFAULT_LANGUAGES = ("eng",)
OCR_DPI = 300
MAX_OCR_PAGES = 500
MAX_OCR_SECONDS = 1_800.0
MAX_OCR_PIXELS = 80_000_000  # an A3 page scanned at 600 dpi fits; Pillow's own bomb bound is above it
TESSERACT_PACKAGE = "tesseract-ocr"
NO_TESSERACT = f"OCR needs Tesseract: install the Debian package {TESSERACT_PACKAGE}"
AUTOMATIC_LAYOUT = 3  # Tesseract's page segmentation modes: find the blocks and columns
SINGLE_BLOCK = 6  # read the page as one block of text
RETRY_BELOW = 0.6  # a first reading covering less of the text lines' ink is tried again as one block
MIN_SHARE = 0.05  # the least share read that unread words are estimated from

_LANGUAGE = re.compile(r"[A-Za-z0-9_]+(/[A-Za-z0-9_]+)?")
_LANGUAGE_SEPARATORS = re.compile(r"[+,\s]+")


@dataclass(frozen=True)
class OcrSettings:
    """How scans are read: Tesseract's languages and binary, the render resolution, and the bounds.

    Attributes:
        languages: Tesseract language codes tried together (default ``("eng",)``);
            a string such as ``"eng+deu"`` is split on ``+``, commas and spaces.
            Each needs its traineddata installed (Debian: ``tesseract-ocr-<code>``).
        tesseract: The Tesseract binary, a name on ``PATH`` or a path
            (default ``"tesseract"``).
        dpi: Resolution a PDF page is rendered at for OCR when it holds no
            scanned image whose own resolution to follow (default 300); a page
            that would pass ``max_pixels`` is rendered at the resolution that fits.
        max_pages: Most pages OCR'd in one document (default 500).
        max_seconds: Most seconds of OCR, rendering included, for one document.
        max_pixels: Most pixels (width x height) of one image or rendered page.

    Raises:
        BadInputError: a language code is malformed, or a number is not positive.
    """

    languages: tuple[str, ...] | str = DEFAULT_LANGUAGES
    tesseract: str = "tesseract"
    dpi: int = OCR_DPI
    max_pages: int = MAX_OCR_PAGES
    max_seconds: float = MAX_OCR_SECONDS
    max_pixels: int = MAX_OCR_PIXELS

    def __post_init__(self) -> None:
        languages = self.languages
        if isinstance(languages, str):
            languages = tuple(code for code in _LANGUAGE_SEPARATORS.split(languages) if code)
        languages = tuple(languages)
        if not languages or not all(isinstance(code, str) and _LANGUAGE.fullmatch(code) for code in languages):
            raise BadInputError(f"OCR languages must be Tesseract codes such as 'eng' or 'eng+deu', not {languages!r}")
        object.__setattr__(self, "languages", languages)
        if not isinstance(self.tesseract, str) or not self.tesseract.strip():
            raise BadInputError("the Tesseract binary must be a non-empty name or path")
        for name in ("dpi", "max_pages", "max_seconds", "max_pixels"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise BadInputError(f"OCR setting {name} must be a positive number, not {value!r}")

    @property
    def language(self) -> str:
        """The languages as Tesseract's ``-l`` argument, e.g. ``"eng+deu"``."""
        return "+".join(self.languages)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> OcrSettings:
        """Settings from ``SEMSEARCH_OCR_LANG`` (e.g. ``eng+deu``) and ``SEMSEARCH_TESSERACT``; defaults elsewhere.

        Raises:
            BadInputError: a variable's value is unusable (the message names it).
        """
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        if environ.get(LANGUAGES_ENV, "").strip():
            values["languages"] = environ[LANGUAGES_ENV]
        if environ.get(TESSERACT_ENV, "").strip():
            values["tesseract"] = environ[TESSERACT_ENV].strip()
        try:
            return cls(**values)
        except BadInputError as exc:
            raise BadInputError(f"{LANGUAGES_ENV}/{TESSERACT_ENV}: {exc}") from None


@dataclass(frozen=True)
class OcrProgress:
    """One page of a document's OCR done, as the progress hook sees it.

    Attributes:
        source: The document's source (its file's path).
        page: The page just read (from 1, the page number in the document).
        done: Pages of this document read so far, ``page`` included.
        total: Pages of this document to read.
        seconds: Seconds since this document's OCR began.
    """

    source: str
    page: int
    done: int
    total: int
    seconds: float

    @property
    def pages_per_second(self) -> float:
        """This document's pages read per second so far (0.0 before any time has passed)."""
        return self.done / self.seconds if self.seconds > 0 else 0.0


ProgressHook = Callable[[OcrProgress], None]

_state: dict[str, Any] = {"settings": None, "progress": None}


def configure_ocr(settings: OcrSettings | None) -> OcrSettings | None:
    """Use ``settings`` for every scan read in this process from now on; ``None`` goes back to the environment's.

    Returns:
        The settings given before (``None`` when they came from the environment),
        so a caller can put them back.
    """
    if settings is not None and not isinstance(settings, OcrSettings):
        raise BadInputError(f"OCR settings must be OcrSettings, not {type(settings).__name__}")
    previous, _state["settings"] = _state["settings"], settings
    return previous


def ocr_settings() -> OcrSettings:
    """The settings in force: those given to ``configure_ocr``, else ``OcrSettings.from_env()``."""
    return _state["settings"] or OcrSettings.from_env()


def set_ocr_progress(hook: ProgressHook | None) -> ProgressHook | None:
    """Call ``hook(OcrProgress)`` after every page OCR'd in this process (``None``: no calls).

    Returns:
        The hook set before, so a caller can put it back.
    """
    previous, _state["progress"] = _state["progress"], hook
    return previous


def check_ocr(settings: OcrSettings | None = None) -> None:
    """Check that Tesseract and every language of ``settings`` (default: those in force) are installed.

    Raises:
        BadInputError: ``NO_TESSERACT``, or a missing language naming its Debian package.
    """
    try:
        _require(settings or ocr_settings())
    except Rejected as exc:
        raise BadInputError(str(exc)) from None


def debian_package(language: str) -> str:
    """The Debian package holding a Tesseract language, e.g. ``chi_sim`` -> ``tesseract-ocr-chi-sim``."""
    return f"{TESSERACT_PACKAGE}-{language.lower().replace('_', '-').replace('/', '-')}"


def check_pixels(width: int, height: int, settings: OcrSettings, what: str = "image") -> None:
    """Refuse an image over ``settings.max_pixels``, naming its size.

    Raises:
        Rejected: e.g. "image is 20000 x 20000 pixels, over the 80,000,000 pixel limit".
    """
    if width * height > settings.max_pixels:
        raise Rejected(f"{what} is {width} x {height} pixels, over the {settings.max_pixels:,} pixel limit")


def _require(settings: OcrSettings) -> None:
    """Raise ``NotRead`` unless the settings' Tesseract runs and has every language (no fault of the file)."""
    installed = _installed_languages(settings.tesseract)
    for language in settings.languages:
        if language not in installed:
            raise NotRead(
                f"OCR language {language!r} is not installed: install the Debian package {debian_package(language)}"
            )


@lru_cache(maxsize=8)
def _installed_languages(tesseract: str) -> frozenset[str]:
    """The languages ``tesseract --list-langs`` names (cached per binary; a failure is not cached).

    Raises:
        NotRead: ``NO_TESSERACT`` when the binary cannot be run.
    """
    pytesseract.pytesseract.tesseract_cmd = tesseract
    try:
        return frozenset(pytesseract.get_languages())
    except (pytesseract.TesseractNotFoundError, OSError):
        raise NotRead(NO_TESSERACT) from None


@dataclass
class _Tally:
    """What one document's OCR has read so far."""

    done: int = 0
    read: int = 0
    empty: int = 0
    words: int = 0
    unread_words: float = 0.0
    confidence_sum: float = 0.0
    skew: float = 0.0
    started: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class _Reading:
    """One Tesseract pass over a page: its text, each word's confidence and box, and the share of its lines read."""

    text: str
    confidences: list[float]
    boxes: list[tuple[int, int, int, int]]
    share: float = 1.0

    @property
    def weight(self) -> float:
        """Words read times their mean confidence: how two passes over one page are compared."""
        return sum(self.confidences)


class OcrRun:
    """One document's OCR: its pages straightened and read in order, within the settings' bounds.

    Each page is straightened first: its skew is found (``scan_pages.estimate_skew``,
    up to ``MAX_SKEW_DEGREES`` either way) and the page turned back when it
    is ``MIN_TURN_DEGREES`` or more. Tesseract then reads it with automatic
    page segmentation (``--psm 3``); when that reading covers under
    ``RETRY_BELOW`` of the ink of the page's text lines, the page is read
    again as one block of text (``--psm 6``) and the reading with more words
    times confidence is kept.

    ``read`` raises ``NotRead`` at the first page that is not blank when
    Tesseract is missing (``NO_TESSERACT``) or a language is not installed:
    no fault of the file, so it is passed over, not failed. Blank pages need
    no Tesseract.

    Args:
        source: The document's source, for the progress hook.
        total: Pages this document may hand to ``read``.
        settings: Default: those in force (``ocr_settings()``).

    Raises:
        Rejected: ``total`` is over ``settings.max_pages``.
    """

    def __init__(self, source: str, total: int, settings: OcrSettings | None = None) -> None:
        self.settings = settings or ocr_settings()
        if total > self.settings.max_pages:
            raise Rejected(f"{total} pages need OCR, over the {self.settings.max_pages} page OCR limit")
        self.source = source
        self.total = total
        self._tally = _Tally()

    def check_time(self, page: int) -> float:
        """The seconds left for this document's OCR.

        Raises:
            Rejected: none are left (the reason names ``page``, the page reached).
        """
        left = self.settings.max_seconds - (time.monotonic() - self._tally.started)
        if left <= 0:
            raise Rejected(
                f"OCR took over {self.settings.max_seconds:g} s (stopped at page {page}; "
                f"{self._tally.done} of {self.total} pages read)"
            )
        return left

    def read(self, image: Image.Image, page: int, dpi: int | None = None) -> str:
        """The text Tesseract reads in ``image``, page ``page`` of the document; "" for a blank page.

        A page of one flat colour is not given to Tesseract and not counted in
        ``ocr_pages``. Lines are joined by newlines, paragraphs by blank lines.

        Args:
            image: The page, any Pillow mode; transparency is laid on white.
            page: Its page number in the document, from 1.
            dpi: Its resolution when known (rendered PDF pages, images that say it).

        Raises:
            Rejected: the time bound is passed, or Tesseract fails.
            NotRead: Tesseract or a language is not installed.
        """
        self.check_time(page)
        gray = _gray(image)
        text = ""
        if not _is_blank(gray):
            _require(self.settings)
            text = self._read_straightened(gray, page, dpi)
        self._tally.done += 1
        hook = _state["progress"]
        if hook is not None:
            hook(OcrProgress(self.source, page, self._tally.done, self.total, time.monotonic() - self._tally.started))
        return text

    def metadata(self) -> dict[str, Any]:
        """What OCR found in this document; ``{}`` when no page went to Tesseract.

        - ``ocr_pages``: pages given to Tesseract;
        - ``ocr_empty_pages``: of those, pages where it read no word;
        - ``ocr_confidence``: the mean confidence (0-100) of the words read,
          the words of text lines left unread counted at 0 (their number
          estimated from the share of the lines' ink the words cover); 0.0
          when no word was read;
        - ``ocr_skew``: the largest skew found on a page, in degrees, positive
          for a page turned counter-clockwise (0.0: every page straight).
        """
        tally = self._tally
        if not tally.read:
            return {}
        counted = tally.words + tally.unread_words
        confidence = round(tally.confidence_sum / counted, 1) if tally.words else 0.0
        return {
            "ocr_pages": tally.read,
            "ocr_empty_pages": tally.empty,
            "ocr_confidence": confidence,
            "ocr_skew": round(tally.skew, 2),
        }

    def _read_straightened(self, gray: Image.Image, page: int, dpi: int | None) -> str:
        """One page straightened and read (again as one block when the first reading misses lines); tallied."""
        gray, dpi = despeckle(gray, dpi, self.settings.max_pixels)
        skew = estimate_skew(gray)
        straight = straighten(gray, skew)
        ink = ink_map(straight)
        lines = text_lines(ink)
        reading = self._tesseract(straight, page, dpi, AUTOMATIC_LAYOUT)
        reading = replace(reading, share=read_share(ink, lines, reading.boxes))
        if reading.share < RETRY_BELOW:
            block = self._tesseract(straight, page, dpi, SINGLE_BLOCK)
            block = replace(block, share=read_share(ink, lines, block.boxes))
            if block.weight > reading.weight:
                reading = block
        tally = self._tally
        tally.read += 1
        tally.empty += not reading.text
        tally.words += len(reading.confidences)
        tally.confidence_sum += reading.weight
        tally.unread_words += len(reading.confidences) * (1.0 - reading.share) / max(reading.share, MIN_SHARE)
        if abs(skew) > abs(tally.skew):
            tally.skew = skew
        return reading.text

    def _tesseract(self, gray: Image.Image, page: int, dpi: int | None, psm: int) -> _Reading:
        """One Tesseract pass over a page with page segmentation mode ``psm``, within the time left."""
        seconds = self.check_time(page)
        pytesseract.pytesseract.tesseract_cmd = self.settings.tesseract
        config = f"--psm {psm} --dpi {int(dpi)}" if dpi else f"--psm {psm}"
        try:
            data = pytesseract.image_to_data(
                gray, lang=self.settings.language, config=config, timeout=seconds, output_type=pytesseract.Output.DICT
            )
        except pytesseract.TesseractNotFoundError:
            raise NotRead(NO_TESSERACT) from None
        except pytesseract.TesseractError as exc:
            raise Rejected(f"Tesseract failed on page {page}: {error_line(Exception(str(exc.message)))}") from None
        except RuntimeError:  # pytesseract's timeout
            self.check_time(page)
            raise Rejected(f"OCR of page {page} was stopped at the {self.settings.max_seconds:g} s limit") from None
        return _reading_of(data)


def _gray(image: Image.Image) -> Image.Image:
    """An 8-bit grayscale copy of ``image`` for Tesseract; transparent parts become white.

    Deep images (16-bit, integer or float pixels) are scaled to 0-255: by
    1/257 when any pixel is over 255, else as they are.
    """
    if image.mode.startswith("I") or image.mode == "F":
        pixels = np.asarray(image, dtype=np.float64)
        scale = 255.0 / 65535.0 if pixels.size and pixels.max() > 255 else 1.0
        return Image.fromarray(np.clip(pixels * scale, 0, 255).astype(np.uint8))
    if "A" in image.getbands() or image.mode in ("P", "PA"):
        image = image.convert("RGBA")
        background = Image.new("RGBA", image.size, (255, 255, 255, 255))
        image = Image.alpha_composite(background, image)
    return image.convert("L")


def _is_blank(gray: Image.Image) -> bool:
    """Whether a grayscale image is one flat colour."""
    low, high = gray.getextrema()
    return low == high


def _reading_of(data: dict[str, list[Any]]) -> _Reading:
    """Tesseract's word table as a reading: its text (lines by newlines, paragraphs by blank lines), and each
    word's confidence and box ``(left, top, width, height)``."""
    paragraphs: dict[tuple[int, int], dict[int, list[str]]] = {}
    confidences: list[float] = []
    boxes: list[tuple[int, int, int, int]] = []
    for index, word in enumerate(data["text"]):
        confidence = float(data["conf"][index])
        word = str(word).strip()
        if confidence < 0 or not word:
            continue
        confidences.append(confidence)
        boxes.append(
            (int(data["left"][index]), int(data["top"][index]), int(data["width"][index]), int(data["height"][index]))
        )
        paragraph = paragraphs.setdefault((int(data["block_num"][index]), int(data["par_num"][index])), {})
        paragraph.setdefault(int(data["line_num"][index]), []).append(word)
    text = "\n\n".join("\n".join(" ".join(words) for words in lines.values()) for lines in paragraphs.values())
    return _Reading(text, confidences, boxes)
