# Two set-up commands on a fresh machine: `make serve` (main job: the service on the embedded default store)
# and `make test` (test suite).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.medrank-installed

.PHONY: install serve models demo test test-slow lint bench

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch is pinned in pyproject (2.13.0 = the CPU build); install it first so nothing pulls a CUDA build.
	$(PY) -m pip install -q "torch==2.13.0"
	$(PY) -m pip install -q -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

serve: install
	$(VENV)/bin/medrank serve

# the CPU recipe of every model the service uses, into runs/ where `make serve` finds them (resumable)
models: install
	nice -n 10 $(VENV)/bin/medrank train-service

demo: install
	$(VENV)/bin/medrank demo

test: install
	$(PY) -m pytest

test-slow: install
	$(PY) -m pytest -m slow

lint: install
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/lint-imports

bench: install
	$(PY) bench/run_all.py
