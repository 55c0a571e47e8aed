"""What a model location is trusted with: no remote code, no manifest-named relative directory."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from retriever import Collection
from retriever.errors import BadInputError

REPO = Path(__file__).resolve().parents[3]


class Refused(Exception):
    pass


def test_models_load_without_remote_code(tiny_model_dir, monkeypatch):
    import sentence_transformers

    from retriever.encoding.models import load_sentence_transformer
    from training.contrastive import load_mean_pooling_model

    seen = []

    def recording(*args, **kwargs):
        seen.append(kwargs)
        raise Refused

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", recording)
    for load in (
        lambda: load_sentence_transformer(tiny_model_dir, None),
        lambda: load_mean_pooling_model(tiny_model_dir),
    ):
        with pytest.raises(Refused):
            load()
    assert [kwargs.get("trust_remote_code") for kwargs in seen] == [False, False]


def test_the_required_sentence_transformers_excludes_the_versions_that_import_local_code():
    """5.5 to 5.7 import the Python files a model directory's modules.json names, without trust_remote_code."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    bound = next(Requirement(r) for r in project["dependencies"] if r.startswith("sentence-transformers"))
    assert not any(bound.specifier.contains(v) for v in ("5.1.0", "5.5.0", "5.6.1", "5.7.0"))
    locked = next(
        line
        for line in (REPO / "requirements.lock").read_text().splitlines()
        if line.startswith("sentence-transformers==")
    )
    assert bound.specifier.contains(locked.split("==")[1])


def _crafted(tmp_path: Path, tiny_embedder, model_name: str) -> Path:
    path = tmp_path / "col"
    Collection.create(path, tiny_embedder).close()
    manifest = path / "manifest.json"
    data = json.loads(manifest.read_text())
    data["model"]["name"] = model_name
    manifest.write_text(json.dumps(data))
    return path


def test_a_manifest_cannot_name_a_model_directory_relative_to_the_working_directory(
    tiny_model_dir, tiny_embedder, tmp_path, monkeypatch
):
    shutil.copytree(tiny_model_dir, tmp_path / "planted")
    path = _crafted(tmp_path, tiny_embedder, "planted")
    monkeypatch.chdir(tmp_path)
    with Collection.open(path) as col:
        with pytest.raises(BadInputError, match="--model") as info:
            col.embedder
    assert "planted" in str(info.value)
    with Collection.open(path, tmp_path / "planted") as col:  # the user names it: loaded
        assert col.embedder.dim == tiny_embedder.dim


def test_model_dirs_limits_the_absolute_directories_a_manifest_may_name(
    tiny_model_dir, tiny_embedder, tmp_path, monkeypatch
):
    path = _crafted(tmp_path, tiny_embedder, str(Path(tiny_model_dir).resolve()))
    monkeypatch.setenv("SEMSEARCH_MODEL_DIRS", str(tmp_path / "elsewhere"))
    with Collection.open(path) as col:
        with pytest.raises(BadInputError, match="SEMSEARCH_MODEL_DIRS"):
            col.embedder
    monkeypatch.setenv("SEMSEARCH_MODEL_DIRS", str(Path(tiny_model_dir).resolve().parent))
    with Collection.open(path) as col:
        assert col.embedder.dim == tiny_embedder.dim
