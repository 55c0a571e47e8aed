"""Scanned images (PNG, JPEG, TIFF) read through OCR: one document per file, a page per TIFF frame.

The image's header is read first and its size checked against
``OcrSettings.max_pixels`` before any pixel is decoded; each frame of a
multi-page TIFF is checked the same way before it is read. A truncated or
corrupt image, a file that is not a PNG, JPEG or TIFF image, and Pillow's
decompression-bomb guard all become ``Rejected`` with a one-line reason;
Pillow's warnings never reach the terminal.

Metadata: ``source``, ``format`` ("image"), ``image_format`` ("png", "jpeg",
"tiff"), ``width`` and ``height`` (of the first frame), ``pages`` (frames),
``ocr_pages``, ``ocr_empty_pages``, ``ocr_confidence`` and ``ocr_skew``
(see ``OcrRun.metadata``); a multi-page TIFF also has ``locations`` with a
``page`` per frame. The title is the file's stem.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from PIL import Image, JpegImagePlugin, PngImagePlugin, TiffImagePlugin, UnidentifiedImageError

from indexer.loaders.common import Rejected, error_line
from indexer.loaders.ocr import OcrRun, OcrSettings, check_pixels, ocr_settings
from retriever.documents import Document
from retriever.locations import LOCATIONS_KEY, LocatedText

IMAGE_FORMATS = {"PNG": "png", "JPEG": "jpeg", "MPO": "jpeg", "TIFF": "tiff"}  # Pillow's name -> ours

_OPENED_AS = ("PNG", "JPEG", "TIFF")  # Pillow opens multi-picture JPEGs as MPO through its JPEG plugin
_HEADER_READERS = (PngImagePlugin.PngImageFile, JpegImagePlugin.JpegImageFile, TiffImagePlugin.TiffImageFile)


def read_image(path: Path, source: str, stem: str) -> Iterator[Document]:
    """The one document of a scanned image file: its text read by OCR, a page per TIFF frame.

    Args:
        path: The image file (its size in bytes already checked by the caller).
        source: The document's id and ``metadata["source"]``.
        stem: The document's title.

    Raises:
        Rejected: the file is not a PNG, JPEG or TIFF image, is truncated or
            corrupt, has too many pixels or frames, OCR cannot run or passes its
            time bound, or OCR finds no text.
    """
    yield image_document(Path(path), source, stem)


def image_document(path: Path, source: str, stem: str, settings: OcrSettings | None = None) -> Document:
    """``read_image``'s document, with the OCR settings given (default: those in force, ``ocr.ocr_settings()``).

    Raises:
        Rejected: as ``read_image``.
    """
    settings = settings or ocr_settings()
    with _quiet_pillow(), _opened(path, settings) as image:
        frames = _frame_count(image)
        run = OcrRun(source, frames, settings)
        built = LocatedText()
        fields = {"image_format": IMAGE_FORMATS[image.format], "width": image.width, "height": image.height}
        for number in range(1, frames + 1):
            built.add(run.read(_frame(image, number, settings), number, dpi=_dpi(image)), page=number)
    if not built.parts:
        where = "the image" if frames == 1 else f"any of the {frames} frames"
        raise Rejected(f"no text: OCR found none in {where}")
    metadata: dict[str, Any] = {"source": source, "format": "image"} | fields | {"pages": frames} | run.metadata()
    if frames > 1:
        metadata[LOCATIONS_KEY] = built.locations()
    return Document(id=source, text=built.text, title=stem, metadata=metadata)


@contextmanager
def _quiet_pillow() -> Iterator[None]:
    """Pillow's warnings (decompression bombs, odd EXIF) kept from the terminal; sizes are checked here instead."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@contextmanager
def _opened(path: Path, settings: OcrSettings) -> Iterator[Image.Image]:
    """The image at ``path`` with only its header read, its size within ``settings.max_pixels``.

    Raises:
        Rejected: it cannot be opened, is not a PNG, JPEG or TIFF image, or has too many pixels.
    """
    try:
        image = Image.open(path, formats=_OPENED_AS)
    except Image.DecompressionBombError as exc:
        raise Rejected(_bomb_reason(path, exc, settings)) from None
    except UnidentifiedImageError:
        raise Rejected("not a PNG, JPEG or TIFF image (or too damaged to tell)") from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise Rejected(f"corrupt image: {error_line(exc)}") from None
    with image:
        if image.format not in IMAGE_FORMATS:
            raise Rejected(f"image format {image.format} is not read; supported: PNG, JPEG, TIFF")
        check_pixels(image.width, image.height, settings)
        yield image


def _bomb_reason(path: Path, exc: Exception, settings: OcrSettings) -> str:
    """The reason for an image Pillow refused as a decompression bomb, naming its size when its header says it."""
    for reader in _HEADER_READERS:
        try:
            with reader(str(path)) as header:
                width, height = header.size
        except Exception:  # noqa: BLE001 - not this format: try the next
            continue
        try:
            check_pixels(width, height, settings)
        except Rejected as refused:
            return str(refused)
    return f"image is over the pixel limit: {error_line(exc)}"


def _frame_count(image: Image.Image) -> int:
    """How many frames (pages) the image has: 1 except for a multi-page TIFF.

    Raises:
        Rejected: the frame chain is corrupt.
    """
    try:
        return int(getattr(image, "n_frames", 1))
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        raise Rejected(f"corrupt image: {error_line(exc)}") from None


def _frame(image: Image.Image, number: int, settings: OcrSettings) -> Image.Image:
    """Frame ``number`` (from 1) decoded, its size checked from its header before decoding.

    Raises:
        Rejected: the frame has too many pixels, or is truncated or corrupt.
    """
    try:
        image.seek(number - 1)
        check_pixels(image.width, image.height, settings, "image" if number == 1 else f"frame {number}")
        image.load()
    except Rejected:
        raise
    except Image.DecompressionBombError as exc:
        raise Rejected(f"frame {number} is over the pixel limit: {error_line(exc)}") from None
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        where = "" if number == 1 else f" (frame {number})"
        raise Rejected(f"truncated or corrupt image{where}: {error_line(exc)}") from None
    return image


def _dpi(image: Image.Image) -> int | None:
    """The resolution the image says it was scanned at, when plausible (50 to 2,400 dpi)."""
    dpi = image.info.get("dpi")
    try:
        value = round(float(dpi[0]))
    except (TypeError, ValueError, IndexError):
        return None
    return value if 50 <= value <= 2_400 else None
