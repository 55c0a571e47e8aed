"""RTF files: text, outline-level headings as sections, table rows, the info group, and refusals."""

from __future__ import annotations

from pathlib import Path

from indexer.loaders import located as located_module
from indexer.loaders.rtf import read_rtf
from tests.indexer.made_files import MARKDOWN, cut_in_half, located, needs_pandoc, pandoc, rejected

# pandoc's RTF writer has no info group; an RTF file's metadata is the standard \info group (RTF 1.9, as word
# processors write it), handed to pandoc as a header include.
INFO = (
    r"{\info{\title River notes}{\author Ada Lovelace}"
    r"{\creatim\yr2024\mo3\dy5\hr10\min30}{\revtim\yr2024\mo4\dy1\hr8\min0}}"
)

pytestmark = needs_pandoc


def only(path: Path):
    (document,) = read_rtf(path, str(path), path.stem)
    return document


def test_rtf_from_pandoc_keeps_sections_and_table_rows(tmp_path):
    document = only(pandoc(tmp_path, "rtf"))
    assert "Name | Length\nNile | 6650\nAmazon | 6400" in document.text
    assert located(document, "Amazon | 6400") == {"section": ["Rivers", "Deltas"]}
    assert located(document, "Rivers carry sediment") == {"section": ["Rivers"]}
    assert located(document, "Mountains rise") == {"section": ["Mountains"]}
    assert "first item about silt\n" in document.text
    assert document.title == "made"  # no \info title: the stem
    assert document.metadata == {
        "source": str(tmp_path / "made.rtf"),
        "format": "rtf",
        "locations": document.metadata["locations"],
    }


def test_rtf_info_group_gives_title_author_and_times(tmp_path):
    document = only(pandoc(tmp_path, "rtf", MARKDOWN, "-V", f"header-includes={INFO}"))
    assert document.title == "River notes"
    assert document.metadata["author"] == "Ada Lovelace"
    assert document.metadata["created"] == "2024-03-05T10:30:00"
    assert document.metadata["modified"] == "2024-04-01T08:00:00"
    assert "River notes" not in document.text  # metadata, not body text


def test_rtf_escapes_and_unicode_are_decoded(tmp_path):
    document = only(pandoc(tmp_path, "rtf", "# Café\n\nNaïve “quotes” and € signs.\n"))
    assert "Naïve “quotes” and € signs." in document.text
    assert located(document, "signs") == {"section": ["Café"]}


def test_rtf_cut_in_half_is_refused_as_truncated(tmp_path):
    reason = rejected(read_rtf, cut_in_half(pandoc(tmp_path, "rtf"), tmp_path))
    assert reason.startswith("truncated or corrupt RTF file") and "groups left open" in reason


def test_text_that_is_not_rtf_is_refused(tmp_path):
    path = tmp_path / "fake.rtf"
    path.write_text("just some words\n", encoding="utf-8")
    assert rejected(read_rtf, path) == "not an RTF file (it does not start with {\\rtf)"


def test_rtf_character_limit(tmp_path, monkeypatch):
    path = pandoc(tmp_path, "rtf")
    monkeypatch.setattr(located_module, "MAX_TEXT_CHARS", 60)
    assert rejected(read_rtf, path).startswith("rtf text is over the 60 character limit")
