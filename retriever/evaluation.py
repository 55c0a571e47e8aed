"""Retrieval evaluation on BEIR-layout datasets, scored by trec_eval.

A dataset directory holds ``corpus.jsonl``, ``queries.jsonl`` and
``qrels/<split>.tsv``. As in BEIR's loader, a split's queries are those its
qrels name, and graded judgments are used as graded. Metrics come from
``pytrec_eval`` (trec_eval's own code): nDCG@10, MRR@10, Recall@100, MAP@100,
averaged over every query of the split (a query with no hits scores 0);
``evaluate_queries`` gives each query's own. A collection's own judgments
are scored through the same code (``retriever.judgments.scoring``).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

from retriever.errors import BadInputError
from retriever.jsonl import read_jsonl

METRICS = ("ndcg@10", "mrr@10", "recall@100", "map@100")
DEPTH = 100  # documents retrieved per query

Run = dict[str, list[str]]  # query id -> document ids, best first
Qrels = dict[str, dict[str, int]]  # query id -> {document id: relevance}


@dataclass
class BeirDataset:
    """Queries and judgments of one split; the corpus is read lazily.

    Attributes:
        root: The dataset directory.
        split: The qrels split (e.g. ``"test"``).
        queries: Query id to text, only the split's queries.
        qrels: Query id to ``{document id: relevance}``.
    """

    root: Path
    split: str
    queries: dict[str, str]
    qrels: Qrels

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def corpus_path(self) -> Path:
        return self.root / "corpus.jsonl"

    def corpus(self) -> Iterator[dict]:
        """Corpus records ``{"_id", "title", "text", ...}``, streamed."""
        for _, record in read_jsonl(self.corpus_path, "a BEIR corpus record"):
            yield record


def load_beir(root: str | Path, split: str = "test") -> BeirDataset:
    """Read a BEIR dataset's queries and qrels for ``split``.

    Raises:
        BadInputError: a file is missing or malformed, or a judged query has no text.
    """
    root = Path(root)
    qrels_path = root / "qrels" / f"{split}.tsv"
    for required in (root / "corpus.jsonl", root / "queries.jsonl", qrels_path):
        if not required.is_file():
            available = sorted(p.stem for p in (root / "qrels").glob("*.tsv")) if (root / "qrels").is_dir() else []
            hint = f" (splits here: {', '.join(available)})" if available and required == qrels_path else ""
            raise BadInputError(f"{root} is not a BEIR dataset: {required.name} is missing{hint}")
    qrels = _read_qrels(qrels_path)
    texts = _read_queries(root / "queries.jsonl")
    missing = sorted(set(qrels) - set(texts))
    if missing:
        raise BadInputError(f"{qrels_path}: {len(missing)} judged query id(s) have no text, e.g. {missing[0]!r}")
    return BeirDataset(root, split, {qid: texts[qid] for qid in qrels}, qrels)


def _read_qrels(path: Path) -> Qrels:
    qrels: Qrels = {}
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle, delimiter="\t")
        for number, row in enumerate(reader, start=1):
            if not row or (number == 1 and row[-1].strip().lower() == "score"):
                continue  # blank line or header
            if len(row) != 3:
                raise BadInputError(f"{path}:{number}: expected 3 tab-separated fields, got {len(row)}")
            query_id, doc_id, score = row
            try:
                qrels.setdefault(query_id, {})[doc_id] = int(score)
            except ValueError:
                raise BadInputError(f"{path}:{number}: relevance {score!r} is not an integer") from None
    if not qrels:
        raise BadInputError(f"{path} holds no judgments")
    return qrels


def _read_queries(path: Path) -> dict[str, str]:
    queries = {}
    for number, record in read_jsonl(path, "a BEIR query record"):
        if "_id" not in record or not isinstance(record.get("text"), str):
            raise BadInputError(f'{path}:{number}: not a BEIR query record (needs "_id" and a "text" string)')
        queries[str(record["_id"])] = record["text"]
    return queries


def evaluate_run(run: Run, qrels: Qrels) -> dict[str, float]:
    """Mean nDCG@10, MRR@10, Recall@100 and MAP@100 of ``run`` over every query in ``qrels``.

    Rankings are taken in the given order (ties cannot be reordered by
    trec_eval's tie-breaking); a query absent from ``run`` scores 0.
    """
    per_query = evaluate_queries(run, qrels)
    n = len(qrels)
    return {metric: sum(per_query[qid][metric] for qid in qrels) / n for metric in METRICS}


def evaluate_queries(run: Run, qrels: Qrels) -> dict[str, dict[str, float]]:
    """nDCG@10, MRR@10, Recall@100 and MAP@100 of ``run`` for each query in ``qrels``.

    Returns:
        ``{query id: {metric: value}}`` for every query of ``qrels`` (``METRICS`` its keys), in ``qrels``' order;
        their mean is ``evaluate_run``'s figure. A query absent from ``run`` (or with no document judged
        relevant) scores 0.
    """
    import pytrec_eval

    def as_scores(ranking: list[str], depth: int) -> dict[str, float]:
        ranking = ranking[:depth]
        return {doc_id: float(len(ranking) - rank) for rank, doc_id in enumerate(ranking)}

    full = {qid: as_scores(run.get(qid, []), DEPTH) for qid in qrels}
    top10 = {qid: as_scores(run.get(qid, []), 10) for qid in qrels}
    deep = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100", "map_cut.100"}).evaluate(full)
    shallow = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(top10)
    columns = {
        "ndcg@10": (deep, "ndcg_cut_10"),
        "mrr@10": (shallow, "recip_rank"),
        "recall@100": (deep, "recall_100"),
        "map@100": (deep, "map_cut_100"),
    }
    return {qid: {name: float(res.get(qid, {}).get(key, 0.0)) for name, (res, key) in columns.items()} for qid in qrels}


def run_queries(search: Callable[[str], Iterable[str]], queries: dict[str, str], progress: bool = True) -> Run:
    """Ranked document ids per query; a document with the query's own id is dropped (as BEIR does)."""
    from tqdm.auto import tqdm

    run: Run = {}
    for query_id, text in tqdm(queries.items(), desc="queries", unit="q", disable=not progress):
        run[query_id] = [doc_id for doc_id in search(text) if doc_id != query_id]
    return run
