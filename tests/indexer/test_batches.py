"""Tests for indexer.batches: the one batch writer of the job, the Ray job and the UI's uploads."""

from __future__ import annotations

import pytest

from indexer.batches import MAX_BATCH_CHARS, BatchWriter, refusal_reason
from retriever import Collection, WriteReport
from retriever.documents import Document
from retriever.errors import BadInputError, CollectionLockedError


class Recorder:
    """A writer's three callbacks and a ``write`` that refuses the ids in ``bad``, all recorded."""

    def __init__(self, bad: set[str] = frozenset(), error: type[Exception] = BadInputError) -> None:
        self.bad, self.error = bad, error
        self.calls: list[list[str]] = []  # ids of every write asked for
        self.batches: list[list[str]] = []  # ids of every write that went in
        self.refusals: list[tuple[str, str]] = []

    def write(self, docs: list[Document]) -> WriteReport:
        ids = [doc.id for doc in docs]
        self.calls.append(ids)
        bad = [i for i in ids if i in self.bad]
        if bad:
            raise self.error(f"document {bad[0]}: refused")
        return WriteReport(added=ids)

    def writer(self, **limits) -> BatchWriter:
        return BatchWriter(
            self.write,
            lambda docs, report: self.batches.append(report.added),
            lambda doc, reason: self.refusals.append((doc.id, reason)),
            **limits,
        )


def docs(*sizes: int) -> list[Document]:
    return [Document(f"d{i}", "x" * size) for i, size in enumerate(sizes)]


def test_a_batch_is_cut_at_max_docs():
    rec = Recorder()
    rec.writer(max_docs=2).add_all(docs(1, 1, 1, 1, 1))
    assert rec.batches == [["d0", "d1"], ["d2", "d3"], ["d4"]]


def test_a_batch_over_the_character_cap_is_split_before_it_goes_over():
    rec = Recorder()
    rec.writer(max_docs=100, max_chars=10).add_all(docs(4, 4, 4, 10, 25, 1))
    # 4+4 fits, a third 4 would make 12; 10 alone; 25 is longer than the cap: a batch of its own
    assert rec.batches == [["d0", "d1"], ["d2"], ["d3"], ["d4"], ["d5"]]
    assert BatchWriter(rec.write, print, print).max_chars == MAX_BATCH_CHARS  # the default cap


def test_a_bad_document_is_reported_and_the_rest_of_its_batch_goes_in():
    rec = Recorder(bad={"d1"})
    rec.writer(max_docs=3).add_all(docs(1, 1, 1, 1))
    assert rec.calls == [["d0", "d1", "d2"], ["d0"], ["d1"], ["d2"], ["d3"]]
    assert rec.batches == [["d0"], ["d2"], ["d3"]]
    assert rec.refusals == [("d1", "document d1: refused")]


def test_a_lone_refused_document_is_not_written_twice():
    rec = Recorder(bad={"d0"})
    rec.writer(max_docs=1).add_all(docs(1, 1))
    assert rec.calls == [["d0"], ["d1"]]
    assert rec.refusals == [("d0", "document d0: refused")]


def test_other_document_errors_are_reported_with_their_type():
    rec = Recorder(bad={"d0"}, error=TypeError)
    rec.writer().add_all(docs(1, 1))
    assert rec.refusals == [("d0", "TypeError: document d0: refused")]
    assert refusal_reason(BadInputError("plain")) == "plain"


def test_an_error_of_the_collection_itself_is_not_caught():
    rec = Recorder(bad={"d1"}, error=CollectionLockedError)
    writer = rec.writer()
    writer.add(docs(1)[0])
    with pytest.raises(CollectionLockedError):
        writer.add_all(docs(1, 1))
    assert rec.refusals == [] and rec.batches == []


def test_starting_hears_each_batch_not_the_retries():
    rec = Recorder(bad={"d1"})
    started = []
    BatchWriter(rec.write, lambda *_: None, lambda *_: None, max_docs=2, starting=started.append).add_all(docs(1, 1, 1))
    assert [[d.id for d in batch] for batch in started] == [["d0", "d1"], ["d2"]]


def test_into_a_collection_the_bad_document_is_skipped_with_the_collections_reason(tmp_path, tiny_embedder):
    refused: list[tuple[str, str]] = []
    written = WriteReport()
    batch = [
        Document("a", "Glaciers carve valleys."),
        Document("b", "   "),  # blank text: the collection refuses it
        Document("c", "Deserts receive little rain."),
    ]
    with Collection.create(tmp_path / "col", tiny_embedder) as col:
        writer = BatchWriter(
            col.upsert, lambda _, report: written.merge(report), lambda d, r: refused.append((d.id, r))
        )
        writer.add_all(batch)
        assert sorted(col.ids()) == ["a", "c"]
    assert written.added == ["a", "c"]
    assert refused == [("b", "document 'b': text is empty")]


def refuse(ids: set[str]):
    """A ``Collection.upsert`` that refuses the documents in ``ids``, as for a bad document."""
    upsert = Collection.upsert

    def refusing(self, documents, vectors=None):
        documents = list(documents)
        for doc in documents:
            if doc.id in ids:
                raise BadInputError(f"document {doc.id!r}: refused")
        return upsert(self, documents, vectors)

    return refusing


def test_the_job_skips_a_refused_document_with_its_source_and_reason(tmp_path, tiny_embedder, monkeypatch):
    from indexer.job import index_paths
    from indexer.loaders import LoadError

    corpus = tmp_path / "notes"
    corpus.mkdir()
    for name in ("a", "b", "c"):
        (corpus / f"{name}.txt").write_text(f"Note {name} about rivers and mountains.", encoding="utf-8")
    bad = str((corpus / "b.txt").resolve())
    monkeypatch.setattr(Collection, "upsert", refuse({bad}))
    with Collection.create(tmp_path / "col", tiny_embedder) as col:
        report = index_paths(col, [corpus], progress=False)
        assert sorted(col.ids()) == sorted(str((corpus / f"{n}.txt").resolve()) for n in "ac")
    assert report.skipped == [LoadError(bad, f"document {bad!r}: refused")]
    assert len(report.written.added) == 2
