"""``make demo``: index the Python standard library's own documentation and search it.

The corpus (one document per module, see ``indexer.stdlib_docs``) is written
to ``.demo/stdlib.jsonl``; the first run builds ``.demo/collection``; later
runs find nothing changed and finish in seconds.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from indexer.stdlib_docs import QUERIES, write_corpus

DEMO_DIR = Path(".demo")


def main() -> int:
    """Write the corpus, index it into ``.demo/collection``, run ``QUERIES`` and print the next steps."""
    from indexer.job import index_paths
    from retriever import Collection

    corpus = DEMO_DIR / "stdlib.jsonl"
    collection_dir = DEMO_DIR / "collection"
    count = write_corpus(corpus)
    print(f"Demo corpus: {count} standard-library modules from Python {sys.version.split()[0]} -> {corpus}")
    with Collection.open_or_create(collection_dir) as collection:
        report = index_paths(collection, [corpus])
        print(report.summary())
        started = time.perf_counter()
        collection.search("warm-up", k=1)  # loads the model and the indexes once, outside the timings below
        print(f"model and indexes loaded in {time.perf_counter() - started:.1f} s")
        print()
        show_searches(collection)
    print(next_steps(collection_dir))
    return 0


def show_searches(collection) -> None:
    """Run every demo query (top 3) and print its hits with their time."""
    for query, where in QUERIES:
        started = time.perf_counter()
        hits = collection.search(query, k=3, where=where)
        elapsed = (time.perf_counter() - started) * 1000
        label = f"{query!r}" + (f" where {json.dumps(where)}" if where else "")
        print(f"search {label}  ({elapsed:.0f} ms)")
        for rank, hit in enumerate(hits, 1):
            snippet = " ".join(hit.text.split())[:110]
            print(f"  {rank}. {hit.score:.3f}  {hit.title[:70]}")
            print(f"       {snippet}…")
        print()


def next_steps(collection_dir: Path) -> str:
    """What to try next with the demo collection: the command line, Python, the UI, the HTTP API."""
    return f"""Next steps:
  command line:  .venv/bin/semsearch search "how do I copy a directory tree" -c {collection_dir}
                 .venv/bin/semsearch search "json" -c {collection_dir} --where '{{"package": "json"}}' --json
  Python:        .venv/bin/python -c "from retriever import Collection; c = Collection.open('{collection_dir}'); print(c.search('unit testing', k=3))"
  browser:       make ui      (or .venv/bin/semsearch ui -c {collection_dir}, then open http://127.0.0.1:8501)
  HTTP API:      make serve   (docs at http://127.0.0.1:8000/docs)
  details:       .venv/bin/semsearch info -c {collection_dir}"""


if __name__ == "__main__":
    sys.exit(main())
