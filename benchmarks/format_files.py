"""Real files of many formats made from plain texts, by the tools people make them with.

A ``SourceText`` (a title and its text in parts: a page, a slide or a scanned
page each) becomes a file of one of ``FORMATS``:

- ``docx``, ``odt``, ``epub``, ``rtf``, ``html``: pandoc, from Markdown whose
  punctuation is escaped (so pandoc keeps every character as written), with
  the title in the metadata;
- ``pptx``: python-pptx, a slide per part, the title on the first slide;
- ``xlsx``: openpyxl, the title in the first row and a row per sentence;
- ``pdf``, ``odp``, ``ods``: LibreOffice (``soffice --headless --convert-to``)
  from a docx with a page break between parts, the pptx and the xlsx, each
  call with its own profile folder and a time bound;
- ``eml``: ``email`` (every other one multipart/alternative with an HTML part);
  ``mbox``: ``mailbox``, several texts as the messages of one mailbox;
- ``png``, ``jpg``, ``tiff``, ``scan-pdf``: scans drawn by ``scan_images``
  (a TIFF frame or PDF page per part; PNG and JPEG one page), the PDF by img2pdf.

``make_folder`` writes a list of ``FileSpec`` into a folder and returns what
it made, with, for the formats that have pages or slides, the part each
page or slide holds (``MadeFile.parts``).
"""

from __future__ import annotations

import io
import json
import mailbox
import os
import random
import re
import shutil
import subprocess
import tempfile
import zlib
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formatdate
from html import escape
from pathlib import Path

from benchmarks.scan_images import ScanStyle, render_pages, scan_style

FORMATS = (
    "docx",
    "odt",
    "epub",
    "rtf",
    "html",
    "pptx",
    "pdf",
    "odp",
    "ods",
    "xlsx",
    "eml",
    "mbox",
    "png",
    "jpg",
    "tiff",
    "scan-pdf",
)
SUFFIXES = {"scan-pdf": ".pdf", "jpg": ".jpg", "tiff": ".tif"}
PANDOC_FORMATS = ("docx", "odt", "epub", "rtf", "html")
LIBREOFFICE_FORMATS = {"pdf": "docx", "odp": "pptx", "ods": "xlsx"}  # target -> the source it is converted from
SCAN_FORMATS = ("png", "jpg", "tiff", "scan-pdf")
# The label of each part, for the formats whose parts are pages or slides.
PART_LABELS = {"pdf": "page", "scan-pdf": "page", "tiff": "page", "pptx": "slide", "odp": "slide"}
SOFFICE_TIMEOUT_S = 300
SOFFICE_BATCH = 12  # files per soffice call

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\[])")
_MARKDOWN_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")
_PAGE_BREAK = '\n\n```{=openxml}\n<w:p><w:r><w:br w:type="page"/></w:r></w:p>\n```\n\n'


@dataclass(frozen=True)
class SourceText:
    """A text to write as a file.

    Attributes:
        key: Its id (the dataset's document id).
        title: Its title.
        parts: Its text in parts, in order: a page, slide or scanned page each
            where the format has them, paragraphs elsewhere.
    """

    key: str
    title: str
    parts: tuple[str, ...]

    @property
    def text(self) -> str:
        """The parts joined by blank lines."""
        return "\n\n".join(self.parts)


@dataclass(frozen=True)
class FileSpec:
    """One file to make: its format, its name (without suffix) and the texts it holds (several only for mbox).

    ``style`` sets a scan's look; None (default) draws one from the seed and the name (``scan_style``).
    """

    format: str
    name: str
    sources: tuple[SourceText, ...]
    style: ScanStyle | None = None


@dataclass(frozen=True)
class MadeFile:
    """A file ``make_folder`` wrote.

    Attributes:
        path: Its path, relative to the folder.
        format: One of ``FORMATS``.
        keys: The keys of the texts it holds, in order (an mbox's messages).
        label: ``"page"`` or ``"slide"`` where part ``n`` (from 1) is page or
            slide ``n``; None for formats without them.
        parts: The parts of its (first) text, the title in front of the first.
    """

    path: str
    format: str
    keys: tuple[str, ...]
    label: str | None
    parts: tuple[str, ...]

    def to_dict(self) -> dict:
        return {
            "path": self.path,
            "format": self.format,
            "keys": list(self.keys),
            "label": self.label,
            "parts": list(self.parts),
        }

    @classmethod
    def from_dict(cls, data: dict) -> MadeFile:
        return cls(data["path"], data["format"], tuple(data["keys"]), data["label"], tuple(data["parts"]))


def split_parts(text: str, words_per_part: int = 90) -> tuple[str, ...]:
    """``text`` cut at sentence ends into parts of about ``words_per_part`` words (a long sentence stays whole)."""
    parts: list[list[str]] = [[]]
    count = 0
    for sentence in sentences(text):
        words = len(sentence.split())
        if parts[-1] and count + words > words_per_part:
            parts.append([])
            count = 0
        parts[-1].append(sentence)
        count += words
    return tuple(" ".join(part) for part in parts if part)


def sentences(text: str) -> list[str]:
    """``text`` cut after ``.``, ``!`` or ``?`` followed by a capital, a digit or a bracket."""
    return [piece.strip() for piece in _SENTENCE_END.split(" ".join(text.split())) if piece.strip()]


def slug(title: str, limit: int = 60) -> str:
    """A file name from ``title``: its words joined by ``-``, cut at a word before ``limit`` characters."""
    words = re.findall(r"[A-Za-z0-9]+", title)
    name = ""
    for word in words:
        if len(name) + len(word) + 1 > limit:
            break
        name = f"{name}-{word}" if name else word
    return name or "untitled"


def make_folder(specs: list[FileSpec], folder: Path, work: Path, seed: int = 0) -> list[MadeFile]:
    """Write every file of ``specs`` into ``folder``; intermediate files go to ``work``.

    Args:
        specs: The files to make, their names unique (the text and the scanned PDF share a suffix).
        folder: Where the files go (made if missing).
        work: Where the Markdown, and the docx, pptx and xlsx that LibreOffice
            converts, are written.
        seed: Seeds the scans' look, each file's from its name.

    Returns:
        What was made, in the order of ``specs``.

    Raises:
        RuntimeError: a tool failed or LibreOffice passed its time bound (the message names the file).
    """
    folder.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    conversions: dict[str, list[Path]] = {}
    made = []
    for spec in specs:
        target = folder / (spec.name + SUFFIXES.get(spec.format, f".{spec.format}"))
        if spec.format in LIBREOFFICE_FORMATS:
            source = work / spec.format / f"{spec.name}.{LIBREOFFICE_FORMATS[spec.format]}"
            source.parent.mkdir(exist_ok=True)
            write_file(LIBREOFFICE_FORMATS[spec.format], spec.sources, source, work, seed, page_breaks=True)
            conversions.setdefault(spec.format, []).append(source)
        else:
            write_file(spec.format, spec.sources, target, work, seed, style=spec.style)
        made.append(_made(spec, target.name))
    for fmt, sources in conversions.items():
        convert_with_libreoffice(sources, fmt, folder)
    return made


def _made(spec: FileSpec, name: str) -> MadeFile:
    first = spec.sources[0]
    parts = (f"{first.title}\n\n{first.parts[0]}", *first.parts[1:])
    return MadeFile(
        name, spec.format, tuple(source.key for source in spec.sources), PART_LABELS.get(spec.format), parts
    )


def write_file(
    fmt: str,
    sources: tuple[SourceText, ...],
    target: Path,
    work: Path,
    seed: int = 0,
    page_breaks: bool = False,
    style: ScanStyle | None = None,
) -> Path:
    """Write ``sources`` (one, or an mbox's several) as a ``fmt`` file at ``target`` (not the LibreOffice ones).

    ``page_breaks`` puts a page break between parts (docx only: the source of a paged PDF); ``style`` is a
    scan's look (default: drawn from ``seed`` and the file's name).
    """
    source = sources[0]
    if fmt in PANDOC_FORMATS:
        return write_with_pandoc(source, fmt, target, work, page_breaks)
    if fmt == "pptx":
        return write_pptx(source, target)
    if fmt == "xlsx":
        return write_xlsx(source, target)
    if fmt == "eml":
        target.write_bytes(email_message(source, html_part=_stable_number(target.stem) % 2 == 1).as_bytes())
        return target
    if fmt == "mbox":
        return write_mbox(sources, target)
    if fmt in SCAN_FORMATS:
        style = style or scan_style(random.Random(f"{seed}:{target.name}"))
        return write_scan(source, fmt, target, style, seed=_stable_number(f"{seed}:{target.name}"))
    raise ValueError(f"no writer for {fmt!r}; known: {', '.join(FORMATS)}")


def markdown(source: SourceText, page_breaks: bool = False) -> str:
    """``source`` as Markdown: a YAML title and the parts as paragraphs, every ASCII punctuation escaped."""
    title = json.dumps(_escape_markdown(source.title))
    body = (_PAGE_BREAK if page_breaks else "\n\n").join(_escape_markdown(part) for part in source.parts)
    return f"---\ntitle: {title}\n---\n\n{body}\n"


def _escape_markdown(text: str) -> str:
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", " ".join(text.split()))


def write_with_pandoc(source: SourceText, fmt: str, target: Path, work: Path, page_breaks: bool = False) -> Path:
    """``source`` written by pandoc as ``fmt`` (docx, odt, epub, rtf or html; standalone, title in the metadata)."""
    markdown_file = work / "markdown" / f"{target.stem}.{fmt}.md"
    markdown_file.parent.mkdir(parents=True, exist_ok=True)
    markdown_file.write_text(markdown(source, page_breaks), encoding="utf-8")
    _run(
        [
            "pandoc",
            "--standalone",
            "--from",
            "markdown",
            "--to",
            "html5" if fmt == "html" else fmt,
            "--output",
            str(target),
            str(markdown_file),
        ],
        target,
        timeout=120,
    )
    return target


def write_pptx(source: SourceText, target: Path) -> Path:
    """A presentation with a slide per part ("Title and Content"); the title only on the first slide."""
    from pptx import Presentation
    from pptx.util import Pt

    deck = Presentation()
    deck.core_properties.title = source.title
    for number, part in enumerate(source.parts):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        if number == 0:
            slide.shapes.title.text = source.title
        else:
            slide.shapes.title.element.getparent().remove(slide.shapes.title.element)
        body = slide.placeholders[1].text_frame
        body.text = part
        body.word_wrap = True
        body.paragraphs[0].runs[0].font.size = Pt(12)
    deck.save(target)
    return target


def write_xlsx(source: SourceText, target: Path) -> Path:
    """A workbook of one sheet: the title in the first row, then a row per sentence."""
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    sheet.title = "Abstract"
    sheet.append([source.title])
    for sentence in sentences(source.text):
        sheet.append([sentence])
    book.properties.title = source.title
    book.save(target)
    return target


def email_message(source: SourceText, html_part: bool = False) -> EmailMessage:
    """A mail with ``source``'s title as subject and its parts as paragraphs (plus an HTML alternative if asked)."""
    message = EmailMessage()
    number = _stable_number(source.key)
    message["From"] = "Research Digest <digest@example.org>"
    message["To"] = "Reader <reader@example.org>"
    message["Subject"] = source.title
    message["Date"] = formatdate(1_600_000_000 + number % 50_000_000, localtime=False)
    message["Message-ID"] = f"<{source.key}.{number}@example.org>"
    message.set_content(source.text + "\n")
    if html_part:
        paragraphs = "".join(f"<p>{escape(part)}</p>" for part in source.parts)
        message.add_alternative(
            f"<html><body><h1>{escape(source.title)}</h1>{paragraphs}</body></html>", subtype="html"
        )
    return message


def write_mbox(sources: tuple[SourceText, ...], target: Path) -> Path:
    """One mailbox holding a message per source, in order."""
    target.unlink(missing_ok=True)
    box = mailbox.mbox(target, create=True)
    try:
        for number, source in enumerate(sources):
            box.add(email_message(source, html_part=number % 2 == 1))
        box.flush()
    finally:
        box.close()
    return target


def write_scan(source: SourceText, fmt: str, target: Path, style: ScanStyle, seed: int = 0) -> Path:
    """``source`` as a scan: one PNG or JPEG page, a TIFF frame per part, or a PDF page per part (img2pdf)."""
    import img2pdf

    dpi = (style.dpi, style.dpi)
    if fmt in ("png", "jpg"):
        (page,) = render_pages(source.title, ("\n\n".join(source.parts),), style, seed)
        if fmt == "png":
            page.save(target, dpi=dpi)
        else:
            page.convert("RGB").save(target, quality=style.jpeg_quality, dpi=dpi)
        return target
    pages = render_pages(source.title, source.parts, style, seed)
    if fmt == "tiff":
        pages[0].save(target, save_all=True, append_images=pages[1:], dpi=dpi, compression="tiff_lzw")
        return target
    encoded = []
    for page in pages:
        buffer = io.BytesIO()
        page.save(buffer, format="PNG", dpi=dpi)
        encoded.append(buffer.getvalue())
    target.write_bytes(img2pdf.convert(encoded))
    return target


def convert_with_libreoffice(sources: list[Path], fmt: str, folder: Path, timeout: float = SOFFICE_TIMEOUT_S) -> None:
    """Convert ``sources`` to ``fmt`` (pdf, odp, ods) into ``folder``, ``SOFFICE_BATCH`` files per soffice call.

    Each call runs with its own profile folder (removed after) and at most
    ``timeout`` seconds.

    Raises:
        RuntimeError: soffice is missing, failed, timed out, or left a file unwritten.
    """
    for start in range(0, len(sources), SOFFICE_BATCH):
        batch = sources[start : start + SOFFICE_BATCH]
        profile = Path(tempfile.mkdtemp(prefix="lo-profile-"))
        command = [
            "soffice",
            f"-env:UserInstallation={profile.as_uri()}",
            "--headless",
            "--norestore",
            "--convert-to",
            fmt,
            "--outdir",
            str(folder),
            *map(str, batch),
        ]
        try:
            _run(command, batch[0], timeout)
        finally:
            shutil.rmtree(profile, ignore_errors=True)
        missing = [path.name for path in batch if not (folder / f"{path.stem}.{fmt}").is_file()]
        if missing:
            raise RuntimeError(f"soffice --convert-to {fmt} wrote no file for {', '.join(missing)}")


def libreoffice_available() -> bool:
    """Whether ``soffice`` is on the PATH."""
    return shutil.which("soffice") is not None


def _run(command: list[str], target: Path, timeout: float) -> None:
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "HOME": os.environ.get("HOME", "/tmp")},
        )
    except FileNotFoundError:
        raise RuntimeError(f"{command[0]} is not installed (needed for {target.name})") from None
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{command[0]} passed {timeout:.0f} s making {target.name}") from None
    if done.returncode != 0:
        raise RuntimeError(f"{command[0]} failed making {target.name}: {done.stderr.strip()[:300]}")


def _stable_number(text: str) -> int:
    """A number from ``text`` that is the same in every process (``hash`` of a str is not)."""
    return zlib.crc32(text.encode("utf-8"))
