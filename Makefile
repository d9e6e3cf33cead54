# Two commands: `make demo` (set up, run the embedded default, print metrics) and `make test`.
SHELL := /bin/bash
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# the data folder (layout of the project's shared data); override: make demo RAG_DATA_DIR=/path/to/data
export RAG_DATA_DIR ?= $(abspath ../shared/data)
export HF_HUB_OFFLINE := 1
EXTRAS ?= cpu,services,dev
STAMP := $(VENV)/.installed-$(shell cat setup.cfg constraints/cpu.txt | sha1sum | cut -c1-12)

.PHONY: setup demo test test-fast lint sweep-demo bench clean

setup: $(STAMP)

$(STAMP): setup.cfg constraints/cpu.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip wheel setuptools
	# torch first, pinned: the local CPU build (plain `torch` would download gigabytes of CUDA)
	$(BIN)/pip install -q torch==2.13.0
	# llama-cpp-python compiles from source once (about 5-20 minutes on 2 cores), then pip's cache reuses it
	$(BIN)/pip install -q -c constraints/cpu.txt -e ".[$(EXTRAS)]"
	touch $(STAMP)

demo: setup
	$(BIN)/python -m rag.main experiment=demo

test: setup
	$(BIN)/python -m pytest -q --timeout=1800

test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow and not slurm"

lint: setup
	$(BIN)/ruff check .

sweep-demo: setup
	$(BIN)/python -m rag.main -m experiment=demo logger=none retriever=bm25,dense rerank.k=3,5 ordering=inverted,as_ranked

bench: setup
	$(BIN)/python benchmarks/spine_bench.py

clean:
	rm -rf outputs multirun .pytest_cache
