# semsearch: every entry point a newcomer needs. `make help` lists them.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: help install demo test test-all bench ui clean

help:
	@echo "make install   create .venv and install pinned dependencies (CPU torch 2.13.0)"
	@echo "make demo      index the Python standard library's documentation and search it"
	@echo "make test      run the test suite (slow benchmarks excluded)"
	@echo "make test-all  run every test, slow ones included"
	@echo "make clean     remove .venv, the demo collection and caches"

install: $(STAMP)

# Re-runs only when the dependency pins change. torch is installed first and
# pinned so that nothing pulls a multi-GB CUDA build.
$(STAMP): pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c requirements.lock torch==2.13.0
	$(BIN)/python -m pip install --quiet -c requirements.lock -e '.[dev]'
	touch $@

demo: install
	$(BIN)/python -m app.demo

test: install
	$(BIN)/python -m pytest -m "not slow" -q

test-all: install
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) .demo .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
