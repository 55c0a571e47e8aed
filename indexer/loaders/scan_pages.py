"""Scanned pages made ready for Tesseract, and its readings judged: specks, skew, text lines, the share read.

Skew and lines are measured on a small binarised copy of the page
(``ink_map``): the page scaled down to ``WORK_WIDTH`` pixels wide (never
up), thresholded by Otsu's method, with isolated dark pixels dropped.

- ``despeckle`` cleans a speckled page (over ``SPECKLED_SHARE`` of its pixels
  dark dots with no dark neighbour): a 3 x 3 median filter, the page first
  enlarged twice when it is under ``COARSE_DPI`` (filtering a coarse page as
  it is eats the thin strokes of its letters).
- ``estimate_skew`` finds the angle the text lines run at, by a projection
  profile search over ``MAX_SKEW_DEGREES`` either way: the angle at which the
  ink's rows are most sharply peaked. Angles are in Pillow's sense: positive
  for a page turned counter-clockwise, so ``straighten(page, estimate_skew(page))``
  turns it back.
- ``text_lines`` finds the bands of rows holding text on a straight page,
  leaving out bands far taller or shorter than the page's usual line
  (pictures, slivers of accents).
- ``read_share`` says how much of the ink in those bands lies inside the
  boxes of the words a reading found: near 1 when every line was read, low
  when whole paragraphs were missed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageFilter

WORK_WIDTH = 1000  # pixels across of the copy that skew and lines are measured on
MAX_SKEW_DEGREES = 5.0  # searched either way
MIN_TURN_DEGREES = 0.3  # a page turned less is read as it is
MAX_SKEW_POINTS = 60_000  # ink pixels sampled for the skew search
MIN_SKEW_GAIN = 1.02  # the best angle's profile must beat the unturned one's by this factor
TALL_LINE_FACTOR = 3.0  # a band this many times taller or shorter than the median band is not a text line
BOX_MARGIN = 1  # pixels of the work copy added around each word box
SPECKLED_SHARE = 0.001  # a page with more of its pixels isolated dark dots is speckled
COARSE_DPI = 250  # a speckled page under this resolution is enlarged twice before it is filtered

_COARSE_STEP = 0.5
_FINE_STEP = 0.05


@dataclass(frozen=True)
class InkMap:
    """The dark pixels of a page, on a copy scaled by ``scale``.

    Attributes:
        mask: ``(rows, columns)`` booleans, True where there is ink.
        scale: The copy's size over the page's (at most 1.0).
    """

    mask: np.ndarray
    scale: float


@dataclass(frozen=True)
class TextLine:
    """A band of rows holding text, in the work copy's rows.

    Attributes:
        top: Its first row.
        bottom: The row after its last.
        ink: Its ink pixels.
    """

    top: int
    bottom: int
    ink: int


def ink_map(gray: Image.Image) -> InkMap:
    """The ink of an 8-bit grayscale page (mode ``L``) on a copy at most ``WORK_WIDTH`` pixels wide."""
    scale = min(1.0, WORK_WIDTH / max(gray.width, 1))
    small = gray
    if scale < 1.0:
        size = (max(1, round(gray.width * scale)), max(1, round(gray.height * scale)))
        small = gray.resize(size, Image.Resampling.BOX)
    pixels = np.asarray(small, dtype=np.uint8)
    mask = pixels <= _otsu_threshold(pixels)
    return InkMap(_drop_specks(mask), scale)


def speck_share(gray: Image.Image) -> float:
    """The share of the pixels in the middle of a grayscale page that are dark with no dark neighbour (0-1).

    The middle half of the page either way is looked at, at full resolution
    (specks are single pixels); dark is at or under the Otsu threshold.
    """
    width, height = gray.size
    middle = gray.crop((width // 4, height // 4, width // 4 + max(1, width // 2), height // 4 + max(1, height // 2)))
    pixels = np.asarray(middle, dtype=np.uint8)
    dark = pixels <= _otsu_threshold(pixels)
    if dark.all():
        return 0.0
    return float((dark & (_inked_neighbours(dark) == 0)).mean())


def despeckle(gray: Image.Image, dpi: int | None, max_pixels: int) -> tuple[Image.Image, int | None]:
    """A speckled page (see ``speck_share``) median-filtered, with its resolution; any other page as it is.

    Args:
        gray: The page, 8-bit grayscale (mode ``L``).
        dpi: Its resolution when known.
        max_pixels: Most pixels the page may grow to: a speckled page under
            ``COARSE_DPI`` is enlarged twice before filtering when it stays within them.

    Returns:
        ``(page, dpi)``: the page to read and its resolution (doubled when it was enlarged).
    """
    if speck_share(gray) <= SPECKLED_SHARE:
        return gray, dpi
    if dpi and dpi < COARSE_DPI and 4 * gray.width * gray.height <= max_pixels:
        gray, dpi = gray.resize((2 * gray.width, 2 * gray.height), Image.Resampling.BICUBIC), 2 * dpi
    return gray.filter(ImageFilter.MedianFilter(3)), dpi


def estimate_skew(gray: Image.Image) -> float:
    """The angle in degrees the page's text lines are turned counter-clockwise; 0.0 when no turn is clear.

    The search covers ``MAX_SKEW_DEGREES`` either way in two passes (steps of
    0.5 then 0.05 degrees); a page with too little ink, or whose best angle's
    profile is not ``MIN_SKEW_GAIN`` times sharper than the unturned one's,
    gives 0.0.
    """
    mask = ink_map(gray).mask
    rows, columns = np.nonzero(mask)
    if rows.size < 100:
        return 0.0
    if rows.size > MAX_SKEW_POINTS:
        picked = np.random.default_rng(0).choice(rows.size, MAX_SKEW_POINTS, replace=False)
        rows, columns = rows[picked], columns[picked]
    rows, columns = rows.astype(np.float64), columns.astype(np.float64)
    coarse = np.arange(-MAX_SKEW_DEGREES, MAX_SKEW_DEGREES + 1e-9, _COARSE_STEP)
    best = _sharpest(rows, columns, coarse)
    fine = np.arange(best - _COARSE_STEP, best + _COARSE_STEP + 1e-9, _FINE_STEP)
    best = _sharpest(rows, columns, fine)
    if _profile_sharpness(rows, columns, best) < MIN_SKEW_GAIN * _profile_sharpness(rows, columns, 0.0):
        return 0.0
    return round(best, 2)


def straighten(gray: Image.Image, degrees: float) -> Image.Image:
    """``gray`` turned back by ``degrees`` (see ``estimate_skew``), grown to keep its corners, the new edges paper.

    A turn under ``MIN_TURN_DEGREES`` returns ``gray`` itself.
    """
    if abs(degrees) < MIN_TURN_DEGREES:
        return gray
    paper = int(np.median(np.asarray(gray.reduce(4) if min(gray.size) >= 8 else gray)))
    return gray.rotate(-degrees, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=paper)


def text_lines(ink: InkMap) -> list[TextLine]:
    """The bands of inked rows of a straight page that look like text lines, top to bottom.

    A row is inked when it holds over a tenth of the ink of the page's fuller
    rows (their 90th percentile); a band is a run of inked rows, kept when it
    is at least 2 rows high and within ``TALL_LINE_FACTOR`` times the median
    band height either way (slivers of accents and descenders, and pictures, are not lines).
    """
    per_row = ink.mask.sum(axis=1)
    if not per_row.any():
        return []
    floor = max(2.0, 0.1 * float(np.percentile(per_row[per_row > 0], 90)))
    inked = np.concatenate(([False], per_row >= floor, [False]))
    edges = np.flatnonzero(inked[1:] != inked[:-1])
    bands = [(int(top), int(bottom)) for top, bottom in zip(edges[::2], edges[1::2]) if bottom - top >= 2]
    if not bands:
        return []
    usual = float(np.median([bottom - top for top, bottom in bands]))
    low, high = usual / TALL_LINE_FACTOR, usual * TALL_LINE_FACTOR
    kept = [(top, bottom) for top, bottom in bands if low <= bottom - top <= high]
    return [TextLine(top, bottom, int(per_row[top:bottom].sum())) for top, bottom in kept]


def read_share(ink: InkMap, lines: list[TextLine], boxes: Iterable[tuple[int, int, int, int]]) -> float:
    """The share (0-1) of the ink in ``lines`` that lies inside ``boxes``; 1.0 when the lines hold no ink.

    Args:
        ink: The page's ink map (``ink_map`` of the image the boxes were read on).
        lines: Its text lines (``text_lines(ink)``).
        boxes: Word boxes as ``(left, top, width, height)`` in the page's own pixels.
    """
    total = sum(line.ink for line in lines)
    if not total:
        return 1.0
    covered = np.zeros(ink.mask.shape, dtype=bool)
    for left, top, width, height in boxes:
        x0, y0 = max(0, int(left * ink.scale) - BOX_MARGIN), max(0, int(top * ink.scale) - BOX_MARGIN)
        x1, y1 = int((left + width) * ink.scale) + 1 + BOX_MARGIN, int((top + height) * ink.scale) + 1 + BOX_MARGIN
        covered[y0:y1, x0:x1] = True
    in_lines = np.zeros(ink.mask.shape[0], dtype=bool)
    for line in lines:
        in_lines[line.top : line.bottom] = True
    read = int((ink.mask & covered)[in_lines].sum())
    return min(1.0, read / total)


def _otsu_threshold(pixels: np.ndarray) -> int:
    """The gray level (0-255) that best splits ``pixels`` into ink and paper (Otsu's method)."""
    counts = np.bincount(pixels.ravel(), minlength=256).astype(np.float64)
    share = counts / max(counts.sum(), 1.0)
    below = np.cumsum(share)
    mean_below = np.cumsum(share * np.arange(256))
    with np.errstate(divide="ignore", invalid="ignore"):
        between = (mean_below[-1] * below - mean_below) ** 2 / (below * (1.0 - below))
    between = np.nan_to_num(between, nan=0.0, posinf=0.0)
    return int(np.argmax(between))


def _drop_specks(mask: np.ndarray) -> np.ndarray:
    """``mask`` without the ink pixels that have fewer than 2 inked neighbours of their 8."""
    return mask & (_inked_neighbours(mask) >= 2)


def _inked_neighbours(mask: np.ndarray) -> np.ndarray:
    """For each pixel of ``mask``, how many of its 8 neighbours are True (0-8)."""
    padded = np.pad(mask, 1).astype(np.uint8)
    rows, columns = mask.shape
    return sum(
        padded[1 + dy : 1 + dy + rows, 1 + dx : 1 + dx + columns] for dy in (-1, 0, 1) for dx in (-1, 0, 1) if dy or dx
    )


def _profile_sharpness(rows: np.ndarray, columns: np.ndarray, degrees: float) -> float:
    """How peaked the ink's row profile is when the page is read at ``degrees``: the sum of squared row counts."""
    keys = np.rint(rows + columns * np.tan(np.radians(degrees))).astype(np.int64)
    counts = np.bincount(keys - keys.min()).astype(np.float64)
    return float(np.dot(counts, counts))


def _sharpest(rows: np.ndarray, columns: np.ndarray, angles: np.ndarray) -> float:
    """The angle of ``angles`` whose row profile is most peaked."""
    scores = [_profile_sharpness(rows, columns, float(angle)) for angle in angles]
    return float(angles[int(np.argmax(scores))])
