# Agora: `make run` and `make test` do all set-up on a fresh machine.
#
#   make run     create .venv, install, run scenarios/valentines.yaml on the bundled CPU model
#   make test    create .venv, install with dev extras, run the test suite
#
# torch is installed first, pinned, so that nothing later pulls a multi-GB CUDA build.
# llama-cpp-python compiles from source the first time (about 10 minutes on 2 cores);
# pip caches the wheel, so later installs take seconds.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH ?= torch==2.13.0
RUN_TICKS ?= 36
RUN_OUT ?= runs
PYTEST_ARGS ?=
STAMP := $(VENV)/.agora-installed

.PHONY: run test install clean help

help:
	@echo "make run    - set up and run the flagship scenario ($(RUN_TICKS) ticks) on the bundled model"
	@echo "make test   - set up and run the tests"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools wheel

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install "$(TORCH)"
	$(BIN)/python -m pip install -e ".[dev]"
	@touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/agora run scenarios/valentines.yaml --ticks $(RUN_TICKS) --out $(RUN_OUT)

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
