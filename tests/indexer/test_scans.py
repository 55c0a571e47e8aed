"""Tests for indexer.loaders.scans: PNG, JPEG and multi-page TIFF scans read through OCR, and the bad ones."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from indexer.loaders import LoadError, load_path
from indexer.loaders.common import Rejected
from indexer.loaders.ocr import MAX_OCR_PIXELS, NO_TESSERACT, OcrSettings, configure_ocr
from indexer.loaders.scans import read_image
from retriever.documents import Document
from retriever.locations import location_at
from tests.indexer.test_ocr import (
    DPI,
    PARAGRAPH_WORDS,
    SCANS,
    default_ocr,
    found,
    render_page,
    render_paragraph,
    save_png,
)

__all__ = ["default_ocr"]  # the autouse fixture: default OCR settings around every test here


def read_one(path: Path) -> Document:
    (doc,) = read_image(path, str(path), path.stem)
    return doc


def test_png_scan_text_and_metadata(tmp_path):
    lines, words = SCANS[0]
    page = render_page(lines)
    path = save_png(page, tmp_path / "letter.png")
    doc = read_one(path)
    assert found(doc.text, words) >= len(words) - 1
    assert doc.id == str(path) and doc.title == "letter"
    assert doc.metadata["format"] == "image" and doc.metadata["image_format"] == "png"
    assert (doc.metadata["width"], doc.metadata["height"]) == page.size
    assert doc.metadata["source"] == str(path)
    assert doc.metadata["pages"] == 1 and doc.metadata["ocr_pages"] == 1
    assert 0 < doc.metadata["ocr_confidence"] <= 100
    assert "locations" not in doc.metadata  # one page: nothing to point at


def test_jpeg_scan_turned_and_noisy_is_read(tmp_path):
    lines, words = SCANS[2]
    path = tmp_path / "photo.jpg"
    render_page(lines, degrees=-1.5, noise=20.0).convert("RGB").save(path, quality=85, dpi=(DPI, DPI))
    doc = read_one(path)
    assert doc.metadata["image_format"] == "jpeg"
    assert found(doc.text, words) >= len(words) - 2


def test_a_jpeg_page_turned_clockwise_is_straightened_and_read(tmp_path):
    path = tmp_path / "turned.jpg"
    render_paragraph(degrees=-3.0, noise=12.0).convert("RGB").save(path, quality=80, dpi=(DPI, DPI))
    doc = read_one(path)
    assert found(doc.text, PARAGRAPH_WORDS) >= len(PARAGRAPH_WORDS) - 2
    assert doc.metadata["ocr_skew"] == pytest.approx(-3.0, abs=0.2)


def test_a_16_bit_scan_is_read(tmp_path):
    lines, words = SCANS[1]
    gray = 80 + np.asarray(render_page(lines), dtype=np.float64) * 0.6  # ink at 80, paper at 233, of 255
    deep = Image.fromarray((gray * 257).astype(np.uint16))  # every pixel over 255 in 16 bits
    path = tmp_path / "deep.png"
    deep.save(path, dpi=(DPI, DPI))
    assert Image.open(path).mode.startswith("I")
    assert found(read_one(path).text, words) >= len(words) - 1


def test_multipage_tiff_has_a_page_per_frame(tmp_path):
    images = [render_page(lines, degrees=1.0 * number) for number, (lines, _words) in enumerate(SCANS)]
    path = tmp_path / "fax.tif"
    images[0].save(path, save_all=True, append_images=images[1:], dpi=(DPI, DPI), compression="tiff_lzw")
    doc = read_one(path)
    assert doc.metadata["image_format"] == "tiff"
    assert doc.metadata["pages"] == doc.metadata["ocr_pages"] == 3
    assert doc.metadata["ocr_skew"] == pytest.approx(2.0, abs=0.2)  # the most turned frame's
    for page, (_lines, words) in enumerate(SCANS, start=1):
        word = next(word for word in words if word in doc.text.lower())
        assert location_at(doc.metadata, doc.text.lower().index(word)) == {"page": page}


def test_an_image_over_the_pixel_limit_is_refused_by_its_size_unread(tmp_path):
    path = tmp_path / "huge.tif"
    Image.new("1", (20_000, 20_000), 1).save(path, compression="group4")  # 400 Mpx, a few KB on disk
    with pytest.raises(Rejected) as raised:
        read_one(path)
    assert str(raised.value) == f"image is 20000 x 20000 pixels, over the {MAX_OCR_PIXELS:,} pixel limit"


def test_the_pixel_limit_is_a_setting(tmp_path):
    path = save_png(render_page(SCANS[0][0]), tmp_path / "scan.png")
    configure_ocr(OcrSettings(max_pixels=100_000))
    with pytest.raises(Rejected, match=r"^image is 1100 x 260 pixels, over the 100,000 pixel limit$"):
        read_one(path)


def test_a_frame_over_the_pixel_limit_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "mixed.tif"
    first = render_page(SCANS[0][0])
    first.save(path, save_all=True, append_images=[Image.new("L", (2_000, 1_000), 255)], dpi=(DPI, DPI))
    configure_ocr(OcrSettings(max_pixels=1_000_000))
    with pytest.raises(Rejected, match=r"^frame 2 is 2000 x 1000 pixels, over the 1,000,000 pixel limit$"):
        read_one(path)


@pytest.mark.parametrize("suffix", [".png", ".jpg", ".tif"])
def test_a_truncated_image_is_reported(tmp_path, suffix):
    whole = tmp_path / f"whole{suffix}"
    render_page(SCANS[1][0], noise=10.0).save(whole)
    cut = tmp_path / f"cut{suffix}"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    with pytest.raises(Rejected) as raised:
        read_one(cut)
    reason = str(raised.value)
    assert reason.startswith("truncated or corrupt image: "), reason
    assert "\n" not in reason


def test_a_file_that_is_no_image_is_reported(tmp_path):
    path = tmp_path / "notes.png"
    path.write_text("just some words, not a picture\n")
    with pytest.raises(Rejected, match=r"^not a PNG, JPEG or TIFF image"):
        read_one(path)


def test_another_image_format_is_reported(tmp_path):
    path = tmp_path / "anim.png"
    render_page(SCANS[0][0]).save(path, format="GIF")
    with pytest.raises(Rejected, match=r"^not a PNG, JPEG or TIFF image"):
        read_one(path)


def test_pillow_warnings_stay_off_the_terminal(tmp_path, recwarn):
    path = tmp_path / "wide.png"
    Image.new("1", (9_500, 9_500), 1).save(path, compress_level=1)  # over Pillow's own warning bound
    configure_ocr(OcrSettings(max_pixels=100_000_000))
    with pytest.raises(Rejected, match="^no text: OCR found none in the image$"):
        read_one(path)
    assert not [warning for warning in recwarn if "DecompressionBomb" in type(warning.message).__name__]


def test_loading_a_scan_without_tesseract_passes_it_over_in_one_line(tmp_path):
    path = save_png(render_page(SCANS[0][0]), tmp_path / "scan.png")
    configure_ocr(OcrSettings(tesseract=str(tmp_path / "no-such-tesseract")))
    assert list(load_path(path)) == [LoadError(str(path.resolve()), NO_TESSERACT, unread=True)]
    configure_ocr(None)
    (doc,) = load_path(path)
    assert doc.metadata["format"] == "image" and doc.metadata["ocr_pages"] == 1
