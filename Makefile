# Two commands: `make demo` (set up, run the embedded default, print metrics) and `make test`.
SHELL := /bin/bash
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# the data folder (layout of the project's shared data); override: make demo RAG_DATA_DIR=/path/to/data
export RAG_DATA_DIR ?= $(abspath ../shared/data)
export HF_HUB_OFFLINE := 1
EXTRAS ?= cpu,services,dev
# llama.cpp's default (native) build enables AMX kernels on Xeons that report AMX, and those kernels crash there
# (segmentation fault in ggml_backend_amx_mul_mat on our 2-core VMs). Build a portable AVX2 wheel instead, once
# per machine, into a wheel folder named by these flags (pip's own cache would hand back a native build).
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
LLAMA_VERSION := $(shell sed -n 's/^llama-cpp-python==//p' constraints/cpu.txt)
WHEEL_DIR ?= $(HOME)/.cache/rag-toolkit/wheels/llama-cpp-python-$(LLAMA_VERSION)-$(shell echo '$(LLAMA_CMAKE_ARGS)' | sha1sum | cut -c1-10)
STAMP := $(VENV)/.installed-$(shell cat setup.cfg constraints/cpu.txt Makefile | sha1sum | cut -c1-12)

.PHONY: setup demo test test-fast lint sweep-demo bench clean

setup: $(STAMP)

$(STAMP): setup.cfg constraints/cpu.txt Makefile
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip wheel setuptools
	# torch first, pinned: the local CPU build (plain `torch` would download gigabytes of CUDA)
	$(BIN)/pip install -q torch==2.13.0
	# llama-cpp-python compiles from source once per machine (about 10-20 minutes on 2 cores), see LLAMA_CMAKE_ARGS
	ls $(WHEEL_DIR)/llama_cpp_python-*.whl >/dev/null 2>&1 || CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" \
	  $(BIN)/pip wheel -q --no-deps --no-cache-dir -w $(WHEEL_DIR) llama-cpp-python==$(LLAMA_VERSION)
	$(BIN)/pip install -q --no-deps --force-reinstall $(WHEEL_DIR)/llama_cpp_python-$(LLAMA_VERSION)-*.whl
	$(BIN)/pip install -q -c constraints/cpu.txt -e ".[$(EXTRAS)]"
	# TREC AutoJudge's evaluator, for the tests that check tau_ap_b against its pyircore copy; without its
	# dependencies (a heavy command-line stack): the tests load that one numpy/scipy file
	$(BIN)/pip install -q --no-deps autojudge-evaluate==1.1.0
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
