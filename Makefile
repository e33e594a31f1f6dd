# Every target sets up .venv on a fresh machine first; pins live in pyproject.toml.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: run test lint bench pipeline-demo clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip==26.3
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev,bench,spark]'
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/brook serve --data ./brook-data

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks examples
	$(VENV)/bin/ruff format --check src tests benchmarks examples
	$(VENV)/bin/mypy

test: lint
	$(PY) -m pytest --cov=brook --cov-report=term:skip-covered

bench: $(STAMP)
	command -v wrk >/dev/null || (apt-get update -qq && apt-get install -y -qq wrk)
	$(PY) -m benchmarks.run

pipeline-demo: $(STAMP)
	$(PY) examples/pipeline.py --data ./brook-data --out ./pipeline-demo

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis pipeline-demo
