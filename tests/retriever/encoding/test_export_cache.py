"""The export cache stays bounded: the least recently loaded exports go when a new one is written."""

from __future__ import annotations

import json
import os

import numpy as np

from retriever import Embedder
from retriever.encoding import export
from retriever.encoding.export import EXPORT_FORMAT, load_export
from retriever.encoding.export_cache import forget_removed_locations, prune_exports


def _fake_exports(folder, count: int) -> list[str]:
    """``count`` readable export folders (meta only), the first loaded longest ago."""
    names = []
    for i in range(count):
        name = f"{i:064x}"
        path = folder / name
        path.mkdir(parents=True)
        meta = {"format": EXPORT_FORMAT, "weights_sha256": name, "dim": 8, "max_tokens": 16, "do_lower_case": False}
        (path / "meta.json").write_text(json.dumps(meta))
        os.utime(path, ns=(i * 10**9, i * 10**9))
        names.append(name)
    return names


def _recorded(root) -> list[str]:
    """The weight hashes that ``locations/`` records name."""
    return sorted(json.loads(p.read_text())["weights_sha256"] for p in (root / "locations").glob("*.json"))


def test_location_records_of_removed_exports_are_forgotten(tmp_path):
    names = _fake_exports(tmp_path / "exported", 2)
    locations = tmp_path / "locations"
    locations.mkdir()
    for i, name in enumerate([*names, "f" * 64]):  # the last names an export that is gone
        (locations / f"{i}.json").write_text(json.dumps({"location": f"/models/{i}", "weights_sha256": name}))
    (locations / "torn.json").write_text('{"location": ')  # unreadable
    removed = forget_removed_locations(tmp_path)
    assert sorted(p.name for p in removed) == ["2.json", "torn.json"]
    assert _recorded(tmp_path) == sorted(names)
    assert forget_removed_locations(tmp_path / "no-cache-yet") == []


def test_pruning_keeps_the_most_recently_loaded_and_the_export_just_made(tmp_path):
    folder = tmp_path / "exported"
    names = _fake_exports(folder, 6)
    writing = folder / (".tmp-1-" + "0" * 32)
    writing.mkdir()  # an export being written: not an export yet
    removed = prune_exports(folder, keep=3, spare=names[0])
    assert sorted(p.name for p in removed) == names[1:4]
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) == [names[0], names[4], names[5]]
    assert writing.is_dir()
    assert not list(folder.glob(".stale-*"))  # moved aside, then deleted


def test_loading_an_export_makes_it_the_most_recent(tmp_path):
    folder = tmp_path / "exported"
    names = _fake_exports(folder, 4)
    assert load_export(names[0], tmp_path) is not None  # the oldest, loaded now
    prune_exports(folder, keep=2)
    assert sorted(p.name for p in folder.iterdir()) == sorted([names[0], names[3]])


def test_a_new_export_removes_the_least_recently_loaded_and_its_users_keep_working(
    tiny_model_dir, perturbed_model_dir, tmp_path, monkeypatch
):
    monkeypatch.setattr(export, "MAX_EXPORTS", 1)
    first = Embedder(tiny_model_dir, backend="onnx", cache_dir=tmp_path)
    before = first.embed(["a cached export"])
    second = Embedder(perturbed_model_dir, backend="onnx", cache_dir=tmp_path)
    assert [p.name for p in (tmp_path / "exported").iterdir()] == [second.weights_sha256]
    assert _recorded(tmp_path) == [second.weights_sha256]  # the first's location record went with its export
    assert np.allclose(first.embed(["a cached export"]), before)  # its graph is loaded already
    again = Embedder(tiny_model_dir, backend="onnx", cache_dir=tmp_path)  # exported again, the other one goes
    assert [p.name for p in (tmp_path / "exported").iterdir()] == [first.weights_sha256]
    assert _recorded(tmp_path) == [first.weights_sha256]
    assert np.allclose(again.embed(["a cached export"]), before, atol=1e-6)
