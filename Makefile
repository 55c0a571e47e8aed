# semsearch: every entry point a newcomer needs. `make help` lists them.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: help install system-packages demo docs lint format test test-all fuzz bench bench-quality bench-scale bench-speed bench-index bench-ray bench-search-ab bench-formats soak train-small finetune-minilm ui serve clean
COLLECTION ?= .demo/collection

help:
	@echo "make install   create .venv and install pinned dependencies (CPU torch 2.13.0)"
	@echo "make demo      index the Python standard library's documentation and search it"
	@echo "make ui        search the demo collection in the browser (COLLECTION=dir to choose)"
	@echo "make serve     the HTTP API on 127.0.0.1:8000, docs at /docs (COLLECTION=dir to choose)"
	@echo "make docs      build the documentation site into site/ (mkdocs build --strict)"
	@echo "make test      ruff (lint and format), the test suite (slow benchmarks excluded), the docs built strictly"
	@echo "make lint      ruff check and ruff format --check; make format applies the fixes and the formatter"
	@echo "make test-all  run every test, slow ones included"
	@echo "make fuzz      the hostile-input suite, long run (HYPOTHESIS_PROFILE=fuzz): HTTP, Python API, filters, files,"
	@echo "               archives, damaged Office files, crafted snapshot folders, snapshot destinations, redirecting servers"
	@echo "make soak      SOAK_MINUTES (default 30) of searches, writes, compactions and snapshots on loopback,"
	@echo "               server and writer SIGKILLed at random; checks every acknowledged write (runs/soak/)"
	@echo "make bench     every benchmark below: quality, speed, scale and Ray (run them on a quiet machine)"
	@echo "make bench-quality  rerun benchmarks/quality.yaml: nDCG@10, MRR@10, R@100, MAP@100 per dataset and mode,"
	@echo "                    again with every segment compressed (--index-codes always, within 0.005);"
	@echo "                    then few-shot tagging, frozen embeddings against TF-IDF (benchmarks/tagging.py)"
	@echo "make bench-ray      one process against the Ray job (2 workers) on 1,500 SciFact abstracts: docs/s"
	@echo "make bench-scale    10k to 1M real-shaped chunks, real queries, as committed and compacted: search p50/p99,"
	@echo "                    recall, resident memory and index bytes, disk, commit time (~30 min; resumable)"
	@echo "make bench-index    exact, IVF, compressed IVF and HNSW on 100k real-shaped vectors, real queries: p50, recall"
	@echo "make bench-speed    encoder backends, search, CLI and /search throughput as ratios to the stock stack;"
	@echo "                    then what each evidence mode adds to a search (benchmarks/evidence.py),"
	@echo "                    and BM25 on SciFact: ranking, search, search with evidence (benchmarks/bm25_speed.py)"
	@echo "make bench-formats  real Office, e-book, e-mail, PDF and scanned files against plain text: nDCG@10,"
	@echo "                    documents per second per format, OCR pages per second, page and slide of hits"
	@echo "make bench-search-ab BASE=rev  search p50 of this checkout against commit rev, taking turns (for refactors)"
	@echo "make train-small      tokenizer + small BERT (masked LM, ~45 min) + contrastive on SciFact; runs/train-small/"
	@echo "make finetune-minilm  adapt the packaged MiniLM to SciFact's train split; runs/finetune-minilm/"
	@echo "make clean     remove .venv, the demo collection and caches"

install: $(STAMP) system-packages

# Debian packages the document readers and their tests use: Tesseract with its English, German
# and French data (OCR of scans), libmagic (file types by content), pandoc and DejaVu fonts (the
# tests make real Office, OpenDocument and EPUB files and render scans). Installed where this is
# Debian and we may (root); elsewhere one line says what to install, and a scan is then reported
# as needing tesseract-ocr.
SYSTEM_PACKAGES := tesseract-ocr tesseract-ocr-eng tesseract-ocr-deu tesseract-ocr-fra pandoc libmagic1 fonts-dejavu-core
system-packages:
	@if command -v tesseract >/dev/null && command -v pandoc >/dev/null && [ -d /usr/share/tesseract-ocr ] \
	    && ls /usr/share/tesseract-ocr/*/tessdata/deu.traineddata /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(SYSTEM_PACKAGES) >/dev/null \
	    || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive \
	         apt-get install -y -q --no-install-recommends $(SYSTEM_PACKAGES) >/dev/null; }; \
	else echo "make install: install the Debian packages $(SYSTEM_PACKAGES) (OCR, test documents)"; fi

# Re-runs only when the dependency pins change. torch is installed first and
# pinned so that nothing pulls a multi-GB CUDA build.
$(STAMP): pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c requirements.lock torch==2.13.0
	$(BIN)/python -m pip install --quiet -c requirements.lock -e '.[dev,ray,docs]'
	touch $@

demo: install
	$(BIN)/python -m app.demo

ui: install
	test -f $(COLLECTION)/manifest.json || $(BIN)/python -m app.demo
	$(BIN)/semsearch ui -c $(COLLECTION)

serve: install
	test -f $(COLLECTION)/manifest.json || $(BIN)/python -m app.demo
	$(BIN)/semsearch serve -c $(COLLECTION)

# A broken link, a missing page or a docstring griffe cannot read fails the build (--strict).
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir site

# ruff's lint and the formatter's check first (settings in pyproject.toml; `make format` applies both)
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

test: install lint
	$(BIN)/python -m pytest -m "not slow" -q
	$(MAKE) --no-print-directory docs

test-all: install
	$(BIN)/python -m pytest -q

# Generated hostile input (Hypothesis), 20 times the cases of the bounded run in
# `make test`; the summary prints how many inputs were tried per entry point.
fuzz: install
	HYPOTHESIS_PROFILE=fuzz $(BIN)/python -m pytest -q -p no:cacheprovider tests/hostile

bench: bench-quality bench-speed bench-scale bench-index bench-ray bench-formats

bench-quality: install
	$(BIN)/python -m benchmarks.quality
	$(BIN)/python -m benchmarks.quality --index-codes always --tolerance 0.005
	$(BIN)/python -m benchmarks.tagging

bench-scale: install
	$(BIN)/python -m benchmarks.scale

# Exact, IVF and HNSW on 100k clustered vectors: build, p50, recall, 1% filter.
bench-index: install
	$(BIN)/python -m benchmarks.index_choice

# Speed figures are ratios to sentence-transformers + FAISS measured in the same
# run; run them on a quiet machine (QUICK=1 for a smoke run).
bench-speed: install
	$(BIN)/python -m benchmarks.speed $(if $(QUICK),--quick)
	$(BIN)/python -m benchmarks.evidence
	$(BIN)/python -m benchmarks.bm25_speed

# Search latency of this checkout against commit BASE, the two taking turns on one collection.
bench-search-ab: install
	$(BIN)/python -m benchmarks.search_ab --base $(or $(BASE),HEAD~1)

# A folder of real files in every readable format, made from SciFact by pandoc, LibreOffice, the
# formats' own libraries and rendered scans, scored against the same documents as plain text.
bench-formats: install
	$(BIN)/python -m benchmarks.formats

bench-ray: install
	$(BIN)/python -m benchmarks.ray_scale --docs 1500 --workers 2

# Searches, writes, compactions and snapshots while the server and the writer are
# SIGKILLed at random; then every acknowledged write is looked for (benchmarks/soak.py).
SOAK_MINUTES ?= 30
soak: install
	$(BIN)/python -m benchmarks.soak --minutes $(SOAK_MINUTES)

# Training recipes: resumable stages, summary.json and a printed table.
train-small: install
	$(BIN)/semsearch train recipe train-small

finetune-minilm: install
	$(BIN)/semsearch train recipe finetune-minilm

clean:
	rm -rf $(VENV) .demo .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
