"""``semsearch index --shards``, ``semsearch shard split`` and the upkeep commands on a sharded folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from retriever import Collection
from retriever.sharding import ShardedCollection, is_sharded, open_collection
from tests.retriever.sharding.helpers import assert_same_hits, corpus


@pytest.fixture()
def records(tmp_path) -> Path:
    """A JSONL file of 60 records (the library's ``json`` writes it)."""
    path = tmp_path / "records.jsonl"
    lines = [json.dumps({"id": d["id"], "title": d["title"], "text": d["text"], **d["metadata"]}) for d in corpus(60)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_index_with_shards_then_search_info_and_split(capsys, records, tmp_path, tiny_model_dir):
    sharded_dir, one_dir = tmp_path / "sharded", tmp_path / "one"
    code, _, err = run(capsys, "index", records, "-c", sharded_dir, "--model", tiny_model_dir, "--shards", "3", "-q")
    assert code == 0, err
    assert is_sharded(sharded_dir) and sorted(p.name for p in sharded_dir.glob("shard-*")) == [
        "shard-000",
        "shard-001",
        "shard-002",
    ]
    assert run(capsys, "index", records, "-c", one_dir, "--model", tiny_model_dir, "-q")[0] == 0
    code, _, err = run(capsys, "index", records, "-c", sharded_dir, "-q")  # again: unchanged, found sharded
    assert code == 0 and "60" in err
    code, out, _ = run(capsys, "info", "-c", sharded_dir, "--json")
    info = json.loads(out)
    assert code == 0 and info["documents"] == 60 and len(info["shards"]) == 3
    with open_collection(sharded_dir) as sharded, Collection.open(one_dir) as one:
        assert isinstance(sharded, ShardedCollection)
        for mode in ("dense", "bm25", "hybrid"):
            assert_same_hits(one.search("coffee beans", k=8, mode=mode), sharded.search("coffee beans", k=8, mode=mode))
    searched = {}
    for folder in (sharded_dir, one_dir):
        code, out, _ = run(capsys, "search", "coffee beans", "-c", folder, "-k", "5", "--json")
        searched[folder] = [(hit["id"], round(hit["score"], 5)) for hit in json.loads(out)]
        assert code == 0
    assert searched[sharded_dir] == searched[one_dir] and len(searched[one_dir]) == 5
    code, _, err = run(capsys, "eval", "-c", sharded_dir)
    assert code != 0 and "sharded collection" in err

    code, out, _ = run(capsys, "shard", "split", "-c", one_dir, "--into", tmp_path / "split", "--shards", "2", "--json")
    assert code == 0 and json.loads(out)["documents"] == 60 and len(json.loads(out)["shards"]) == 2
    with ShardedCollection.open(tmp_path / "split") as split, Collection.open(one_dir) as one:
        assert_same_hits(one.search("rivers sea", k=8), split.search("rivers sea", k=8))


def test_upkeep_commands_on_a_sharded_folder(capsys, records, tmp_path, tiny_model_dir):
    col = tmp_path / "sharded"
    assert run(capsys, "index", records, "-c", col, "--model", tiny_model_dir, "--shards", "2", "-q")[0] == 0
    code, out, _ = run(capsys, "check", "-c", col, "--json")
    assert code == 0 and json.loads(out)["ok"] and json.loads(out)["segments"] == 2
    code, _, err = run(capsys, "delete", "-c", col, "doc-001", "doc-002")
    assert code == 0 and "deleted 2" in err
    code, _, err = run(capsys, "compact", "-c", col)
    assert code == 0 and "compacted" in err
    code, out, _ = run(capsys, "snapshot", "-c", col, tmp_path / "snap", "--json")
    assert code == 0 and json.loads(out)["documents"] == 58
    code, out, _ = run(capsys, "restore", tmp_path / "snap", tmp_path / "live", "--json")
    assert code == 0 and json.loads(out)["documents"] == 58
    with open_collection(tmp_path / "live") as live:
        assert isinstance(live, ShardedCollection) and "doc-001" not in live and "doc-003" in live


def test_shard_flags_are_refused_where_they_cannot_apply(capsys, records, tmp_path, tiny_model_dir):
    col = tmp_path / "one"
    assert run(capsys, "index", records, "-c", col, "--model", tiny_model_dir, "-q")[0] == 0
    code, _, err = run(capsys, "index", records, "-c", col, "--shards", "2", "-q")
    assert code == 2 and "--shards" in err
    code, _, err = run(capsys, "index", records, "-c", tmp_path / "new", "--shards", "0", "-q")
    assert code == 2 and "shards" in err
    code, _, err = run(capsys, "shard", "split", "-c", col, "--into", col, "--shards", "2")
    assert code == 2
