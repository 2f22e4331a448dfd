# Two entry points for a fresh machine: `make demo` and `make test`. Both set up what they need.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
CHECKOV_VENV := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed
PYTEST_ARGS ?=

.PHONY: demo test lint bench synth clean

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml package.json package-lock.json
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip install --quiet --no-deps -e .
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# checkov's own pins conflict with requirements-dev.txt: it gets its own venv, called by path from the tests.
$(CHECKOV_STAMP): requirements-checkov.txt
	test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(CHECKOV_VENV)/bin/python -m pip install --quiet -r requirements-checkov.txt
	touch $@

demo: $(STAMP)
	$(PY) -m localcloud demo --job example

test: $(STAMP) $(CHECKOV_STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

# ruff (lint + import order), mypy strict on the product (trainer/, stacks/, app.py), shellcheck on every
# bash script that runs on an instance or stands in for one there.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/shellcheck --severity=info userdata/*/*.sh localcloud/bin/*

bench: $(STAMP)
	for script in benchmarks/*.py; do $(PY) $$script || exit 1; done

synth: $(STAMP)
	npx cdk synth --quiet

clean:
	rm -rf cdk.out .pytest_cache
