"""The dev set a contrastive run keeps its best model by: dense nDCG@10 over a BEIR dataset.

A dev set can be a whole split or a fixed fraction of its queries
(``is_dev_query``: chosen by a hash of the query id, so every stage, seed
and machine draws the same ones), which lets a training split lend some of
its queries to model selection while the rest train.
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from retriever.errors import BadInputError


@dataclass
class DevSet:
    """A BEIR dataset split and its non-empty documents.

    Attributes:
        dataset: The ``retriever.evaluation.load_beir`` dataset (queries, qrels, corpus).
        documents: ``{"id", "title", "text"}`` records ready for ``Collection.upsert``.
    """

    dataset: object
    documents: list[dict] = field(default_factory=list)


def is_dev_query(query_id: str, fraction: float) -> bool:
    """Whether query ``query_id`` belongs to the dev draw of ``fraction`` (0 to 1) of its split's queries."""
    digest = hashlib.sha256(f"semsearch-dev:{query_id}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") < fraction * 2**64


def default_dev_split(root: str | Path) -> str:
    """The split a dev set of BEIR dataset ``root`` scores by default: "dev" when it has one, else "test"."""
    return "dev" if (Path(root) / "qrels" / "dev.tsv").is_file() else "test"


def load_dev(
    root: str | Path, split: str | None = None, fraction: float | None = None, max_documents: int | None = None
) -> DevSet:
    """The dev set of BEIR dataset ``root``; ``split`` defaults to "dev" when it has one, else "test".

    With ``fraction`` only the split's queries that ``is_dev_query`` draws are kept.
    With ``max_documents`` the corpus is cut to that many documents: every one
    the kept queries judge, then others drawn by a hash of their ids (a fixed
    draw), so that each evaluation embeds less; scores then run higher than
    over the whole corpus but still rank checkpoints.

    Raises:
        BadInputError: The dataset cannot be read, its corpus has no text, or the draw holds no query.
    """
    from retriever.evaluation import load_beir

    root = Path(root)
    dataset = load_beir(root, split or default_dev_split(root))
    if fraction is not None:
        kept = [q for q in dataset.queries if is_dev_query(q, fraction)]
        if not kept:
            raise BadInputError(
                f"{root}: a dev fraction of {fraction} of split {dataset.split!r} "
                f"({len(dataset.queries)} queries) draws none; give a larger fraction"
            )
        dataset = replace(
            dataset, queries={q: dataset.queries[q] for q in kept}, qrels={q: dataset.qrels[q] for q in kept}
        )
    documents = [
        {"id": str(r["_id"]), "title": r.get("title") or "", "text": r.get("text") or ""}
        for r in dataset.corpus()
        if (r.get("text") or "").strip()
    ]
    if not documents:
        raise BadInputError(f"{root}: the dev corpus is empty")
    if max_documents is not None and len(documents) > max_documents:
        judged = {doc for judgments in dataset.qrels.values() for doc in judgments}
        order = sorted(documents, key=lambda d: (d["id"] not in judged, _draw(d["id"])))
        documents = order[: max(max_documents, sum(d["id"] in judged for d in documents))]
    return DevSet(dataset, documents)


def _draw(document_id: str) -> bytes:
    return hashlib.sha256(f"semsearch-dev-doc:{document_id}".encode("utf-8")).digest()


def evaluate_dev(model, dev: DevSet) -> float:
    """nDCG@10 of dense search with ``model`` (a ``SentenceTransformer``) over the dev corpus.

    The model is saved to a temporary directory and scored through a fresh
    temporary collection. Its training mode and torch's thread count (which
    the ``Embedder`` sets for itself) are left as they were, so training after
    an evaluation computes as it would without one (and a resumed run as an
    uninterrupted one).
    """
    import warnings

    import torch

    from retriever import Collection, Embedder
    from retriever.evaluation import DEPTH, evaluate_run, run_queries

    was_training, threads = model.training, torch.get_num_threads()
    try:
        with tempfile.TemporaryDirectory(prefix="semsearch-dev-") as tmp:
            model.save(str(Path(tmp) / "model"))
            # torch: a checkpoint is scored once, so exporting and timing other backends would not pay
            embedder = Embedder(Path(tmp) / "model", device=str(model.device), backend="torch")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with Collection.create(Path(tmp) / "collection", embedder) as collection:
                    collection.upsert(dev.documents)
                    run = run_queries(
                        lambda q: [h.id for h in collection.search(q, k=DEPTH, mode="dense")],
                        dev.dataset.queries,
                        progress=False,
                    )
    finally:
        model.train(was_training)
        torch.set_num_threads(threads)
    return evaluate_run(run, dev.dataset.qrels)["ndcg@10"]
