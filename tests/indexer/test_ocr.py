"""Tests for indexer.loaders.ocr: settings, installed languages, missing Tesseract, bounds, confidence and progress.

Pages are real images: English (and German) sentences rendered by Pillow in
DejaVu Sans at 200 dpi, some turned a few degrees and speckled with noise,
then read by the installed Tesseract. ``render_page``, ``render_paragraph``
and ``SCANS`` serve test_scans.py and test_pdf.py too.
"""

from __future__ import annotations

import glob
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from indexer.loaders import ocr
from indexer.loaders.common import NotRead, Rejected
from indexer.loaders.ocr import (
    LANGUAGES_ENV,
    MAX_OCR_PIXELS,
    NO_TESSERACT,
    TESSERACT_ENV,
    OcrProgress,
    OcrSettings,
    check_ocr,
    configure_ocr,
    debian_package,
    ocr_settings,
    set_ocr_progress,
)
from indexer.loaders.scan_pages import (
    SPECKLED_SHARE,
    despeckle,
    estimate_skew,
    ink_map,
    read_share,
    speck_share,
    straighten,
    text_lines,
)
from indexer.loaders.scans import image_document
from retriever.errors import BadInputError

DPI = 200
FONTS = sorted(glob.glob("/usr/share/fonts/**/DejaVuSans.ttf", recursive=True))

# Each scan's lines, and the long words it holds (OCR may miss one or two).
SCANS = [
    (
        ["The archaeologists catalogued remarkable pottery", "fragments near the abandoned monastery."],
        ["archaeologists", "catalogued", "remarkable", "pottery", "fragments", "abandoned", "monastery"],
    ),
    (
        ["Meteorologists predicted violent thunderstorms", "throughout the countryside this afternoon."],
        ["meteorologists", "predicted", "violent", "thunderstorms", "throughout", "countryside", "afternoon"],
    ),
    (
        ["Photographers documented magnificent cathedrals", "and their medieval stained windows."],
        ["photographers", "documented", "magnificent", "cathedrals", "medieval", "stained", "windows"],
    ),
]
GERMAN = (
    ["Der Bürgermeister eröffnete die Prüfung", "der größten Brücken über den Fluss."],
    ["bürgermeister", "eröffnete", "prüfung", "größten", "brücken"],
)
# A paragraph of long, distinctive words: a page of it turned 3 degrees clockwise loses most of its lines to
# Tesseract's automatic page segmentation unless it is straightened first.
PARAGRAPH = (
    "The archaeologists catalogued remarkable pottery fragments near the abandoned monastery while "
    "meteorologists predicted violent thunderstorms throughout the countryside. Photographers documented "
    "magnificent cathedrals and their medieval stained windows, and the librarians restored fragile "
    "manuscripts describing ancient navigation across treacherous mountain passes toward distant harbours."
)
PARAGRAPH_WORDS = sorted({word.strip(".,").lower() for word in PARAGRAPH.split() if len(word.strip(".,")) > 8})


def render_paragraph(*, degrees: float = 0.0, noise: float = 0.0) -> Image.Image:
    """``PARAGRAPH`` as a 6.5 inch wide scan at ``DPI`` in lines of 60 characters, turned and speckled as
    ``render_page``'s (the page grows to keep its corners when turned)."""
    if not FONTS:
        pytest.skip("no DejaVuSans.ttf under /usr/share/fonts to render scans with")
    font = ImageFont.truetype(FONTS[0], 28)
    lines = textwrap.wrap(PARAGRAPH, 60)
    image = Image.new("L", (1300, 200 + 48 * len(lines)), 255)
    draw = ImageDraw.Draw(image)
    for number, line in enumerate(lines):
        draw.text((80, 100 + 48 * number), line, font=font, fill=0)
    if degrees:
        image = image.rotate(degrees, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=255)
    if noise:
        image = _speckled(image, noise)
    image.info["dpi"] = (DPI, DPI)
    return image


def _speckled(image: Image.Image, noise: float, seed: int = 7) -> Image.Image:
    """``image`` with Gaussian grain of deviation ``noise`` and 4% of its pixels turned black or white."""
    rng = np.random.default_rng(seed)
    pixels = np.asarray(image, dtype=np.float32) + rng.normal(0, noise, (image.height, image.width))
    speckles = rng.random(pixels.shape)
    pixels[speckles < 0.02] = 0
    pixels[speckles > 0.98] = 255
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def render_page(lines: list[str], *, degrees: float = 0.0, noise: float = 0.0, seed: int = 7) -> Image.Image:
    """A grayscale 5.5 x 1.3 inch scan at ``DPI`` of ``lines``, turned ``degrees`` and speckled when ``noise`` > 0.

    ``noise`` is the standard deviation of Gaussian grain (0-255 scale); 4% of
    the pixels also turn black or white at random.
    """
    if not FONTS:
        pytest.skip("no DejaVuSans.ttf under /usr/share/fonts to render scans with")
    font = ImageFont.truetype(FONTS[0], 28)
    image = Image.new("L", (1100, 260), 255)
    draw = ImageDraw.Draw(image)
    for number, line in enumerate(lines):
        draw.text((50, 50 + 50 * number), line, font=font, fill=0)
    if degrees:
        image = image.rotate(degrees, resample=Image.Resampling.BICUBIC, fillcolor=255)
    if noise:
        image = _speckled(image, noise, seed)
    image.info["dpi"] = (DPI, DPI)
    return image


def found(text: str, words: list[str]) -> int:
    """How many of ``words`` appear in ``text``, ignoring case."""
    lowered = text.lower()
    return sum(word in lowered for word in words)


def save_png(image: Image.Image, path: Path) -> Path:
    image.save(path, dpi=(DPI, DPI))
    return path


@pytest.fixture(autouse=True)
def default_ocr(monkeypatch):
    """Each test starts from the default settings and no progress hook, and leaves them so."""
    monkeypatch.delenv(LANGUAGES_ENV, raising=False)
    monkeypatch.delenv(TESSERACT_ENV, raising=False)
    settings, hook = configure_ocr(None), set_ocr_progress(None)
    yield
    configure_ocr(settings)
    set_ocr_progress(hook)


# --- settings --------------------------------------------------------------------


def test_languages_are_parsed_from_a_string():
    assert OcrSettings(languages="eng+deu").languages == ("eng", "deu")
    assert OcrSettings(languages="eng, fra").language == "eng+fra"
    assert OcrSettings().languages == ("eng",)


@pytest.mark.parametrize(
    "values",
    [
        {"languages": ""},
        {"languages": "eng;rm -rf"},
        {"languages": ()},
        {"max_pages": 0},
        {"max_seconds": -1.0},
        {"max_pixels": True},
        {"dpi": "300"},
        {"tesseract": " "},
    ],
)
def test_bad_settings_are_refused_by_name(values):
    with pytest.raises(BadInputError) as raised:
        OcrSettings(**values)
    assert "\n" not in str(raised.value)
    if "languages" not in values and "tesseract" not in values:
        assert next(iter(values)) in str(raised.value)


def test_settings_come_from_the_environment_until_configured(monkeypatch, tmp_path):
    monkeypatch.setenv(LANGUAGES_ENV, "deu+eng")
    monkeypatch.setenv(TESSERACT_ENV, str(tmp_path / "tess"))
    assert ocr_settings() == OcrSettings(languages=("deu", "eng"), tesseract=str(tmp_path / "tess"))
    configure_ocr(OcrSettings(languages="fra"))
    assert ocr_settings().languages == ("fra",)
    assert configure_ocr(None) == OcrSettings(languages="fra")
    assert ocr_settings().languages == ("deu", "eng")


def test_a_bad_environment_value_names_the_variable():
    with pytest.raises(BadInputError, match=LANGUAGES_ENV):
        OcrSettings.from_env({LANGUAGES_ENV: "eng/../../x"})


# --- what must be installed ------------------------------------------------------------


def test_installed_languages_pass_the_check():
    check_ocr(OcrSettings(languages="eng+deu+fra"))


def test_a_missing_language_names_its_debian_package(tmp_path):
    language = "chi_sim"
    listed = subprocess.run(["tesseract", "--list-langs"], capture_output=True, text=True, check=True).stdout
    if language in listed.split():
        pytest.skip("tesseract-ocr-chi-sim is installed here")
    with pytest.raises(BadInputError) as raised:
        check_ocr(OcrSettings(languages=("eng", language)))
    expected = "OCR language 'chi_sim' is not installed: install the Debian package tesseract-ocr-chi-sim"
    assert str(raised.value) == expected
    configure_ocr(OcrSettings(languages=language))
    page = save_png(render_page(SCANS[0][0]), tmp_path / "scan.png")
    with pytest.raises(NotRead, match="tesseract-ocr-chi-sim"):
        image_document(page, "scan", "scan")


def test_debian_package_names():
    assert debian_package("deu") == "tesseract-ocr-deu"
    assert debian_package("chi_tra") == "tesseract-ocr-chi-tra"


def test_missing_tesseract_is_one_line_naming_the_package(tmp_path):
    missing = OcrSettings(tesseract=str(tmp_path / "bin" / "tesseract"))
    with pytest.raises(BadInputError) as raised:
        check_ocr(missing)
    assert str(raised.value) == NO_TESSERACT == "OCR needs Tesseract: install the Debian package tesseract-ocr"
    page = save_png(render_page(SCANS[0][0]), tmp_path / "scan.png")
    with pytest.raises(NotRead) as rejected:  # no fault of the file: passed over, kept by prune
        image_document(page, "scan", "scan", missing)
    assert str(rejected.value) == NO_TESSERACT


# --- reading ---------------------------------------------------------------------


def test_a_clean_scan_is_read_with_high_confidence(tmp_path):
    lines, words = SCANS[0]
    doc = image_document(save_png(render_page(lines), tmp_path / "clean.png"), "clean", "clean")
    assert found(doc.text, words) >= len(words) - 1
    assert doc.metadata["ocr_pages"] == 1 and doc.metadata["ocr_empty_pages"] == 0
    assert 80 <= doc.metadata["ocr_confidence"] <= 100
    assert doc.metadata["ocr_skew"] == 0.0


def test_a_noisy_turned_scan_is_read_with_lower_confidence(tmp_path):
    lines, words = SCANS[1]
    clean = image_document(save_png(render_page(lines), tmp_path / "clean.png"), "clean", "clean")
    noisy_page = render_page(lines, degrees=2.0, noise=35.0)
    noisy = image_document(save_png(noisy_page, tmp_path / "noisy.png"), "noisy", "noisy")
    assert found(noisy.text, words) >= len(words) - 3
    assert 0 < noisy.metadata["ocr_confidence"] < clean.metadata["ocr_confidence"] - 5


def test_other_installed_languages_are_used(tmp_path):
    lines, words = GERMAN
    page = save_png(render_page(lines), tmp_path / "brief.png")
    configure_ocr(OcrSettings(languages="deu"))
    assert found(image_document(page, "brief", "brief").text, words) >= len(words) - 1


def test_a_blank_scan_has_no_text(tmp_path):
    page = save_png(Image.new("L", (800, 300), 255), tmp_path / "blank.png")
    with pytest.raises(Rejected, match="^no text: OCR found none in the image$"):
        image_document(page, "blank", "blank")


# --- specks and straightening --------------------------------------------------------


def test_speckled_pages_are_told_from_clean_ones():
    assert speck_share(render_paragraph()) <= SPECKLED_SHARE < speck_share(render_paragraph(noise=15.0))
    assert speck_share(render_paragraph(degrees=2.0)) <= SPECKLED_SHARE
    assert speck_share(Image.new("L", (300, 200), 0)) == 0.0


def test_a_coarse_speckled_page_is_enlarged_before_it_is_filtered():
    noisy = render_paragraph(noise=15.0)
    cleaned, dpi = despeckle(noisy, 150, MAX_OCR_PIXELS)
    assert cleaned.size == (2 * noisy.width, 2 * noisy.height) and dpi == 300
    assert speck_share(cleaned) <= SPECKLED_SHARE
    fine, dpi = despeckle(noisy, 300, MAX_OCR_PIXELS)
    assert fine.size == noisy.size and dpi == 300 and speck_share(fine) <= SPECKLED_SHARE
    unknown, dpi = despeckle(noisy, None, MAX_OCR_PIXELS)
    assert unknown.size == noisy.size and dpi is None
    tight, dpi = despeckle(noisy, 150, 3 * noisy.width * noisy.height)  # no room to enlarge it
    assert tight.size == noisy.size and dpi == 150
    clean = render_paragraph()
    assert despeckle(clean, 150, MAX_OCR_PIXELS)[0] is clean


def test_a_coarse_speckled_scan_is_read(tmp_path):
    path = tmp_path / "coarse.png"
    render_paragraph(noise=20.0).save(path, dpi=(150, 150))
    doc = image_document(path, "coarse", "coarse")
    assert found(doc.text, PARAGRAPH_WORDS) >= len(PARAGRAPH_WORDS) - 2


@pytest.mark.parametrize("degrees", [3.0, -3.0])
def test_the_skew_of_a_turned_page_is_found_with_its_sign(degrees):
    assert estimate_skew(render_paragraph(degrees=degrees)) == pytest.approx(degrees, abs=0.2)


def test_the_skew_of_a_noisy_turned_page_is_found():
    assert estimate_skew(render_paragraph(degrees=-2.0, noise=25.0)) == pytest.approx(-2.0, abs=0.2)


def test_a_straight_page_and_a_blank_one_have_no_skew():
    assert estimate_skew(render_paragraph()) == 0.0
    assert estimate_skew(Image.new("L", (900, 600), 255)) == 0.0


def test_straightening_levels_the_text_lines():
    lines = len(textwrap.wrap(PARAGRAPH, 60))
    turned = render_paragraph(degrees=-3.0)
    straight = straighten(turned, estimate_skew(turned))
    assert straight.width > turned.width and straight.height > turned.height  # corners kept
    assert len(text_lines(ink_map(straight))) == lines
    assert len(text_lines(ink_map(turned))) < lines  # turned, the lines' rows run together
    assert straighten(turned, 0.1) is turned  # too slight a turn to undo


def test_the_share_read_is_the_ink_of_the_text_lines_inside_word_boxes():
    page = render_paragraph()
    ink = ink_map(page)
    lines = text_lines(ink)
    assert read_share(ink, lines, [(0, 0, page.width, page.height)]) == 1.0
    assert read_share(ink, lines, []) == 0.0
    assert 0.3 < read_share(ink, lines, [(0, 0, page.width, page.height // 2)]) < 0.7
    assert read_share(ink, [], []) == 1.0  # no text lines: nothing left unread


@pytest.mark.parametrize("degrees", [3.0, -3.0])
def test_a_page_turned_3_degrees_is_straightened_and_read(tmp_path, degrees):
    page = save_png(render_paragraph(degrees=degrees), tmp_path / "turned.png")
    doc = image_document(page, "turned", "turned")
    assert found(doc.text, PARAGRAPH_WORDS) >= len(PARAGRAPH_WORDS) - 2
    assert doc.metadata["ocr_skew"] == pytest.approx(degrees, abs=0.2)
    assert doc.metadata["ocr_confidence"] >= 80


def test_a_page_whose_skew_is_missed_is_read_again_as_one_block(tmp_path, monkeypatch):
    monkeypatch.setattr(ocr, "estimate_skew", lambda gray: 0.0)  # as if the turn went unseen
    page = save_png(render_paragraph(degrees=-3.0), tmp_path / "turned.png")
    doc = image_document(page, "turned", "turned")
    assert found(doc.text, PARAGRAPH_WORDS) >= len(PARAGRAPH_WORDS) - 2
    assert doc.metadata["ocr_skew"] == 0.0


def test_a_page_mostly_unread_does_not_look_confident(tmp_path, monkeypatch):
    monkeypatch.setattr(ocr, "estimate_skew", lambda gray: 0.0)
    monkeypatch.setattr(ocr, "RETRY_BELOW", 0.0)  # no second reading
    page = save_png(render_paragraph(degrees=-3.0), tmp_path / "turned.png")
    doc = image_document(page, "turned", "turned")
    assert found(doc.text, PARAGRAPH_WORDS) <= len(PARAGRAPH_WORDS) // 2  # most lines lost to the layout
    assert doc.metadata["ocr_empty_pages"] == 0
    assert doc.metadata["ocr_confidence"] < 50  # the words it did read are each confident


# --- bounds and progress -------------------------------------------------------------


def _tiff(tmp_path: Path, pages: int) -> Path:
    images = [render_page(lines) for lines, _words in SCANS[:pages]]
    path = tmp_path / "pages.tiff"
    images[0].save(path, save_all=True, append_images=images[1:], dpi=(DPI, DPI), compression="tiff_lzw")
    return path


def test_pages_over_the_ocr_page_limit_are_refused_before_any_is_read(tmp_path):
    pages = []
    set_ocr_progress(pages.append)
    with pytest.raises(Rejected) as raised:
        image_document(_tiff(tmp_path, 2), "pages", "pages", OcrSettings(max_pages=1))
    assert str(raised.value) == "2 pages need OCR, over the 1 page OCR limit"
    assert pages == []


def test_ocr_stops_at_its_time_limit_naming_the_page(tmp_path):
    with pytest.raises(Rejected) as raised:
        image_document(_tiff(tmp_path, 2), "pages", "pages", OcrSettings(max_seconds=1e-9))
    assert str(raised.value) == "OCR took over 1e-09 s (stopped at page 1; 0 of 2 pages read)"


def test_progress_is_reported_after_every_page(tmp_path):
    seen: list[OcrProgress] = []
    set_ocr_progress(seen.append)
    image_document(_tiff(tmp_path, 2), "pages", "pages")
    assert [(event.source, event.page, event.done, event.total) for event in seen] == [
        ("pages", 1, 1, 2),
        ("pages", 2, 2, 2),
    ]
    assert seen[1].seconds >= seen[0].seconds > 0
    assert seen[1].pages_per_second > 0
