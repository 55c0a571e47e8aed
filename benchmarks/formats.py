"""``make bench-formats``: documents kept as people keep them are found as well as the same texts as plain records.

From SciFact's test split (BEIR layout) a seeded subset is drawn: ``--queries``
judged queries, every document they judge relevant, and seeded distractors up
to ``--docs`` documents. Each document becomes a real file of one format,
round robin over ``benchmarks.format_files.FORMATS`` (Word, OpenDocument,
EPUB, RTF, HTML, PowerPoint, LibreOffice PDFs and presentations and
spreadsheets, Excel, mail and mailboxes, scans as PNG, JPEG, TIFF and PDF;
Outlook's .msg is left out: nothing here writes one). The files are kept
under ``--out`` (default ``runs/formats``) and made again only when the
subset changes.

Every file is read by ``indexer.loaders.load_path``, timed per file, and the
documents go into one collection (``Collection.upsert`` in batches, the
packaged default model); the same documents as plain BEIR records go into
another (``indexer.job.index_paths``). Both answer the same queries in
dense, bm25 and hybrid mode, each formats hit mapped back to its dataset id
through its file (``<mbox>#n`` for a mailbox's messages), and are scored by
nDCG@10 (``retriever.evaluation``). Printed: nDCG@10 per mode and the ratio
formats / plain, files read and load errors, documents per second per format,
OCR pages per second, and for paged files (text and scanned PDFs, TIFFs,
presentations) the share of hits whose ``location`` names the page or slide
that holds the start of the hit's text. The rows are written into the
"Documents as people keep them" tables of docs/benchmarks.md
(``benchmarks.results_page``; ``--no-record`` leaves the page alone).
``--resume`` reuses the timings and documents of files a killed run already read.

    python -m benchmarks.formats [--datasets DIR] [--queries 80] [--docs 400] [--seed 7] [--out runs/formats]
        [--resume] [--no-record] [--page FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from benchmarks import results_page
from benchmarks.format_files import FORMATS, FileSpec, MadeFile, SourceText, make_folder, slug, split_parts
from benchmarks.format_scoring import IdMap, LocationTally
from indexer.batches import BatchWriter
from indexer.job import index_paths
from indexer.loaders import LoadError, load_path
from retriever import Collection, Embedder
from retriever.documents import Document
from retriever.evaluation import evaluate_run, load_beir, run_queries
from retriever.jsonl import read_jsonl

DEFAULT_DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
DEFAULT_OUT = Path("runs/formats")
MODES = ("dense", "bm25", "hybrid")
MBOX_MESSAGES = 5  # messages per mailbox
DEPTH = 100
TABLE = "Documents as people keep them"
QUALITY_COLUMNS = ("mode", "plain records, nDCG@10", "files, nDCG@10", "files / plain", "command", "machine", "date")
FORMAT_COLUMNS = (
    "format",
    "files",
    "documents",
    "load errors",
    "documents per second",
    "page/slide location right",
    "command",
    "machine",
    "date",
)
SUMMARY_COLUMNS = ("what", "result", "command", "machine", "date")


@dataclass
class Subset:
    """The queries, their judgments and the documents (``{"_id", "title", "text"}``) of one run."""

    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    records: list[dict]


@dataclass
class FileLoad:
    """One file read by ``load_path``: how long it took, its documents and its errors."""

    path: str
    format: str
    seconds: float
    documents: list[Document] = field(default_factory=list)
    errors: list[LoadError] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "path": self.path,
            "format": self.format,
            "seconds": self.seconds,
            "documents": [asdict(doc) for doc in self.documents],
            "errors": [asdict(error) for error in self.errors],
        }

    @classmethod
    def from_dict(cls, data: dict) -> FileLoad:
        return cls(
            data["path"],
            data["format"],
            data["seconds"],
            [Document(**doc) for doc in data["documents"]],
            [LoadError(**error) for error in data["errors"]],
        )


def choose_subset(dataset: Path, queries: int, docs: int, seed: int) -> Subset:
    """``queries`` seeded test queries, their judged documents and seeded distractors, ``docs`` documents in all."""
    data = load_beir(dataset, "test")
    records = {record["_id"]: record for _, record in read_jsonl(dataset / "corpus.jsonl")}
    rng = random.Random(seed)
    chosen = rng.sample(sorted(data.qrels), queries)
    qrels = {qid: {doc: grade for doc, grade in data.qrels[qid].items() if doc in records} for qid in chosen}
    relevant = sorted({doc for judged in qrels.values() for doc in judged})
    if len(relevant) > docs:
        raise SystemExit(f"{queries} queries judge {len(relevant)} documents, more than --docs {docs}")
    ids = relevant + rng.sample(sorted(set(records) - set(relevant)), docs - len(relevant))
    rng.shuffle(ids)
    picked = [{"_id": i, "title": records[i].get("title") or "", "text": records[i]["text"]} for i in ids]
    return Subset({qid: data.queries[qid] for qid in chosen}, qrels, picked)


def write_plain(subset: Subset, folder: Path) -> Path:
    """The subset as a BEIR directory (``corpus.jsonl``, ``queries.jsonl``, ``qrels/test.tsv``)."""
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as out:
        out.writelines(json.dumps(record) + "\n" for record in subset.records)
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as out:
        out.writelines(json.dumps({"_id": qid, "text": text}) + "\n" for qid, text in subset.queries.items())
    rows = [f"{qid}\t{doc}\t{grade}" for qid, judged in subset.qrels.items() for doc, grade in judged.items()]
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(rows) + "\n")
    return folder


def file_specs(records: list[dict]) -> list[FileSpec]:
    """A file per record, formats round robin in the subset's (seeded) order; mbox records grouped into mailboxes."""
    specs, waiting, names = [], [], set()
    for number, record in enumerate(records):
        source = SourceText(record["_id"], record["title"], split_parts(record["text"]))
        fmt = FORMATS[number % len(FORMATS)]
        if fmt == "mbox":
            waiting.append(source)
            if len(waiting) == MBOX_MESSAGES:
                specs.append(FileSpec("mbox", f"mailbox-{len(specs):03d}", tuple(waiting)))
                waiting = []
            continue
        name = base = slug(source.title)
        while name.lower() in names:
            name = f"{base}-{len(names)}"
        names.add(name.lower())
        specs.append(FileSpec(fmt, name, (source,)))
    if waiting:
        specs.append(FileSpec("mbox", f"mailbox-{len(specs):03d}", tuple(waiting)))
    return specs


def make_files(subset: Subset, out: Path, seed: int) -> list[MadeFile]:
    """The subset's files under ``out/files``, made once per subset (``out/manifest.json`` says which)."""
    manifest = out / "manifest.json"
    wanted = sorted(record["_id"] for record in subset.records)
    if manifest.is_file():
        kept = json.loads(manifest.read_text(encoding="utf-8"))
        made = [MadeFile.from_dict(item) for item in kept["files"]]
        present = all((out / "files" / item.path).is_file() for item in made)
        if kept["documents"] == wanted and kept["seed"] == seed and present:
            print(f"reusing {len(made)} files in {out / 'files'}")
            return made
    for stale in ("files", "work", "collections"):
        shutil.rmtree(out / stale, ignore_errors=True)
    (out / "loads.jsonl").unlink(missing_ok=True)
    started = time.perf_counter()
    made = make_folder(file_specs(subset.records), out / "files", out / "work", seed)
    print(f"made {len(made)} files in {time.perf_counter() - started:.0f} s under {out / 'files'}")
    manifest.write_text(json.dumps({"documents": wanted, "seed": seed, "files": [m.to_dict() for m in made]}))
    return made


def load_files(made: list[MadeFile], folder: Path, cache: Path, resume: bool) -> list[FileLoad]:
    """Every made file through ``load_path``, timed; each result appended to ``cache`` (reused with ``resume``)."""
    done = {}
    if resume and cache.is_file():
        done = {load.path: load for load in map(FileLoad.from_dict, _json_lines(cache))}
    else:
        cache.unlink(missing_ok=True)
    loads = []
    with cache.open("a", encoding="utf-8") as out:
        for number, item in enumerate(made, start=1):
            if item.path in done:
                loads.append(done[item.path])
                continue
            started = time.perf_counter()
            results = list(load_path(folder / item.path))
            load = FileLoad(
                item.path,
                item.format,
                time.perf_counter() - started,
                [r for r in results if isinstance(r, Document)],
                [r for r in results if isinstance(r, LoadError)],
            )
            loads.append(load)
            out.write(json.dumps(load.to_dict()) + "\n")
            out.flush()
            print(f"\rread {number}/{len(made)} files", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return loads


def _json_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def index_documents(collection: Collection, documents: list[Document]) -> list[LoadError]:
    """``documents`` upserted in batches; a ``LoadError`` for each one the collection refuses."""
    refused: list[LoadError] = []
    writer = BatchWriter(
        collection.upsert,
        lambda batch, result: None,
        lambda doc, reason: refused.append(LoadError(doc.id, reason)),
        max_docs=64,
    )
    writer.add_all(documents)
    return refused


def scored_runs(collection: Collection, queries: dict[str, str], to_key, on_hit=None) -> dict[str, dict]:
    """Per mode, the run of dataset ids (best first, each once) of every query; ``on_hit`` sees each top-10 hit."""
    runs = {}
    for mode in MODES:

        def search(text: str, mode: str = mode) -> list[str]:
            ranked = []
            for rank, hit in enumerate(collection.search(text, k=DEPTH, mode=mode, evidence="none")):
                if on_hit is not None and rank < 10:
                    on_hit(hit)
                key = to_key(hit.id)
                if key is not None and key not in ranked:
                    ranked.append(key)
            return ranked

        runs[mode] = run_queries(search, queries, progress=False)
    return runs


@dataclass
class Measured:
    """What one run found: nDCG@10 per mode for both collections, the loads, locations and refusals."""

    plain: dict[str, float]
    files: dict[str, float]
    loads: list[FileLoad]
    locations: LocationTally
    refused: list[LoadError]
    unmapped: int


def measure(args: argparse.Namespace) -> Measured:
    """Draw the subset, make and read the files, index both collections and score them (see the module)."""
    subset = choose_subset(args.datasets / "scifact", args.queries, args.docs, args.seed)
    print(f"SciFact subset: {len(subset.queries)} queries, {len(subset.records)} documents (seed {args.seed})")
    plain_dir = write_plain(subset, args.out / "plain")
    made = make_files(subset, args.out, args.seed)
    folder = args.out / "files"
    loads = load_files(made, folder, args.out / "loads.jsonl", args.resume)
    ids, tally, unmapped = IdMap(folder, made), LocationTally(), []
    embedder = Embedder()

    def files_key(doc_id: str) -> str | None:
        key = ids.key(doc_id)
        if key is None:
            unmapped.append(doc_id)
        return key

    def check_location(hit) -> None:
        item = ids.file(hit.id)
        if item is not None and item.label and len(item.parts) > 1:
            tally.add(item, getattr(hit, "location", None), hit.text)

    with Collection.open_or_create(args.out / "collections" / "files", embedder) as collection:
        refused = index_documents(collection, [doc for load in loads for doc in load.documents])
        files_runs = scored_runs(collection, subset.queries, files_key, check_location)
    with Collection.open_or_create(args.out / "collections" / "plain", embedder) as collection:
        index_paths(collection, [plain_dir], prune=True, progress=False)
        plain_runs = scored_runs(collection, subset.queries, lambda doc_id: doc_id)
    ndcg = {
        name: {mode: evaluate_run(run, subset.qrels)["ndcg@10"] for mode, run in runs.items()}
        for name, runs in (("plain", plain_runs), ("files", files_runs))
    }
    return Measured(ndcg["plain"], ndcg["files"], loads, tally, refused, len(set(unmapped)))


def quality_rows(measured: Measured) -> list[dict]:
    return [
        {
            "mode": mode,
            "plain records, nDCG@10": f"{measured.plain[mode]:.4f}",
            "files, nDCG@10": f"{measured.files[mode]:.4f}",
            "files / plain": f"{measured.files[mode] / measured.plain[mode]:.3f}" if measured.plain[mode] else "—",
        }
        for mode in MODES
    ]


def format_rows(measured: Measured) -> list[dict]:
    """A row per format (in ``FORMATS`` order), then one for all."""
    rows = []
    for fmt in (*FORMATS, None):
        loads = [load for load in measured.loads if fmt is None or load.format == fmt]
        documents = sum(len(load.documents) for load in loads)
        seconds = sum(load.seconds for load in loads)
        share = measured.locations.share(fmt)
        seen = measured.locations.seen.get(fmt, 0) if fmt else sum(measured.locations.seen.values())
        rows.append(
            {
                "format": fmt or "all",
                "files": len(loads),
                "documents": documents,
                "load errors": sum(len(load.errors) for load in loads),
                "documents per second": f"{documents / seconds:.3g}" if seconds else "—",
                "page/slide location right": f"{share:.1%} of {seen} hits" if share is not None else "—",
            }
        )
    return rows


def summary_rows(measured: Measured) -> list[dict]:
    ocr_loads = [load for load in measured.loads if any(d.metadata.get("ocr_pages") for d in load.documents)]
    pages = sum(doc.metadata.get("ocr_pages", 0) for load in ocr_loads for doc in load.documents)
    seconds = sum(load.seconds for load in ocr_loads)
    errors = sum(len(load.errors) for load in measured.loads)
    documents = sum(len(load.documents) for load in measured.loads)
    return [
        {
            "what": "files read, load errors",
            "result": f"{len(measured.loads)} files, {documents} documents, "
            f"{errors} load errors, {len(measured.refused)} refused by the collection, {measured.unmapped} hits unmapped",
        },
        {
            "what": "OCR pages per second",
            "result": f"{pages / seconds:.2f} ({pages} pages in {seconds:.0f} s)" if seconds else "—",
        },
        {"what": "hits naming the right page or slide", "result": _share(measured.locations)},
    ]


def _share(tally: LocationTally) -> str:
    share = tally.share()
    if share is None:
        return "— (no hit of a paged file)"
    return f"{share:.1%} of {sum(tally.seen.values())} top-10 hits of paged files ({tally.unlabelled} with no location)"


def print_table(rows: list[dict], columns: tuple[str, ...]) -> None:
    shown = [
        column for column in columns if column not in (results_page.COMMAND, results_page.MACHINE, results_page.DATE)
    ]
    print("| " + " | ".join(shown) + " |")
    for row in rows:
        print("| " + " | ".join(str(row[column]) for column in shown) + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS, help="holds scifact/ (BEIR layout)")
    parser.add_argument("--queries", type=int, default=80, help="test queries drawn (default %(default)s)")
    parser.add_argument("--docs", type=int, default=400, help="documents in all (default %(default)s)")
    parser.add_argument("--seed", type=int, default=7, help="seeds the draw and the scans' look (default %(default)s)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="work folder (default %(default)s)")
    parser.add_argument("--resume", action="store_true", help="reuse what a killed run already read")
    results_page.add_options(parser)
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    if not (args.datasets / "scifact" / "corpus.jsonl").is_file():
        raise SystemExit(f"needs SciFact at {args.datasets / 'scifact'}")
    for columns in (QUALITY_COLUMNS, FORMAT_COLUMNS, SUMMARY_COLUMNS):
        results_page.check(args, TABLE, columns)
    print(f"machine: {results_page.describe_machine()}; load average {os.getloadavg()[0]:.1f} at the start")
    measured = measure(args)
    print(f"load average {os.getloadavg()[0]:.1f} at the end (other work on this machine slows every timing)")
    tables = (
        (QUALITY_COLUMNS, ("mode",), quality_rows(measured)),
        (FORMAT_COLUMNS, ("format",), format_rows(measured)),
        (SUMMARY_COLUMNS, ("what",), summary_rows(measured)),
    )
    command = results_page.command_line("benchmarks.formats", argv)
    print("(.msg is not measured: nothing here writes an Outlook message)")
    for columns, keys, rows in tables:
        print()
        print_table(rows, columns)
    for load in measured.loads:
        for error in load.errors:
            print(f"load error: {error.source}: {error.reason}")
    for error in measured.refused:
        print(f"refused: {error.source}: {error.reason}")
    print()
    for columns, keys, rows in tables:
        results_page.record(args, TABLE, columns, keys, rows, command=command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
