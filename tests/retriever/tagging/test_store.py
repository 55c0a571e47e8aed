"""Taggers on disk: any field name is a safe file, and a damaged file is an error naming it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from retriever.errors import CorruptCollectionError
from retriever.tagging.classifier import Tagger
from retriever.tagging.store import load_tagger, load_taggers, save_tagger, tagger_path


def tagger(field: str) -> Tagger:
    return Tagger(field, "embedding", ["a", "b"], np.ones((1, 4)), np.zeros(1), {"name": "m", "sha256": "f" * 64})


def test_round_trip_with_any_field_name(tmp_path):
    names = ["topic", "../../etc/passwd", "größe/ünit", "a" * 200]
    for name in names:
        save_tagger(tmp_path, tagger(name))
    loaded = load_taggers(tmp_path)
    assert sorted(loaded) == sorted(names)
    assert all(p.parent == tmp_path / "taggers" for p in (tagger_path(tmp_path, n) for n in names))
    assert load_tagger(tmp_path, "topic").classes == ["a", "b"] and load_tagger(tmp_path, "none") is None


def test_a_flipped_byte_is_found(tmp_path):
    save_tagger(tmp_path, tagger("topic"))
    path = tagger_path(tmp_path, "topic")
    document = json.loads(path.read_text(encoding="utf-8"))
    document["tagger"] = document["tagger"].replace('"a"', '"x"', 1)
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(CorruptCollectionError, match=f"tagger {path} is damaged"):
        load_taggers(tmp_path)


def test_foreign_files_are_refused(tmp_path):
    save_tagger(tmp_path, tagger("topic"))
    path = tagger_path(tmp_path, "topic")
    moved = tagger_path(tmp_path, "other")
    path.rename(moved)  # a tagger under another field's name
    with pytest.raises(CorruptCollectionError, match="belongs in another file"):
        load_taggers(tmp_path)
    moved.unlink()
    outside = tmp_path / "outside.json"
    outside.write_text("{}", encoding="utf-8")
    path.symlink_to(outside)
    with pytest.raises(CorruptCollectionError, match="symbolic link"):
        load_tagger(tmp_path, "topic")
    path.unlink()
    path.write_text("not json", encoding="utf-8")
    with pytest.raises(CorruptCollectionError, match="unreadable"):
        load_taggers(tmp_path)
