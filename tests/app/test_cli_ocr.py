"""``semsearch index --ocr-lang``: the languages scans are read in, checked before the collection is touched."""

from __future__ import annotations

import os
import shutil

import pytest

from app.cli import main
from indexer.loaders.ocr import configure_ocr

pytestmark = pytest.mark.skipif(shutil.which("tesseract") is None, reason="needs Tesseract (Debian tesseract-ocr)")


def index_notes(tmp_path, tiny_model_dir, languages: str) -> int:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("Rivers carry silt.", encoding="utf-8")
    argv = ["index", str(tmp_path / "notes"), "-c", str(tmp_path / "col"), "--model", str(tiny_model_dir)]
    return main([*argv, "--ocr-lang", languages, "-q"])


def test_a_language_without_its_tesseract_data_is_refused_naming_the_package(tmp_path, capsys, tiny_model_dir):
    code = index_notes(tmp_path, tiny_model_dir, "eng+zzz")
    assert code == 2 and "tesseract-ocr-zzz" in capsys.readouterr().err
    assert not (tmp_path / "col").exists()  # refused before the collection was created


def test_installed_languages_are_taken_and_the_run_goes_on(tmp_path, capsys, tiny_model_dir, monkeypatch):
    monkeypatch.setenv("SEMSEARCH_OCR_LANG", "eng")  # the CLI sets it for Ray workers: put back after the test
    try:
        code = index_notes(tmp_path, tiny_model_dir, "eng+deu")
    finally:
        taken = configure_ocr(None)  # the process-wide setting, put back to the environment's
    assert code == 0, capsys.readouterr().err
    assert taken is not None and tuple(taken.languages) == ("eng", "deu")  # this process reads scans in both
    assert os.environ["SEMSEARCH_OCR_LANG"] == "eng+deu"  # and so do Ray workers
