"""Documents for the readers' tests, made by the tools people make them with (pandoc here; the format's own
Python library in each test module), and what to ask of them."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from indexer.loaders.common import Rejected
from retriever.locations import location_at

needs_pandoc = pytest.mark.skipif(shutil.which("pandoc") is None, reason="needs pandoc to make the documents")

# Headings two deep, a footnote, a list and a table: what the readers must keep apart and in order.
MARKDOWN = """---
title: Field Notes
author: Ada Lovelace
date: 2024-03-05
---

# Rivers

Rivers carry sediment to the sea.

## Deltas

A delta forms where a river meets still water.[^1]

- first item about silt
- second item about sand

| Name | Length |
|------|--------|
| Nile | 6650 |
| Amazon | 6400 |

# Mountains

Mountains rise where plates collide.

[^1]: Footnote about deltas.
"""


def pandoc(folder: Path, suffix: str, markdown: str = MARKDOWN, *options: str) -> Path:
    """``markdown`` converted by pandoc (standalone) into ``folder/made.<suffix>``."""
    source = folder / "made.md"
    source.write_text(markdown, encoding="utf-8")
    target = folder / f"made.{suffix}"
    subprocess.run(["pandoc", str(source), "-s", "-o", str(target), *options], check=True, capture_output=True)
    return target


def located(document, phrase: str) -> dict | None:
    """The location of the part of ``document`` that holds ``phrase`` (which it must hold)."""
    offset = document.text.find(phrase)
    assert offset >= 0, f"{phrase!r} not in {document.text!r}"
    return location_at(document.metadata, offset)


def cut_in_half(path: Path, folder: Path) -> Path:
    """A copy of ``path`` holding its first half only, as a broken download leaves it."""
    data = path.read_bytes()
    half = folder / f"half-{path.name}"
    half.write_bytes(data[: len(data) // 2])
    return half


def rejected(read, path: Path) -> str:
    """The reason ``read`` refuses ``path`` with (it must refuse it)."""
    with pytest.raises(Rejected) as refused:
        list(read(path, str(path), path.stem))
    return str(refused.value)


def entity_bomb(path: Path, target: Path, members: tuple[str, ...], word: str) -> Path:
    """A copy of the ZIP package ``path`` whose ``members`` declare nested entities ("billion laughs": the last
    one would expand to 10**9 "lol"s) and put the deepest in place of ``word``."""
    laughs = "".join(f'<!ENTITY l{n} "{("&l%d;" % (n - 1)) * 10 if n else "lol"}">' for n in range(10))
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(target, "w") as out:
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename in members:
                text = data.decode("utf-8")
                body = text.split("?>", 1)[1] if text.startswith("<?xml") else text
                root = body.lstrip().split()[0].lstrip("<").rstrip(">")
                text = f'<?xml version="1.0" encoding="UTF-8"?><!DOCTYPE {root} [{laughs}]>{body}'
                data = text.replace(word, "&l9;").encode("utf-8")
            out.writestr(info, data)
    return target


def refused_or_unexpanded(read, path: Path) -> str:
    """What reading an entity bomb gives: its refusal, or (read with the entity left alone) its text.

    Either way it must come back at once, without the expansion in the text.
    """
    try:
        (document,) = read(path, str(path), path.stem)
    except Rejected as refused:
        return str(refused)
    assert "lollol" not in document.text
    return document.text
