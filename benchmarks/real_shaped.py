"""Vectors shaped like real all-MiniLM-L6-v2 embeddings, in any number, and real query embeddings.

The scale bench cannot encode ten million chunks, and isotropic clusters are
easier to index than real embeddings, whose queries sit apart from the
documents they match. So the base is real: every chunk vector of the visible
BEIR collections as ``semsearch eval`` stores them (the packaged MiniLM, built
once into ``~/.cache/semsearch/eval``), and every query of those sets encoded
by the same model.

``RealShaped`` fits k-means (about 20 real chunks a cluster) to the real
vectors. A synthetic vector picks a cluster in proportion to its size, two of
its real members, and a random point on the segment between them, plus a
little noise (0.02 per dimension, 0.4 in all, against the unit vectors), then
normalises: a new "document on the same topic", inside the region real ones
occupy, never a copy of one. ``describe`` compares the real and synthetic
neighbourhoods (each real query's best cosine, and each sample's nearest
neighbour) so a run shows how close the model came. ``query_texts`` gives the
queries' texts in the order of their vectors; ``clustered`` the easier
isotropic clusters real-shaped vectors replace. ``MixedTexts`` makes any
number of document texts of real length and vocabulary, none a copy of
another (cycled copies would tie every query's best documents, so no BM25
range could ever be skipped).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

SETS = ("scifact", "cisi", "cranfield", "medline", "time")
PER_CLUSTER = 20
NOISE = 0.02


def real_embeddings(datasets: Path, sets: tuple[str, ...] = SETS) -> tuple[np.ndarray, np.ndarray]:
    """``(chunk vectors, query vectors)``, float32 unit rows, of the ``sets`` found under ``datasets``.

    Chunk vectors come from each set's evaluation collection (built first if
    missing: minutes, once); queries are every query of every split, encoded
    with the same packaged model.
    """
    from indexer.beir import open_collection
    from indexer.job import index_paths
    from retriever.evaluation import load_beir
    from retriever.search.vector_index import reconstruct

    chunks, queries = [], []
    for name in sets:
        root = datasets / name
        if not (root / "corpus.jsonl").is_file():
            continue
        dataset = load_beir(root, "test")
        with open_collection(dataset, None, None, progress=False) as collection:
            index_paths(collection, [root], prune=True, progress=False)
            for part in collection.reader.current().parts:
                chunks.append(reconstruct(part.segment.index, np.arange(part.segment.n_chunks)))
            queries.append(collection.embed(_queries_of(root)))
    if not chunks:
        raise SystemExit(f"no BEIR collection under {datasets} ({', '.join(sets)})")
    return _unit(np.concatenate(chunks)), _unit(np.concatenate(queries))


def query_texts(datasets: Path, sets: tuple[str, ...] = SETS) -> list[str]:
    """Every query text of the ``sets`` found under ``datasets``, in the order of ``real_embeddings``' query vectors."""
    roots = [datasets / name for name in sets if (datasets / name / "corpus.jsonl").is_file()]
    return [text for root in roots for text in _queries_of(root)]


def _queries_of(root: Path) -> list[str]:
    return [json.loads(line)["text"] for line in (root / "queries.jsonl").open(encoding="utf-8")]


def clustered(n: int, seed: int = 0, centres: int = 2_000) -> np.ndarray:
    """``(n, 384)`` float32 unit vectors near ``centres`` random centres, noise of the same scale: the
    isotropic clusters that flatter an index more than real embeddings do."""
    rng = np.random.default_rng(seed)
    dim = 384
    centre = _unit(np.random.default_rng(1234).normal(size=(centres, dim)))[rng.integers(0, centres, n)]
    return _unit(centre + rng.normal(scale=1.0 / np.sqrt(dim), size=(n, dim)))


class MixedTexts:
    """Document texts shaped like real ones: ``text(i)`` keeps about half the sentences of real document
    ``i mod R`` (its topic and title) and fills up to that document's length with sentences of other
    real documents, drawn with seed ``i``; so lengths, vocabulary and term frequencies stay real while
    no two documents are copies.

    Args:
        rows: ``(title, text)`` of the real documents.
    """

    def __init__(self, rows: list[tuple[str, str]]) -> None:
        self.rows = rows
        self.sentences = [re.split(r"(?<=[.!?])\s+", text.strip()) for _, text in rows]
        self.pool = [sentence for sentences in self.sentences for sentence in sentences]

    def __call__(self, i: int) -> tuple[str, str]:
        """``(title, text)`` of document ``i``."""
        title, text = self.rows[i % len(self.rows)]
        rng = np.random.default_rng(i)
        own = self.sentences[i % len(self.rows)]
        kept = [sentence for sentence, keep in zip(own, rng.random(len(own)) < 0.5) if keep]
        length = sum(len(sentence) + 1 for sentence in kept)
        while length < len(text):
            sentence = self.pool[int(rng.integers(len(self.pool)))]
            kept.append(sentence)
            length += len(sentence) + 1
        return title, " ".join(kept)


class RealShaped:
    """Synthetic unit vectors drawn between real members of k-means clusters of real embeddings.

    Args:
        real: ``(n, dim)`` float32 unit rows (``real_embeddings``' chunks).
        seed: Seeds the clustering and every draw.
    """

    def __init__(self, real: np.ndarray, seed: int = 0) -> None:
        import faiss

        self.real = np.ascontiguousarray(real, dtype=np.float32)
        k = max(1, len(real) // PER_CLUSTER)
        kmeans = faiss.Kmeans(real.shape[1], k, niter=20, seed=seed, spherical=True, verbose=False)
        kmeans.train(self.real)
        _, assigned = kmeans.index.search(self.real, 1)
        order = np.argsort(assigned[:, 0], kind="stable")
        self.members = order  # real rows grouped by cluster
        counts = np.bincount(assigned[:, 0], minlength=k)
        self.starts = np.concatenate([[0], np.cumsum(counts)])[:-1]
        self.counts = counts
        self.rng = np.random.default_rng(seed)

    def sample(self, n: int, seed: int | None = None) -> np.ndarray:
        """``(n, dim)`` float32 unit vectors, drawn with a generator seeded ``seed`` (default: the instance's)."""
        rng = self.rng if seed is None else np.random.default_rng(seed)
        clusters = rng.choice(len(self.counts), size=n, p=self.counts / self.counts.sum())
        first = self.members[self.starts[clusters] + rng.integers(0, self.counts[clusters])]
        second = self.members[self.starts[clusters] + rng.integers(0, self.counts[clusters])]
        mix = rng.random((n, 1), dtype=np.float32)
        points = mix * self.real[first] + (1 - mix) * self.real[second]
        points += rng.normal(scale=NOISE, size=points.shape).astype(np.float32)
        return _unit(points)


def describe(real: np.ndarray, synthetic: np.ndarray, queries: np.ndarray) -> dict:
    """How alike real and synthetic data look: medians of each query's best cosine and of each row's
    nearest other row, over equal numbers of real and synthetic rows."""
    import faiss

    n = min(len(real), len(synthetic))
    out = {}
    for name, data in (("real", real[:n]), ("synthetic", synthetic[:n])):
        best, _ = faiss.knn(queries, data, 1, metric=faiss.METRIC_INNER_PRODUCT)
        near, _ = faiss.knn(data[:2000], data, 2, metric=faiss.METRIC_INNER_PRODUCT)
        out[name] = {
            "query_best_cosine": float(np.median(best[:, 0])),
            "nearest_row_cosine": float(np.median(near[:, 1])),
        }
    return out


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
