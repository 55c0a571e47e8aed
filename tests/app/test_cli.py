"""The ``semsearch`` command, run in-process and as a real console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import main

HIT_KEYS = {"id", "score", "title", "text", "start", "end", "metadata", "evidence", "location"}


@pytest.fixture()
def docs(tmp_path) -> Path:
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    (root / "tea.txt").write_text("Green tea is steamed right after picking. " * 20, encoding="utf-8")
    (root / "sub" / "rivers.md").write_text("# Rivers\n\nRivers flow into the sea through deltas.", encoding="utf-8")
    (root / "notes.jsonl").write_text(
        json.dumps({"id": "n1", "title": "Coffee", "text": "Coffee beans are roasted.", "lang": "en"})
        + "\n"
        + "{not json\n"
        + json.dumps({"id": "n2", "title": "Kaffee", "text": "Kaffee wird geröstet.", "lang": "de"})
        + "\n",
        encoding="utf-8",
    )
    return root


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def index(capsys, docs, col, model, *extra):
    return run(capsys, "index", docs, "-c", col, "--model", model, "--quiet", *extra)


def test_index_reports_bad_line_and_keeps_the_rest(capsys, docs, tmp_path, tiny_model_dir):
    code, _, err = index(capsys, docs, tmp_path / "col", tiny_model_dir)
    assert code == 2  # something was skipped
    assert "notes.jsonl:2" in err and "invalid JSON" in err
    assert "4 document(s)" in err and "4 new" in err
    code, out, _ = run(capsys, "info", "-c", tmp_path / "col", "--json")
    assert code == 0 and json.loads(out)["documents"] == 4


def test_search_json_shape_and_metadata(capsys, docs, tmp_path, tiny_model_dir):
    index(capsys, docs, tmp_path / "col", tiny_model_dir)
    code, out, _ = run(capsys, "search", "roasted coffee", "-c", tmp_path / "col", "-k", "10", "--json")
    assert code == 0
    hits = json.loads(out)
    assert len(hits) == 4 and all(set(hit) == HIT_KEYS for hit in hits)
    by_id = {hit["id"]: hit for hit in hits}
    assert by_id["n1"]["metadata"]["lang"] == "en"
    assert by_id["n1"]["evidence"][0]["text"] == "Coffee beans are roasted."
    assert [t["term"] for t in by_id["n1"]["evidence"][0]["terms"]] == ["Coffee", "roasted"]
    tea = next(hit for hit in hits if hit["id"].endswith("tea.txt"))
    assert tea["metadata"]["source"] == str((docs / "tea.txt").resolve())
    code, out, _ = run(capsys, "search", "coffee", "-c", tmp_path / "col", "--where", '{"lang": "de"}', "--json")
    assert code == 0 and [hit["id"] for hit in json.loads(out)] == ["n2"]


def test_search_text_shows_the_evidence_sentence(capsys, docs, tmp_path, tiny_model_dir):
    index(capsys, docs, tmp_path / "col", tiny_model_dir)
    code, out, _ = run(capsys, "search", "deltas", "-c", tmp_path / "col", "--mode", "bm25")
    source = str((docs / "sub" / "rivers.md").resolve())  # beside it, the section the hit is in: its heading
    assert code == 0 and out.splitlines()[1:] == [
        "    " + source + " · Rivers",
        "    Rivers flow into the sea through deltas.",
    ]
    assert "\033[" not in out  # not a terminal: no bold
    code, out, _ = run(capsys, "search", "deltas", "-c", tmp_path / "col", "--evidence", "nonsense")
    assert code == 2


def test_reindex_is_incremental_and_prune_removes_gone_files(capsys, docs, tmp_path, tiny_model_dir):
    col = tmp_path / "col"
    index(capsys, docs, col, tiny_model_dir)
    _, out, _ = index(capsys, docs, col, tiny_model_dir, "--json")
    report = json.loads(out)
    assert (report["added"], report["updated"], report["unchanged"], report["chunks"]) == (0, 0, 4, 0)

    (docs / "sub" / "rivers.md").write_text("# Rivers\n\nRivers carve valleys.", encoding="utf-8")
    (docs / "tea.txt").unlink()
    _, out, _ = index(capsys, docs, col, tiny_model_dir, "--json")
    report = json.loads(out)
    assert (report["updated"], report["deleted"]) == (1, 0)  # no --prune: tea.txt stays
    _, out, _ = index(capsys, docs, col, tiny_model_dir, "--json", "--prune")
    assert json.loads(out)["deleted"] == 1
    _, out, _ = run(capsys, "search", "green tea", "-c", col, "--json")
    assert not any(hit["id"].endswith("tea.txt") for hit in json.loads(out))


def test_delete(capsys, docs, tmp_path, tiny_model_dir):
    col = tmp_path / "col"
    index(capsys, docs, col, tiny_model_dir)
    assert run(capsys, "delete", "n1", "-c", col)[0] == 0
    code, _, err = run(capsys, "delete", "n1", "-c", col)
    assert code == 2 and "not found: n1" in err
    _, out, _ = run(capsys, "search", "coffee", "-c", col, "-k", "10", "--json")
    assert "n1" not in [hit["id"] for hit in json.loads(out)]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["search", "x", "-c", "MISSING"], "no collection at"),
        (["search", "x", "-c", "COL", "--where", "{bad"], "filter is not valid JSON"),
        (["search", "x", "-c", "COL", "--where", '{"year": {"$near": 3}}'], "unknown operator '$near'"),
        (["search", "x", "-c", "COL", "-k", "0"], "-k must be at least 1"),
        (["search", "   ", "-c", "COL"], "query is empty"),
        (["index", "DOCS/nope", "-c", "COL"], "no such file or directory"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line_exit_2(capsys, docs, tmp_path, tiny_model_dir, argv, message):
    col = tmp_path / "col"
    index(capsys, docs, col, tiny_model_dir)
    values = {"MISSING": str(tmp_path / "missing"), "COL": str(col), "DOCS": str(docs)}
    for placeholder, value in values.items():
        argv = [arg.replace(placeholder, value) for arg in argv]
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1 and err.startswith("semsearch: error:")


def test_wrong_model_for_collection_is_refused(capsys, docs, tmp_path, tiny_model_dir):
    col = tmp_path / "col"
    index(capsys, docs, col, tiny_model_dir)
    before = json.loads(run(capsys, "info", "-c", col, "--json")[1])
    code, _, err = run(capsys, "index", docs, "-c", col, "--model", "all-MiniLM-L6-v2", "--quiet")
    assert code == 2 and "different model" in err
    after = json.loads(run(capsys, "info", "-c", col, "--json")[1])
    assert (after["documents"], after["generation"]) == (before["documents"], before["generation"])


def test_console_script_errors_without_traceback(tmp_path):
    script = Path(sys.executable).parent / "semsearch"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "app.cli"]
    result = subprocess.run(
        [*command, "search", "hello", "-c", str(tmp_path / "nowhere")], capture_output=True, text=True
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert (
        result.stderr.strip() == f"semsearch: error: no collection at {tmp_path / 'nowhere'}: directory does not exist"
    )


def test_index_reports_hostile_files_and_goes_on(capsys, tmp_path, tiny_model_dir):
    import os

    root = tmp_path / "hostile"
    root.mkdir()
    (root / "a.jsonl").write_text(
        '{"id": "ok", "text": "fine text"}\n{"id": "lone", "text": "bad \\ud800 text"}\n'
        '{"id": "new\\nline", "text": "x"}\n',
        encoding="utf-8",
    )
    with open(os.path.join(os.fsencode(root), b"b\xffname.txt"), "wb") as handle:
        handle.write(b"a file whose name is not UTF-8")
    (root / "z.txt").write_text("the file after them all", encoding="utf-8")
    code, _, err = index(capsys, root, tmp_path / "col", tiny_model_dir)
    assert code == 2 and "a.jsonl:2" in err and "UTF-8" in err and "a.jsonl:3" in err and "control character" in err
    assert "b\\xffname.txt: the file name is not valid UTF-8" in err
    assert "2 new" in err  # ok and z.txt


def test_ui_refuses_a_public_address_without_a_password(capsys, monkeypatch, tmp_path):
    pytest.importorskip("streamlit")
    monkeypatch.delenv("SEMSEARCH_UI_PASSWORD", raising=False)
    code, _, err = run(capsys, "ui", "-c", tmp_path, "--host", "0.0.0.0")
    assert code == 2 and "without a password" in err and "SEMSEARCH_UI_PASSWORD" in err


def test_ui_tells_streamlit_to_accept_only_loopback_host_names(capsys, monkeypatch, tmp_path):
    """DNS rebinding: without a password Streamlit's own Host allow-list is set, not left empty (any name)."""
    pytest.importorskip("streamlit")
    import app.commands.services as services

    monkeypatch.delenv("SEMSEARCH_UI_PASSWORD", raising=False)
    started = []
    monkeypatch.setattr(services.os, "execve", lambda _exe, argv, _env: started.append(argv))
    monkeypatch.setattr(services, "check_listen", lambda host, port: None)
    run(capsys, "ui", "-c", tmp_path)
    argv = started[0]
    hosts = [argv[i + 1] for i, flag in enumerate(argv) if flag == "--server.allowedHosts"]
    assert set(hosts) == {"localhost", "127.0.0.1", "::1"}


def test_search_imports_neither_torch_nor_transformers(docs, tmp_path, tiny_model_dir, capsys):
    """Once the model is exported (by indexing), `semsearch search` runs on tokenizers + ONNX/OpenVINO."""
    col = tmp_path / "col"
    index(capsys, docs, col, tiny_model_dir)
    code = (
        "import sys\n"
        "from app.cli import main\n"
        f"status = main(['search', 'roasted coffee', '-c', {str(col)!r}, '--json'])\n"
        "heavy = [m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules]\n"
        "print('HEAVY', heavy, status)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parents[2])
    assert result.returncode == 0, result.stderr
    hits = json.loads(result.stdout.splitlines()[0])
    assert {hit["id"] for hit in hits} >= {"n1"}
    assert result.stdout.splitlines()[-1] == "HEAVY [] 0"


def test_indexing_more_imports_neither_torch_nor_transformers(docs, tmp_path, tiny_model_dir, capsys):
    """With the export cached and a passage backend other than torch, chunking and embedding need neither."""
    col = tmp_path / "col"
    index(capsys, docs, col, tiny_model_dir)
    more = tmp_path / "more"
    more.mkdir()
    (more / "tides.txt").write_text("Tides rise and fall twice a day under the pull of the moon. " * 40, "utf-8")
    code = (
        "import sys\n"
        "from app.cli import main\n"
        f"status = main(['index', {str(more)!r}, '-c', {str(col)!r}, '--quiet'])\n"
        "heavy = [m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules]\n"
        "print('HEAVY', heavy, status)\n"
    )
    env = os.environ | {"SEMSEARCH_BACKEND": "onnx-fp32"}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parents[2], env=env
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "HEAVY [] 0"
    code, out, _ = run(capsys, "search", "moon tides", "-c", col, "--json", "--mode", "bm25")
    assert code == 0 and json.loads(out)[0]["id"].endswith("tides.txt")


def test_info_names_the_encoder_backend(capsys, docs, tmp_path, tiny_model_dir):
    index(capsys, docs, tmp_path / "col", tiny_model_dir)
    code, out, _ = run(capsys, "info", "-c", tmp_path / "col", "--json")
    assert code == 0 and json.loads(out)["backend"].split("-")[0] in ("torch", "onnx", "openvino")
    code, out, _ = run(capsys, "info", "-c", tmp_path / "col")
    assert "backend" in out and "threads" in out


def test_serve_takes_the_api_key_from_a_file_so_that_ps_does_not_show_it(
    capsys, monkeypatch, tmp_path, docs, tiny_model_dir
):
    pytest.importorskip("fastapi")
    import app.server.service as service
    from app.commands.services import UsageError

    index(capsys, docs, tmp_path / "col", tiny_model_dir)
    monkeypatch.delenv("SEMSEARCH_API_KEY", raising=False)
    key_file = tmp_path / "key"
    key_file.write_text("from-the-file\n")
    seen = []
    monkeypatch.setattr(
        service,
        "key_ring",
        lambda api_key, keys: seen.append(api_key) or (_ for _ in ()).throw(UsageError("stop here")),
    )
    run(capsys, "serve", "-c", tmp_path / "col", "--api-key-file", key_file)
    assert seen == ["from-the-file"]
    code, _, err = run(capsys, "serve", "-c", tmp_path / "col", "--api-key-file", tmp_path / "missing")
    assert code == 2 and "--api-key-file" in err


def test_index_codes_at_creation_and_by_compact(capsys, docs, tmp_path, tiny_model_dir):
    from retriever import Collection

    index(capsys, docs, tmp_path / "col", tiny_model_dir, "--index-codes", "always")
    with Collection.open(tmp_path / "col") as col:
        assert col.index_policy.codes == "always"
        assert {p.segment.index_type for p in col.reader.current().parts} == {"ivf-rabitq"}
    code, _, err = index(capsys, docs, tmp_path / "col", tiny_model_dir, "--index-codes", "float32")
    assert code == 2 and "apply only when a collection is created" in err
    code, _, err = run(capsys, "compact", "-c", tmp_path / "col", "--max-segment-chunks", "0")
    assert code == 2 and "max_segment_chunks must be a positive integer" in err
    code, _, err = run(
        capsys, "compact", "-c", tmp_path / "col", "--index-codes", "float32", "--max-segment-chunks", "2"
    )
    assert code == 0 and "index codes float32" in err and "1 segment(s) -> 1," in err  # never split, rewritten alone
    with Collection.open(tmp_path / "col") as col:
        assert [p.segment.index_type for p in col.reader.current().parts] == ["flat"]
    code, out, _ = run(capsys, "search", "roasted coffee", "-c", tmp_path / "col", "--json")
    assert code == 0 and json.loads(out)[0]["id"] == "n1"


def test_snapshot_and_restore_commands(capsys, docs, tmp_path, tiny_model_dir):
    index(capsys, docs, tmp_path / "col", tiny_model_dir)
    code, out, err = run(capsys, "snapshot", "-c", tmp_path / "col", tmp_path / "snap", "--json")
    report = json.loads(out)
    assert code == 0 and report["documents"] == 4 and report["linked"] > 0 and "4 document(s)" in err
    code, out, err = run(capsys, "restore", tmp_path / "snap", tmp_path / "live", "--json")
    assert code == 0 and json.loads(out)["documents"] == 4 and "restored" in err
    code, out, _ = run(capsys, "search", "deltas", "-c", tmp_path / "live", "--mode", "bm25", "--json")
    assert code == 0 and json.loads(out)[0]["title"] == "Rivers"
    code, _, err = run(capsys, "snapshot", "-c", tmp_path / "col", tmp_path / "snap")
    assert code == 2 and "exists" in err


def test_check_reports_damage_and_repair_prints_the_ids_to_index_again(capsys, docs, tmp_path, tiny_model_dir):
    index(capsys, docs, tmp_path / "col", tiny_model_dir)
    code, out, err = run(capsys, "check", "-c", tmp_path / "col", "--json")
    assert code == 0 and json.loads(out)["ok"] and "0 damaged file(s)" in err
    text = next((tmp_path / "col" / "segments").glob("*/text.bin"))
    text.write_bytes(text.read_bytes()[:-1] + b"!")
    code, out, err = run(capsys, "check", "-c", tmp_path / "col")
    assert code == 1 and f"damaged: {text.parent.name}/text.bin: checksum" in err and out == ""
    code, out, err = run(capsys, "check", "-c", tmp_path / "col", "--repair")
    assert code == 0 and "repaired" in err and len(out.split()) == 4  # every document was in that one segment
    code, out, _ = run(capsys, "info", "-c", tmp_path / "col", "--json")
    assert json.loads(out)["documents"] == 0
