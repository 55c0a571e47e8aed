"""Generated folders of files: the indexer reports each bad file or record and indexes the rest."""

from __future__ import annotations

import json
import os

from hypothesis import given, settings
from hypothesis import strategies as st

from indexer.job import index_paths
from indexer.loaders import shown_path
from tests.hostile.conftest import case, examples
from tests.hostile.strategies import hostile_text, json_like, nested

SUFFIXES = [".txt", ".md", ".jsonl", ".csv", ".html", ".htm", ".pdf", ".TXT"]
names = st.binary(min_size=1, max_size=10).filter(
    lambda b: b"/" not in b and b"\x00" not in b and not b.startswith(b".")
)
record = st.fixed_dictionaries(
    {"id": st.one_of(hostile_text, json_like), "text": st.one_of(hostile_text, st.just("plain words"), json_like)},
    optional={"title": st.one_of(hostile_text, json_like), "meta": st.one_of(json_like, nested(60))},
)
jsonl_line = st.one_of(record.map(lambda r: json.dumps(r, ensure_ascii=True).encode()),
                       st.binary(max_size=40),
                       st.integers(1, 3000).map(lambda n: b'{"id": "deep", "text": "x", "m": ' + b"[" * n
                                                + b"]" * n + b"}"))
contents = st.one_of(
    st.lists(jsonl_line, max_size=5).map(lambda lines: b"\n".join(lines)),
    st.binary(max_size=200),
    hostile_text.map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.sampled_from([b"", b"\xef\xbb\xbf", b"%PDF-1.4 broken", b"<html><title>\xff</title>x</html>",
                     b"id,text\n1,hello\n2\n3,\xff\xfe", "Grüße aus Köln".encode("latin-1")]),
)
folders = st.lists(st.tuples(names, st.sampled_from(SUFFIXES), contents), min_size=1, max_size=5,
                   unique_by=lambda f: f[0].lower() + f[1].lower().encode())


@settings(max_examples=examples(40))
@given(folder=folders)
def test_every_file_is_indexed_or_reported_and_the_run_goes_on(col, folder, tmp_path_factory):
    root = tmp_path_factory.mktemp("in")
    written = set()
    for name, suffix, data in folder:
        path = os.path.join(os.fsencode(root), name + suffix.encode())
        with open(path, "wb") as handle:
            handle.write(data)
        written.add(path)
    with case("files"):
        before = len(col)
        report = index_paths(col, [root], progress=False)
        assert report.files == len(written)
        report.summary().encode("utf-8")  # printable as is
        json.dumps(report.to_dict(), ensure_ascii=False).encode("utf-8")
        assert len(col) == before + len(report.written.added)
        accounted = {_file_of(error.source) for error in report.skipped}
        w = report.written
        accounted |= {col.get(doc_id).metadata.get("source") for doc_id in w.added + w.updated + w.unchanged}
        for path in written:  # each file gave documents or is named with its reason
            assert shown_path(os.path.realpath(path)) in accounted, (path, report.summary())


def _file_of(source: str) -> str:
    head, _, tail = source.rpartition(":")
    return head if head and tail.isdigit() else source
