# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
WHEELS := $(wildcard /opt/wheels)

.PHONY: install demo up test check lint typecheck importlint proto proto-check train train-quick device-wheels eval-model eval-beyond eval-pieces clean loadtest

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch 2.13 CPU build: this machine's image keeps the wheel in /opt/wheels.
	$(PY) -m pip install -q $(if $(WHEELS),--find-links /opt/wheels) "torch==2.13.0"
	$(PY) -m pip install -q -e ".[model,embedded,gym,operator,loadtest,mcp,dev]"
	touch $(STAMP)

# The OpenEnv server's own environment: openenv pins mcp<2 and numpy>=2, which the model server
# (pytriton: numpy<2) and our MCP server (mcp 2) cannot share (docs/INTEGRATIONS.md).
OPENENV_VENV ?= .venv-openenv
OPENENV_STAMP := $(OPENENV_VENV)/.installed

$(OPENENV_STAMP): pyproject.toml
	test -x $(OPENENV_VENV)/bin/python || python3 -m venv $(OPENENV_VENV)
	$(OPENENV_VENV)/bin/python -m pip install -q --upgrade pip
	$(OPENENV_VENV)/bin/python -m pip install -q -e ".[openenv]"
	touch $(OPENENV_STAMP)

install: $(STAMP) $(OPENENV_STAMP)

demo: install            ## start the stack, stream a Terminal episode, stop the stack
	$(VENV)/bin/worldserve demo --start

up: install              ## start the stack and keep it running (Ctrl-C stops it)
	$(VENV)/bin/worldserve up

test: install            ## unit + integration tests (real Redis, real Triton)
	$(PY) -m pytest

loadtest: install       ## Locust, headless, against `worldserve up` (started if not running)
	PYTHON=$(PY) bash scripts/loadtest.sh

check: lint typecheck importlint proto-check

lint: install
	$(VENV)/bin/ruff check services operators tests bench loadtests examples

typecheck: install
	$(VENV)/bin/mypy

importlint: install      ## package layers and the engine port (.importlinter)
	$(VENV)/bin/lint-imports

proto: install           ## regenerate services/worldserve/v1 from protos/
	PYTHON=$(PY) bash scripts/gen_protos.sh

proto-check: install
	$(PY) -m pytest -q tests/unit/test_codegen.py

train: install           ## retrain the committed checkpoint (resumable; twelve stages, ~15 h on 2 cores)
	$(PY) -m worldserve.training.train --profile word --out models/worldserve-tiny-moe

train-quick: install     ## a smaller model in .worldserve/model-quick (resumable; < 30 min)
	$(PY) -m worldserve.training.train --profile quick --out .worldserve/model-quick

device-wheels: install  ## .whl/: what scripts/device_train.sh needs on a bare GPU machine (docs/MODEL.md)
	$(PY) -m pip download -q --no-deps --only-binary=:all: -d .whl "english-words==2.0.2"

eval-model: install      ## held-out fidelity of the committed checkpoint, per command and fault
	$(PY) -m worldserve.training.heldout --model models/worldserve-tiny-moe

eval-beyond: install     ## the same on real runs of the coreutils beyond the first list (per kind)
	$(PY) -m worldserve.training.heldout --model models/worldserve-tiny-moe --domain TERMINAL \
		--data models/worldserve-tiny-moe/data/beyond_episodes.jsonl --by-kind

eval-pieces: install     ## the same on held-out episodes a quarter of whose words are piece words
	$(PY) -m worldserve.training.heldout --model models/worldserve-tiny-moe \
		--data models/worldserve-tiny-moe/data/pieces_episodes.jsonl

clean:
	rm -rf .worldserve .pytest_cache .mypy_cache .ruff_cache
