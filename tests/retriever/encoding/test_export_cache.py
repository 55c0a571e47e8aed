"""The export cache stays bounded: the least recently loaded exports go when a new one is written, unless in use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from retriever import Embedder
from retriever.encoding import export
from retriever.encoding.export import EXPORT_FORMAT, load_export
from retriever.encoding.export_cache import forget_removed_locations, prune_exports

REPO = Path(__file__).resolve().parents[3]


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


def test_a_new_export_keeps_the_exports_in_use_and_removes_them_once_unused(
    tiny_model_dir, perturbed_model_dir, tmp_path, monkeypatch
):
    monkeypatch.setattr(export, "MAX_EXPORTS", 1)
    first = Embedder(tiny_model_dir, backend="onnx", cache_dir=tmp_path)
    before = first.embed(["a cached export"])
    second = Embedder(perturbed_model_dir, backend="onnx", cache_dir=tmp_path)
    unused = second.weights_sha256
    exported = sorted([first.weights_sha256, unused])
    assert sorted(p.name for p in (tmp_path / "exported").iterdir()) == exported  # the first is in use
    assert _recorded(tmp_path) == exported
    del first, second  # their leases go with them
    again = Embedder(tiny_model_dir, backend="onnx", cache_dir=tmp_path)  # found in the cache, leased again
    assert np.allclose(again.embed(["a cached export"]), before, atol=1e-6)
    assert [p.name for p in prune_exports(tmp_path / "exported", keep=1)] == [unused]
    assert [p.name for p in (tmp_path / "exported").iterdir()] == [again.weights_sha256]


def test_a_record_that_is_not_an_object_finds_no_export(tiny_model_dir, tmp_path):
    export.remember_location(tiny_model_dir, "0" * 64, tmp_path)
    (record,) = (tmp_path / "locations").glob("*.json")
    record.write_text("[1, 2]")  # JSON, but not a record
    assert export.find_export(tiny_model_dir, tmp_path) is None
    assert forget_removed_locations(tmp_path) == [record]


_SERVE_LONG_PASSAGES = """
import sys
from retriever import Embedder

embedder = Embedder(sys.argv[1], backend="openvino-fp32", cache_dir=sys.argv[2])
print(embedder.weights_sha256, flush=True)
sys.stdin.readline()  # until the other process has written its export
texts = [" ".join(["green tea after picking"] * 12)] * 40  # more rows than fixed shapes take: the dynamic graph
vectors = embedder.embed(texts, batch_size=len(texts))
print(vectors.shape[0], flush=True)
"""

_HOLD_EXPORT = """
import sys
from retriever.encoding.export import load_export

held = load_export(sys.argv[1], sys.argv[2])
print("held" if held is not None else "missing", flush=True)
sys.stdin.readline()
"""


def _python(code: str, *args) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", code, *map(str, args)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )


def test_an_export_a_running_process_uses_survives_other_processes_exports(
    tiny_model_dir, perturbed_model_dir, tmp_path, monkeypatch
):
    """A server compiles OpenVINO's variable-size graph from its export only at its first large batch."""
    with _python(_SERVE_LONG_PASSAGES, tiny_model_dir, tmp_path) as server:
        try:
            in_use = server.stdout.readline().strip()
            assert in_use, server.stderr.read()
            monkeypatch.setattr(export, "MAX_EXPORTS", 1)
            other = Embedder(perturbed_model_dir, backend="onnx", cache_dir=tmp_path)  # prunes beyond one export
            out, err = server.communicate("go\n", timeout=300)
        finally:
            if server.poll() is None:
                server.kill()
    assert server.returncode == 0 and out.strip() == "40", err
    assert sorted(p.name for p in (tmp_path / "exported").iterdir()) == sorted([in_use, other.weights_sha256])


def test_pruning_passes_by_exports_leased_by_live_processes_only(tmp_path):
    folder = tmp_path / "exported"
    names = _fake_exports(folder, 3)
    with _python(_HOLD_EXPORT, names[0], tmp_path) as holder:  # the oldest, in use by another process
        try:
            assert holder.stdout.readline().strip() == "held", holder.stderr.read()
            os.utime(folder / names[0], ns=(0, 0))  # loaded long ago, in use since
            assert sorted(p.name for p in prune_exports(folder, keep=2)) == [names[1]]  # it counts as loaded now
            assert sorted(p.name for p in folder.iterdir()) == [names[0], names[2]]
        finally:
            holder.kill()  # killed: its lease goes with it
            holder.wait()
    assert [p.name for p in prune_exports(folder, keep=1)] == [names[0]]
    assert [p.name for p in folder.iterdir()] == [names[2]]


def test_the_same_weights_with_a_shorter_window_read_their_own_window(tiny_model_dir, tmp_path):
    import shutil

    own_window = Embedder(str(tiny_model_dir), backend="onnx-fp32", cache_dir=tmp_path / "alone").max_tokens
    shorter = tmp_path / "shorter"
    shutil.copytree(tiny_model_dir, shorter)
    config = shorter / "sentence_bert_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "max_seq_length": own_window - 8}))
    cache = tmp_path / "cache"
    first = Embedder(str(shorter), backend="onnx-fp32", cache_dir=cache)  # the export cached with this window
    second = Embedder(str(tiny_model_dir), backend="onnx-fp32", cache_dir=cache)  # same weights, same export
    assert first.weights_sha256 == second.weights_sha256
    assert (first.max_tokens, second.max_tokens) == (own_window - 8, own_window)
