"""A collection directory whose manifest is lost is refused, never taken for a half-made one and wiped."""

from __future__ import annotations

import pytest

from retriever import BadInputError, Collection
from retriever.storage.manifest import DEFAULT_CATALOG, MANIFEST
from retriever.storage.segment import SEGMENTS_DIR

DOCS = [{"id": f"d{i}", "text": f"tea rivers note {i} " * 4} for i in range(3)]


def listing(path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def test_create_over_a_collection_that_lost_its_manifest_refuses(catalog_url, tiny_embedder, tmp_path):
    path = tmp_path / "col"
    with Collection.create(path, tiny_embedder, catalog_url=catalog_url) as col:
        col.add(DOCS)
    manifest = (path / MANIFEST).read_text()
    (path / MANIFEST).unlink()
    before = listing(path)
    with pytest.raises(BadInputError, match=f"no {MANIFEST}.*nothing was removed"):
        Collection.create(path, tiny_embedder, catalog_url=catalog_url)
    with pytest.raises(BadInputError, match=f"no {MANIFEST}"):
        Collection.open_or_create(path, tiny_embedder, catalog_url=catalog_url)  # what `semsearch index` does
    assert listing(path) == before
    (path / MANIFEST).write_text(manifest)  # restoring the manifest brings every document back
    with Collection.open(path, tiny_embedder) as col:
        assert sorted(col.ids()) == [d["id"] for d in DOCS]


def test_a_lost_manifest_is_seen_from_the_catalog_alone(tiny_embedder, tmp_path):
    path = tmp_path / "col"
    with Collection.create(path, tiny_embedder) as col:
        col.add(DOCS)
    (path / MANIFEST).unlink()
    (path / "HEAD").unlink()
    for segment in (path / SEGMENTS_DIR).iterdir():
        (segment / "segment.json").unlink()
    with pytest.raises(BadInputError, match=f"{DEFAULT_CATALOG} is at generation 1"):
        Collection.create(path, tiny_embedder)
    assert (path / DEFAULT_CATALOG).stat().st_size > 0


def test_the_leftovers_of_an_interrupted_create_are_still_cleared(tiny_embedder, tmp_path):
    path = tmp_path / "col"
    Collection.create(path, tiny_embedder).close()
    (path / MANIFEST).unlink()  # as if the create died just before its last step
    with Collection.create(path, tiny_embedder) as col:
        col.add(DOCS[:1])
        assert len(col) == 1
