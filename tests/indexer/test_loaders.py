"""Tests for indexer.loaders: real files of every supported kind, good and bad."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pypdf import PdfWriter
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

from indexer.loaders import DEFAULT_MAX_BYTES, SUPPORTED_SUFFIXES, FieldMap, LoadError, is_beir_dir, load_path, walk
from retriever.documents import Document
from retriever.errors import BadInputError

FRENCH = (
    "Le café du matin était délicieux ; après le déjeuner, nous avons relu le résumé "
    "de la thèse, un travail naïf mais élégant, écrit à Noël près de la fenêtre.\n"
)


def load(path: Path, **kwargs) -> list[Document | LoadError]:
    return list(load_path(path, **kwargs))


def load_one(path: Path, **kwargs) -> Document | LoadError:
    (item,) = load(path, **kwargs)
    return item


def write_pdf(path: Path, lines: list[str], title: str | None = None, password: str | None = None) -> Path:
    """A one-page PDF drawing ``lines`` in Helvetica, so pypdf can extract them."""
    writer = PdfWriter()
    page = writer.add_blank_page(width=612, height=792)
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    page[NameObject("/Resources")] = DictionaryObject(
        {NameObject("/Font"): DictionaryObject({NameObject("/F1"): writer._add_object(font)})}
    )
    ops = ["BT", "/F1 12 Tf", "14 TL", "72 720 Td"] + [f"({line}) Tj T*" for line in lines] + ["ET"]
    content = DecodedStreamObject()
    content.set_data("\n".join(ops).encode("latin-1"))
    page[NameObject("/Contents")] = writer._add_object(content)
    if title is not None:
        writer.add_metadata({"/Title": title})
    if password is not None:
        writer.encrypt(user_password=password, algorithm="RC4-128")
    with path.open("wb") as f:
        writer.write(f)
    return path


def write_jsonl(path: Path, lines: list[object | str]) -> Path:
    """Each item is a record to dump, or a raw line when it is a string."""
    path.write_text(
        "\n".join(item if isinstance(item, str) else json.dumps(item) for item in lines) + "\n", encoding="utf-8"
    )
    return path


# --- plain files -----------------------------------------------------------------


def test_constants():
    from indexer.loaders.detect import format_of_name

    assert {".txt", ".md", ".markdown", ".html", ".htm", ".pdf", ".jsonl", ".csv"} < SUPPORTED_SUFFIXES
    assert {".docx", ".epub", ".eml", ".png", ".gz", ".zip", ".tgz", ".rst", ".log"} < SUPPORTED_SUFFIXES
    assert all(format_of_name(f"name{suffix}")[0] for suffix in SUPPORTED_SUFFIXES)  # each one names a format
    assert DEFAULT_MAX_BYTES == 50 * 1024 * 1024


def test_txt_document_uses_absolute_path_and_stem(tmp_path, monkeypatch):
    (tmp_path / "notes.txt").write_text("First line.\n\nSecond paragraph.\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    doc = load_one(Path("notes.txt"))
    source = str((tmp_path / "notes.txt").resolve())
    assert doc == Document(
        id=source,
        text="First line.\n\nSecond paragraph.\n",
        title="notes",
        metadata={"source": source, "format": "txt"},
    )


def test_uppercase_suffix_is_dispatched(tmp_path):
    path = tmp_path / "README.MD"
    path.write_text("# Upper\n\nbody\n", encoding="utf-8")
    doc = load_one(path)
    assert (doc.title, doc.metadata["format"]) == ("Upper", "md")


def test_markdown_title_is_first_atx_heading_outside_code(tmp_path):
    path = tmp_path / "guide.markdown"
    text = "```bash\n# not a title\n```\n\nIntro line\n\n## Install the tool ##\n\n# Later\n"
    path.write_text(text, encoding="utf-8")
    doc = load_one(path)
    assert doc.title == "Install the tool"
    assert doc.text == text
    assert doc.metadata["format"] == "md"


def test_markdown_without_heading_uses_stem(tmp_path):
    path = tmp_path / "plain.md"
    path.write_text("#hashtag is not a heading\nbody\n", encoding="utf-8")
    assert load_one(path).title == "plain"


def test_html_drops_scripts_and_uses_title(tmp_path):
    path = tmp_path / "page.html"
    path.write_text(
        "<!doctype html><html><head><title>\n  The   Page </title>"
        "<style>body { color: red }</style><script>var hidden = 1;</script></head>"
        "<body><h1>Heading</h1>\n\n\n\n<p>First    paragraph.</p>\n<noscript>enable js</noscript>"
        "<template><p>template text</p></template><script>alert('x')</script>\n\n\n<p>Second.</p>"
        "</body></html>",
        encoding="utf-8",
    )
    doc = load_one(path)
    assert doc.title == "The Page"
    assert doc.text == "Heading\n\nFirst paragraph.\n\nSecond."
    assert (doc.metadata["source"], doc.metadata["format"]) == (str(path.resolve()), "html")


def test_html_title_falls_back_to_h1_then_stem(tmp_path):
    (tmp_path / "a.htm").write_text("<html><body><h1> Big  <b>News</b></h1><p>x</p></body></html>")
    (tmp_path / "b.htm").write_text("<html><body><p>only text</p></body></html>")
    assert load_one(tmp_path / "a.htm").title == "Big News"
    assert load_one(tmp_path / "b.htm").title == "b"


def test_html_without_text_is_empty_document(tmp_path):
    path = tmp_path / "blank.html"
    path.write_text("<html><head><title>T</title></head><body><script>x()</script> </body></html>")
    assert load_one(path) == LoadError(str(path.resolve()), "empty document")


def test_pdf_text_title_and_pages(tmp_path):
    path = write_pdf(tmp_path / "paper.pdf", ["Hello PDF world", "Second line here"], title="A Study")
    doc = load_one(path)
    assert isinstance(doc, Document)
    assert "Hello PDF world" in doc.text and "Second line here" in doc.text
    assert doc.title == "A Study"
    assert doc.id == doc.metadata["source"] == str(path.resolve())
    assert (doc.metadata["format"], doc.metadata["pages"]) == ("pdf", 1)


def test_pdf_without_title_uses_stem(tmp_path):
    assert load_one(write_pdf(tmp_path / "report.pdf", ["Some text"])).title == "report"


def test_pdf_without_text_is_reported(tmp_path):
    path = write_pdf(tmp_path / "scan.pdf", [])
    error = load_one(path)
    assert isinstance(error, LoadError) and error.source == str(path.resolve())
    assert error.reason.startswith("no extractable text") and not error.unread


def test_malformed_pdf_is_reported(tmp_path):
    whole = write_pdf(tmp_path / "whole.pdf", ["Some text on the page"]).read_bytes()
    path = tmp_path / "broken.pdf"
    path.write_bytes(whole[: len(whole) // 3])  # a PDF cut short: its header says PDF, its body is gone
    error = load_one(path)
    assert isinstance(error, LoadError) and not error.unread
    assert "PDF" in error.reason
    assert "\n" not in error.reason


def test_text_named_pdf_is_read_as_text(tmp_path):
    path = tmp_path / "notes.pdf"
    path.write_text("These notes were saved with the wrong suffix.\n", encoding="utf-8")
    doc = load_one(path)
    assert isinstance(doc, Document)
    assert (doc.text, doc.metadata["format"]) == ("These notes were saved with the wrong suffix.\n", "txt")


def test_encrypted_pdf_is_reported(tmp_path):
    path = write_pdf(tmp_path / "locked.pdf", ["secret text"], password="hunter2")
    assert load_one(path) == LoadError(str(path.resolve()), "encrypted PDF, needs a password")


# --- decoding ----------------------------------------------------------------------


def test_latin1_text_is_detected_and_recorded(tmp_path):
    path = tmp_path / "french.txt"
    path.write_bytes((FRENCH * 3).encode("latin-1"))
    doc = load_one(path)
    assert isinstance(doc, Document)
    assert doc.text == FRENCH * 3
    recorded = doc.metadata["encoding"]  # a Latin-1 compatible code page, e.g. cp1252
    assert recorded.replace("_", "-").lower() not in ("utf-8", "utf8", "ascii")
    assert path.read_bytes().decode(recorded) == FRENCH * 3  # the recorded encoding reads the file back


def test_utf8_text_has_no_encoding_metadata(tmp_path):
    path = tmp_path / "utf8.txt"
    path.write_text(FRENCH, encoding="utf-8")
    assert "encoding" not in load_one(path).metadata


@pytest.mark.parametrize(("encoding", "recorded"), [("utf-8-sig", None), ("utf-16", "utf-16")])
def test_byte_order_marks_decide_encoding(tmp_path, encoding, recorded):
    path = tmp_path / "bom.txt"
    path.write_bytes(FRENCH.encode(encoding))
    doc = load_one(path)
    assert doc.text == FRENCH
    assert doc.metadata.get("encoding") == recorded


def test_undecodable_file_is_reported(tmp_path):
    path = tmp_path / "garbled.txt"
    path.write_bytes(b"ok " + bytes(range(0x80, 0x100)) * 4)
    assert load_one(path) == LoadError(
        str(path.resolve()), "not valid UTF-8 (invalid byte 0x80 at offset 3) and no other encoding fits"
    )


@pytest.mark.parametrize("name", ["image.txt", "data.jsonl", "table.csv"])
def test_binary_file_with_a_text_suffix_is_reported(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"\x00\x01\x02\x03" + bytes(range(256)) * 8)  # no format's signature: the name decides
    assert load_one(path) == LoadError(str(path.resolve()), "binary file, not text")


@pytest.mark.parametrize("name", ["image.txt", "data.jsonl", "table.csv"])
def test_an_image_with_a_text_suffix_goes_to_the_image_reader(tmp_path, name):
    from PIL import Image

    path = tmp_path / name
    Image.new("RGB", (40, 20), "white").save(path, format="PNG")
    item = load_one(path)
    assert isinstance(item, LoadError)  # a blank image has no text to find
    assert "binary file" not in item.reason and "UTF-8" not in item.reason  # not decoded as text


def test_blank_file_is_reported(tmp_path):
    path = tmp_path / "blank.md"
    path.write_bytes(b"  \n\t\n")
    assert load_one(path) == LoadError(str(path.resolve()), "empty document")


def test_empty_file_is_passed_over_not_failed(tmp_path):
    path = tmp_path / "empty.md"
    path.write_bytes(b"")
    error = load_one(path)
    assert error.unread and "empty" in error.reason


# --- size, unreadable and unsupported paths ----------------------------------------


def test_file_over_max_bytes_is_refused(tmp_path):
    path = tmp_path / "big.txt"
    path.write_text("x" * 100)
    assert load_one(path, max_bytes=10) == LoadError(str(path.resolve()), "file is 100 bytes, over the 10 byte limit")
    assert isinstance(load_one(path, max_bytes=100), Document)


def test_file_over_megabyte_limit_is_reported_in_mb(tmp_path):
    path = tmp_path / "big.txt"
    path.write_bytes(b"a" * (3 * 1024 * 1024 + 200 * 1024))
    assert load_one(path, max_bytes=2 * 1024 * 1024).reason == "file is 3.2 MB, over the 2 MB limit"


def test_unreadable_path_reports_os_error(tmp_path):
    link = tmp_path / "dangling.txt"
    link.symlink_to(tmp_path / "missing.txt")
    assert load_one(link) == LoadError(str(tmp_path / "missing.txt"), "No such file or directory")


def test_unknown_binary_and_plain_directory_are_reported(tmp_path):
    import shutil
    import sys

    program = tmp_path / "program.xyz"
    shutil.copy(sys.executable, program)  # an executable: a format nothing here reads
    error = load_one(program)
    assert error.unread and error.reason.startswith("binary (application/")
    (tmp_path / "folder").mkdir()
    assert "not a BEIR corpus" in load_one(tmp_path / "folder").reason


# --- JSONL -------------------------------------------------------------------------


def test_jsonl_good_lines_load_around_a_malformed_one(tmp_path):
    path = write_jsonl(
        tmp_path / "docs.jsonl",
        [
            {"id": "a", "title": "Tea", "text": "Green tea is steamed.", "tags": ["x"], "meta": {"n": 1}},
            '{"id": "b", "text": "oops" "missing comma"}',
            "",
            "[1, 2]",
            {"id": 7, "body": "Integer ids become strings.", "title": None},
        ],
    )
    source = str(path.resolve())
    assert load(path) == [
        Document(
            id="a",
            text="Green tea is steamed.",
            title="Tea",
            metadata={"source": source, "tags": ["x"], "meta": {"n": 1}},
        ),
        LoadError(f"{source}:2", "invalid JSON: Expecting ',' delimiter (column 28)"),
        LoadError(f"{source}:4", "record is an array, not an object"),
        Document(id="7", text="Integer ids become strings.", title="", metadata={"source": source}),
    ]


def test_jsonl_record_errors_name_the_field(tmp_path):
    path = write_jsonl(
        tmp_path / "bad.jsonl",
        [
            {"text": "no id here"},
            {"id": "x"},
            {"id": "y", "text": "   "},
            {"id": 1.5, "text": "float id"},
            {"id": "z", "text": 42},
            {"id": "w", "text": "ok", "title": ["list"]},
        ],
    )
    assert [item.reason for item in load(path)] == [
        "no 'id' or '_id' field (name one with --id-field)",
        "no 'text', 'body' or 'content' field (name one with --text-field)",
        "'text' is empty",
        "'id' is a number, not a string or integer",
        "'text' is a number, not a string",
        "'title' is an array, not a string",
    ]


def test_jsonl_duplicate_id_is_reported_on_the_later_line(tmp_path):
    path = write_jsonl(
        tmp_path / "dup.jsonl", [{"id": "a", "text": "one"}, {"id": "b", "text": "two"}, {"id": "a", "text": "three"}]
    )
    items = load(path)
    assert [item.id for item in items[:2]] == ["a", "b"]
    assert items[2] == LoadError(f"{path.resolve()}:3", "duplicate id 'a' (first on line 1)")


def test_jsonl_field_map_and_source_field(tmp_path):
    path = write_jsonl(
        tmp_path / "custom.jsonl",
        [{"key": "k1", "headline": "H", "article": "Body text.", "id": "ignored", "source": "web"}],
    )
    doc = load_one(path, fields=FieldMap(id="key", title="headline", text="article"))
    assert doc == Document(
        id="k1",
        text="Body text.",
        title="H",
        metadata={"source": str(path.resolve()), "record_source": "web", "id": "ignored"},
    )
    error = load_one(path, fields=FieldMap(id="uid"))
    assert error.reason == "no 'uid' field (name one with --id-field)"


def test_jsonl_is_streamed_lazily(tmp_path):
    path = write_jsonl(tmp_path / "many.jsonl", [{"id": i, "text": f"doc {i}"} for i in range(1000)])
    items = load_path(path)
    assert next(items).id == "0"
    assert next(items).id == "1"


def test_empty_jsonl_has_no_records(tmp_path):
    path = tmp_path / "none.jsonl"
    path.write_text("\n\n")
    assert load_one(path) == LoadError(str(path.resolve()), "no records")


# --- CSV ---------------------------------------------------------------------------


def test_csv_multiline_field_and_numeric_metadata(tmp_path):
    path = tmp_path / "table.csv"
    path.write_bytes(
        b"id,title,text,year,score,zip,note\r\n"
        b'1,First,"A quoted field\r\nspanning, two lines",2020,3.5,02134,plain\r\n'
        b"\r\n"
        b"002,,Second row,-7,1e3,0,\r\n"
    )
    source = str(path.resolve())
    assert load(path) == [
        Document(
            id="1",
            text="A quoted field\r\nspanning, two lines",
            title="First",
            metadata={"source": source, "year": 2020, "score": 3.5, "zip": "02134", "note": "plain"},
        ),
        Document(
            id="002",
            text="Second row",
            title="",
            metadata={"source": source, "year": -7, "score": 1000.0, "zip": 0, "note": ""},
        ),
    ]


def test_csv_without_text_column_is_one_error(tmp_path):
    path = tmp_path / "cols.csv"
    path.write_text("id,name,value\n1,a,b\n2,c,d\n")
    assert load(path) == [
        LoadError(
            str(path.resolve()),
            "no 'text', 'body' or 'content' field (name one with --text-field); the columns are 'id', 'name', 'value'",
        )
    ]


def test_csv_bad_rows_are_reported_and_loading_continues(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text('id,text\n1,"bad"quote\n2,good\n3,too,many\n2,again\n4,"never closed\n')
    source = str(path.resolve())
    items = load(path)
    assert items == [
        LoadError(f"{source}:2", "malformed CSV: ',' expected after '\"'"),
        Document(id="2", text="good", metadata={"source": source}),
        LoadError(f"{source}:4", "row has 3 fields, the header has 2"),
        LoadError(f"{source}:5", "duplicate id '2' (first on line 3)"),
        LoadError(f"{source}:6", "malformed CSV: unexpected end of data"),
    ]


def test_csv_long_field_is_not_cut(tmp_path):
    path = tmp_path / "long.csv"
    text = "word " * 40_000
    path.write_text(f'id,text\n1,"{text}"\n')
    assert load_one(path).text == text


def test_csv_latin1_records_carry_encoding(tmp_path):
    path = tmp_path / "fr.csv"
    path.write_bytes(f'id,text\n1,"{FRENCH * 2}"\n'.encode("latin-1"))
    doc = load_one(path)
    assert doc.text == FRENCH * 2
    recorded = doc.metadata["encoding"]
    assert recorded.replace("_", "-").lower() not in ("utf-8", "utf8", "ascii")
    assert path.read_bytes().decode(recorded) == f'id,text\n1,"{FRENCH * 2}"\n'


def test_csv_with_only_a_header_has_no_records(tmp_path):
    path = tmp_path / "header.csv"
    path.write_text("id,text\n")
    assert load_one(path) == LoadError(str(path.resolve()), "no records")


# --- BEIR --------------------------------------------------------------------------


def make_beir(path: Path) -> Path:
    path.mkdir(parents=True)
    write_jsonl(
        path / "corpus.jsonl",
        [
            {"_id": "d1", "title": "Zinc", "text": "Zinc is a metal.", "metadata": {"year": 1999}},
            {"_id": "d2", "title": "", "text": "Iron rusts."},
        ],
    )
    write_jsonl(path / "queries.jsonl", [{"_id": "q1", "text": "what is zinc"}])
    (path / "SOURCE.md").write_text("# Source\n")
    return path


def test_beir_directory_loads_corpus_records(tmp_path):
    beir = make_beir(tmp_path / "scifact")
    assert is_beir_dir(beir)
    assert not is_beir_dir(tmp_path) and not is_beir_dir(beir / "corpus.jsonl")
    corpus = str((beir / "corpus.jsonl").resolve())
    assert load(beir) == [
        Document(
            id="d1", text="Zinc is a metal.", title="Zinc", metadata={"source": corpus, "metadata": {"year": 1999}}
        ),
        Document(id="d2", text="Iron rusts.", title="", metadata={"source": corpus}),
    ]


def test_beir_directory_ignores_plain_id_field(tmp_path):
    beir = tmp_path / "corpus"
    beir.mkdir()
    write_jsonl(beir / "corpus.jsonl", [{"_id": "real", "id": "other", "text": "t"}])
    assert [doc.id for doc in load(beir)] == ["real"]
    assert [doc.id for doc in load(beir, fields=FieldMap(id="id"))] == ["other"]


# --- walk --------------------------------------------------------------------------


def make_tree(root: Path) -> None:
    for name in [
        "b.md",
        "a.txt",
        "notes/z.html",
        "notes/a-b/deep.pdf",
        "notes/drafts/wip.md",
        "data/records.jsonl",
        "data/table.CSV",
        "image.png",
        ".hidden.md",
        ".git/config.txt",
        "notes/.cache/c.txt",
    ]:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")


def relative(root: Path, pairs) -> list[str]:
    return [path.relative_to(root).as_posix() for _, path in pairs]


def test_walk_sorted_yields_every_file_and_counts_hidden_ones(tmp_path):
    make_tree(tmp_path)
    unread: list[LoadError] = []
    pairs = list(walk([tmp_path], unread=unread))
    assert {root for root, _ in pairs} == {tmp_path}
    assert relative(tmp_path, pairs) == [
        "a.txt",
        "b.md",
        "data/records.jsonl",
        "data/table.CSV",
        "image.png",
        "notes/a-b/deep.pdf",
        "notes/drafts/wip.md",
        "notes/z.html",
    ]
    hidden = [".git", ".hidden.md", "notes/.cache"]  # a hidden folder counts once, for all it holds
    assert sorted(Path(error.source).relative_to(tmp_path).as_posix() for error in unread) == hidden
    assert all(error.unread and "hidden" in error.reason for error in unread)


def test_walk_include_and_exclude(tmp_path):
    make_tree(tmp_path)
    assert relative(tmp_path, walk([tmp_path], include=["*.md"])) == ["b.md", "notes/drafts/wip.md"]
    notes_only = walk([tmp_path], include=["notes/*"], exclude=["notes/drafts/*", "*.pdf"])
    assert relative(tmp_path, notes_only) == ["notes/z.html"]
    assert relative(tmp_path, walk([tmp_path], exclude=["*.md", "data/*"])) == [
        "a.txt",
        "image.png",
        "notes/a-b/deep.pdf",
        "notes/z.html",
    ]


def test_walk_file_root_and_duplicates(tmp_path):
    make_tree(tmp_path)
    hidden = tmp_path / ".hidden.md"
    pairs = list(walk([hidden, tmp_path / "notes", tmp_path / "notes" / "z.html"], exclude=["*.md"]))
    assert pairs == [
        (hidden, hidden),
        (tmp_path / "notes", tmp_path / "notes" / "a-b" / "deep.pdf"),
        (tmp_path / "notes", tmp_path / "notes" / "z.html"),
    ]


def test_walk_yields_beir_directories_whole(tmp_path):
    beir = make_beir(tmp_path / "datasets" / "scifact")
    (tmp_path / "datasets" / "README.md").write_text("# Datasets\n")
    assert list(walk([beir])) == [(beir, beir)]
    assert relative(tmp_path, walk([tmp_path])) == ["datasets/README.md", "datasets/scifact"]


def test_walk_missing_root_raises(tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(BadInputError, match="no such file or directory"):
        walk([tmp_path, missing])


def test_every_walked_path_loads_without_raising(tmp_path):
    make_tree(tmp_path)
    make_beir(tmp_path / "beir")
    items = [item for _, path in walk([tmp_path]) for item in load_path(path)]
    assert items
    assert all(isinstance(item, (Document, LoadError)) for item in items)
    assert all("\n" not in item.reason for item in items if isinstance(item, LoadError))
