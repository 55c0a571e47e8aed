"""Text drawn as scanned pages: Letter-sized grayscale images at 150-300 dpi, some turned, some speckled.

``render_pages`` draws a title and parts onto pages (a page per part, the
title above the first) in an 11-point serif face, wrapped to 1-inch margins;
a page grows taller when its part does not fit. ``scan_style`` picks, from a
seeded ``random.Random``, the look of one scanned file: its resolution, a
turn of 1 to 3 degrees for a third of them and Gaussian grain with speckles
for another third.
"""

from __future__ import annotations

import glob
import random
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw, ImageFont

DPIS = (150, 200, 300)
BODY_POINTS = 11
TITLE_POINTS = 15
LINE_SPACING = 1.35
PAGE_INCHES = (8.5, 11.0)
MARGIN_INCHES = 1.0
_FONT_NAMES = ("LiberationSerif-Regular.ttf", "DejaVuSerif.ttf", "DejaVuSans.ttf")
_BOLD_NAMES = ("LiberationSerif-Bold.ttf", "DejaVuSerif-Bold.ttf", "DejaVuSans-Bold.ttf")


@dataclass(frozen=True)
class ScanStyle:
    """How one scanned file looks.

    Attributes:
        dpi: Resolution of its pages.
        degrees: How far each page is turned (0: straight).
        noise: Standard deviation of Gaussian grain on the 0-255 scale (0: clean);
            where above 0, 1% of the pixels also turn black and 1% white.
        jpeg_quality: The quality a JPEG of it is saved at.
    """

    dpi: int = 200
    degrees: float = 0.0
    noise: float = 0.0
    jpeg_quality: int = 85


def scan_style(rng: random.Random) -> ScanStyle:
    """A style drawn from ``rng``: any of ``DPIS``; turned (1-3 degrees, either way), grainy, or clean, a third each."""
    dpi = rng.choice(DPIS)
    look = rng.randrange(3)
    degrees = rng.choice((-1, 1)) * rng.uniform(1.0, 3.0) if look == 0 else 0.0
    noise = rng.uniform(8.0, 20.0) if look == 1 else 0.0
    return ScanStyle(dpi, round(degrees, 2), round(noise, 1), rng.choice((75, 85, 92)))


def fonts_available() -> bool:
    """Whether a TrueType face to draw scans with is installed."""
    return _font_file(_FONT_NAMES) is not None


def render_pages(title: str, parts: tuple[str, ...], style: ScanStyle, seed: int = 0) -> list[Image.Image]:
    """A grayscale page (mode ``L``) per part of the text, the title above the first, in ``style``.

    Blank lines inside a part separate its paragraphs.

    Raises:
        RuntimeError: no TrueType face is installed (see ``fonts_available``).
    """
    body = _font(_FONT_NAMES, round(BODY_POINTS / 72 * style.dpi))
    heading = _font(_BOLD_NAMES, round(TITLE_POINTS / 72 * style.dpi))
    pages = []
    for number, part in enumerate(parts):
        lines: list[tuple[str, ImageFont.FreeTypeFont]] = []
        width = round((PAGE_INCHES[0] - 2 * MARGIN_INCHES) * style.dpi)
        if number == 0:
            lines += [(line, heading) for line in _wrap(title, heading, width)] + [("", body)]
        for paragraph in part.split("\n\n"):
            lines += [(line, body) for line in _wrap(paragraph, body, width)] + [("", body)]
        page = _draw(lines, style.dpi)
        pages.append(_age(page, style, seed + number))
    return pages


def _draw(lines: list[tuple[str, ImageFont.FreeTypeFont]], dpi: int) -> Image.Image:
    margin = round(MARGIN_INCHES * dpi)
    heights = [round(font.size * LINE_SPACING) for _line, font in lines]
    height = max(round(PAGE_INCHES[1] * dpi), 2 * margin + sum(heights))
    page = Image.new("L", (round(PAGE_INCHES[0] * dpi), height), 255)
    draw = ImageDraw.Draw(page)
    top = margin
    for (line, font), step in zip(lines, heights):
        if line:
            draw.text((margin, top), line, font=font, fill=0)
        top += step
    return page


def _wrap(text: str, font: ImageFont.FreeTypeFont, width: int) -> list[str]:
    """``text``'s words in lines no wider than ``width`` pixels (a longer word gets a line of its own)."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        candidate = f"{line} {word}" if line else word
        if line and font.getlength(candidate) > width:
            lines.append(line)
            candidate = word
        line = candidate
    return lines + [line] if line else lines


def _age(page: Image.Image, style: ScanStyle, seed: int) -> Image.Image:
    """``page`` turned and speckled as ``style`` says, with its resolution recorded."""
    if style.degrees:
        page = page.rotate(style.degrees, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=255)
    if style.noise:
        rng = np.random.default_rng(seed)
        pixels = np.asarray(page, dtype=np.float32) + rng.normal(0, style.noise, (page.height, page.width))
        speckles = rng.random(pixels.shape)
        pixels[speckles < 0.01] = 0
        pixels[speckles > 0.99] = 255
        page = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
    page.info["dpi"] = (style.dpi, style.dpi)
    return page


@lru_cache(maxsize=None)
def _font(names: tuple[str, ...], pixels: int) -> ImageFont.FreeTypeFont:
    path = _font_file(names)
    if path is None:
        raise RuntimeError(f"no TrueType face ({', '.join(names)}) under /usr/share/fonts to draw scans with")
    return ImageFont.truetype(path, pixels)


@lru_cache(maxsize=None)
def _font_file(names: tuple[str, ...]) -> str | None:
    for name in names:
        found = sorted(glob.glob(f"/usr/share/fonts/**/{name}", recursive=True))
        if found:
            return found[0]
    return None
