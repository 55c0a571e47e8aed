"""``make bench-quality``: rerun every figure in ``benchmarks/quality.yaml``.

Prints ours beside the expected figure and the reference BM25 nDCG@10 that
each dataset's SOURCE.md gives, and exits 1 when a figure drifts past the
file's tolerance. ``--update`` rewrites the expected figures instead.
``--index-codes always`` reruns every figure with every segment's vectors
compressed (1-bit codes rescored exactly), against the same expected figures,
and ``--tolerance`` overrides the file's. A run of the default settings writes
the rows it measured into the "Retrieval quality" table of docs/benchmarks.md
(``benchmarks.results_page``; one row per dataset, mode and model, the others
kept); ``--no-record`` leaves the page alone, and runs with ``--index-codes``
never write it. A run with ``model: adapted`` scores
the model ``semsearch adapt --corpus <dataset> -o M`` makes with its default
settings (trained once into ``ADAPTED_ROOT/<dataset>`` and reused; about 25
minutes for the five visible sets on two cores). ``--skip-adapted`` leaves those runs out.

    python -m benchmarks.quality [--datasets DIR] [--only scifact,cisi] [--update]
        [--index-codes always --tolerance 0.005] [--no-record] [--page FILE]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from benchmarks import results_page
from retriever.evaluation import METRICS
from retriever.search.vector_index import CODES

REGRESSIONS = Path(__file__).with_name("quality.yaml")
ADAPTED_ROOT = Path("~/.cache/semsearch/adapted").expanduser()
DEFAULT_DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
HEADER = """\
# Every retrieval-quality figure semsearch claims: the command that measures
# it and the expected scores (default model, default settings).
# `make bench-quality` reruns them all; the scifact-slice50 rows are rerun by
# `make test` (tests/app/test_evaluate.py), the smaller datasets by the slow tests.
# Regenerate with: .venv/bin/python -m benchmarks.quality --update
"""
#: The table of docs/benchmarks.md a run writes: its section, columns (a metric's column after
#: ``METRICS``' order) and the columns that tell its rows apart.
TABLE = "Retrieval quality"
COLUMNS = ("dataset", "mode", "model", "nDCG@10", "MRR@10", "R@100", "MAP@100", "command", "machine", "date")
KEYS = ("dataset", "mode", "model")


def load_regressions(path: Path = REGRESSIONS) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def reference_ndcg(dataset_dir: Path) -> float | None:
    """The BM25 nDCG@10 baseline quoted in the dataset's SOURCE.md, if any."""
    source = dataset_dir / "SOURCE.md"
    if not source.is_file():
        return None
    match = re.search(r"baseline computed here.*?nDCG@10 ([0-9.]+)", source.read_text(encoding="utf-8"), re.S)
    return float(match.group(1)) if match else None


def dataset_path(run: dict, datasets: Path, scratch: Path) -> Path:
    if run["dataset"] == "scifact-slice50":
        from benchmarks.slices import write_scifact_slice

        target = scratch / "scifact-slice50"
        return target if target.exists() else write_scifact_slice(datasets / "scifact", target)
    return datasets / run["dataset"]


def adapted_model(dataset_dir: Path) -> Path:
    """The model ``semsearch adapt --corpus DATASET -o M`` makes, made once (a killed run resumes)."""
    model = ADAPTED_ROOT / dataset_dir.name
    if not (model / "adapt.json").is_file():
        subprocess.run(
            [sys.executable, "-m", "app", "adapt", "--corpus", str(dataset_dir), "-o", str(model), "--json"],
            check=False,
            stdout=subprocess.DEVNULL,
        )  # exit 1: the check found it no better; scored anyway
        if not (model / "adapt.json").is_file():
            raise SystemExit(f"semsearch adapt --corpus {dataset_dir} -o {model} failed")
    return model


def describe_encoders(encoders: set[tuple[str, str]]) -> str:
    """Which run-time encoders (passages, queries) the figures came from, and on which CPU."""
    from retriever.encoding.backends.choice import describe_cpu

    used = "; ".join(f"passages {passages}, queries {queries}" for passages, queries in sorted(encoders)) or "none"
    return f"encoder: {used} (CPU: {describe_cpu()})"


def table_row(run: dict, result: dict) -> dict:
    """The "Retrieval quality" row of one run of ``quality.yaml`` and its result (``indexer.beir.evaluate``)."""
    metrics = dict(zip(COLUMNS[3:7], (str(round(result[m], 4)) for m in METRICS)))
    model = "adapted" if run.get("model") == "adapted" else "packaged MiniLM"
    return {"dataset": run["dataset"], "mode": run["mode"], "model": model, **metrics, "command": run["command"]}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The run's flags, checked against each other and against the results page's table."""
    parser = argparse.ArgumentParser(prog="bench-quality", description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    parser.add_argument("--only", help="comma-separated dataset names")
    parser.add_argument("--update", action="store_true", help="rewrite the expected figures")
    parser.add_argument(
        "--index-codes", choices=CODES, help="search a copy of each collection whose vector indexes hold these codes"
    )
    parser.add_argument("--tolerance", type=float, help="largest drift allowed (default: the file's)")
    parser.add_argument("--skip-adapted", action="store_true", help="leave out the runs of adapted models")
    results_page.add_options(parser)
    args = parser.parse_args(argv)
    if args.update and args.index_codes:
        parser.error("--update records the default settings' figures; drop --index-codes")
    if args.index_codes and not args.no_record:
        print(f"--index-codes: the figures are not written into {args.page} (it holds the default settings')")
        args.no_record = True
    results_page.check(args, TABLE, COLUMNS)
    return args


def main(argv: list[str] | None = None) -> int:
    from indexer.beir import evaluate

    args = parse_args(argv)
    regressions = load_regressions()
    only = set(args.only.split(",")) if args.only else None
    tolerance = regressions["tolerance"] if args.tolerance is None else args.tolerance
    failures = 0
    encoders: set[tuple[str, str]] = set()
    rows: list[dict] = []
    print(
        f"{'dataset':<16} {'mode':<7} {'ndcg@10':>8} {'expected':>9} {'BM25 ref':>9} "
        + " ".join(f"{m:>10}" for m in METRICS[1:])
        + f" {'seconds':>8}"
    )
    with tempfile.TemporaryDirectory() as scratch:
        for run in regressions["runs"]:
            if (only and run["dataset"] not in only) or (args.skip_adapted and run.get("model") == "adapted"):
                continue
            path = dataset_path(run, args.datasets, Path(scratch))
            model = str(adapted_model(path)) if run.get("model") == "adapted" else None
            result = evaluate(
                path,
                split=run.get("split", "test"),
                mode=run["mode"],
                model=model,
                progress=False,
                index_codes=args.index_codes,
            )
            encoders.add((result["backend"], result["query_backend"]))
            rows.append(table_row(run, result))
            expected = run.get("expected") or {}
            drift = [m for m in METRICS if m in expected and abs(result[m] - expected[m]) > tolerance]
            failures += bool(drift) and not args.update
            reference = reference_ndcg(path)
            print(
                f"{run['dataset']:<16} {run['mode'] + ('+A' if model else ''):<7} {result['ndcg@10']:>8.4f} "
                f"{expected.get('ndcg@10', float('nan')):>9.4f} "
                f"{reference if reference is not None else float('nan'):>9.4f} "
                + " ".join(f"{result[m]:>10.4f}" for m in METRICS[1:])
                + f" {result['seconds']:>8.1f}"
                + (f"  DRIFT: {', '.join(drift)}" if drift else ""),
                flush=True,
            )
            if args.update:
                run["expected"] = {m: result[m] for m in METRICS}
                run["seconds"] = result["seconds"]
    print(describe_encoders(encoders))
    if args.update:
        REGRESSIONS.write_text(HEADER + yaml.safe_dump(regressions, sort_keys=False), encoding="utf-8")
        print(f"wrote {REGRESSIONS}")
    results_page.record(args, TABLE, COLUMNS, KEYS, rows, command="python -m benchmarks.quality")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
