"""The memory a fresh process serving a ``benchmarks.scale`` collection holds: private, and file-backed (shared)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

READER = """
import json, sys
import numpy as np
from retriever import Collection

def resident():
    kb = dict(line.split()[:2] for line in open("/proc/self/status") if line.startswith(("RssAnon", "RssFile")))
    return {"private_bytes": int(kb["RssAnon:"]) * 1024, "file_bytes": int(kb["RssFile:"]) * 1024}

col = Collection.open(sys.argv[1])
vectors, texts = np.load(sys.argv[2]), json.load(open(sys.argv[3]))
col.search(vector=vectors[0], k=10)
opened = resident()
for vector, text in zip(vectors, texts):
    col.search(vector=vector, k=10)
    col.search(text, vector=vector, k=10)
print(json.dumps({"opened": opened, "searched": resident()}))
"""


def reader_memory(path: Path, queries) -> dict:
    """Resident memory of a fresh process serving the collection at ``path``, after its first search and
    after a dense and a hybrid search per query (``queries.files``: their vectors and texts):
    ``{"opened" | "searched": {"private_bytes", "file_bytes"}}``."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    command = [sys.executable, "-c", READER, str(path), *map(str, queries.files)]
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    if result.returncode:
        raise SystemExit(f"the reader process failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])
