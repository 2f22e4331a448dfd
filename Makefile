# Two entry points for a fresh machine: `make demo` and `make test`. Both set up what they need.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
CHECKOV_VENV := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed
PYTEST_ARGS ?=
# Test modules run side by side, each whole on one worker (its module-scoped servers and scenarios once).
# Most of the suite waits on real processes, servers and paced steps, so three workers fill two cores.
TEST_WORKERS ?= 3

.PHONY: demo test check test-under-load lint bench gpu-check synth clean

# uv installs the same pins from the same index as pip, in parallel and from its cache (~/.cache/uv): from a
# warm cache in seconds (docs/development.md, The set-up). pip puts uv itself into the venv.
UV_VERSION := 0.13.8
UV := $(VENV)/bin/uv
# Bytecode is written as each module is first imported, not all at install: the suite imports a fraction
# of the 434 MB of sources (aws_cdk alone is 183 MB), and compiling all of it was most of the set-up. An
# environment that forbids writing bytecode (PYTHONDONTWRITEBYTECODE) would then make every process compile
# torch, moto and the CDK anew, so the targets here lift it: bytecode lands only in this checkout's venvs
# and folders, and is written atomically by whichever process compiles a module first.
unexport PYTHONDONTWRITEBYTECODE
# uv reads no pip configuration: a folder of wheels that pip is pointed at (find-links; here the CPU build
# of torch) is passed on. Evaluated only where an install runs.
UV_INSTALL = $(UV) pip install --quiet \
	$(addprefix --find-links ,$(or $(PIP_FIND_LINKS),$(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null)))

$(UV):
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet uv==$(UV_VERSION)

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml package.json package-lock.json | $(UV)
	$(UV_INSTALL) --python $(PY) -r requirements-dev.txt
	$(UV_INSTALL) --python $(PY) --no-deps -e .
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# checkov's own pins conflict with requirements-dev.txt: it gets its own venv, called by path from the tests.
$(CHECKOV_STAMP): requirements-checkov.txt | $(UV)
	test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(UV_INSTALL) --python $(CHECKOV_VENV)/bin/python -r requirements-checkov.txt
	touch $@

demo: $(STAMP)
	$(PY) -m localcloud demo --job example

# Every process the suite starts (agents, commands, servers) imports this checkout's modules: compiled once
# here, so the workers, starting side by side, do not each compile them.
test: $(STAMP) $(CHECKOV_STAMP)
	$(PY) -m compileall -q spot_trainer stacks localcloud tests jobs benchmarks app.py
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder --durations=10 $(PYTEST_ARGS)

# The edit loop: lint, types and the unit tests (no servers, no instances), two workers. CI runs `make test`.
check: lint $(CHECKOV_STAMP)
	$(PY) -m pytest tests/unit -n 2 --dist loadscope -q -p no:cacheprovider

# The same suite beside two busy processes, one pinned to each of the first two cores (BUSY_CORES=N for
# more): about half the machine, as on a slower or shared one. Every test must pass here too.
test-under-load: $(STAMP) $(CHECKOV_STAMP)
	bash tests/load/busy_beside.sh $(MAKE) test

# ruff (lint + import order), mypy strict on the product (spot_trainer/, stacks/, app.py), shellcheck on every
# bash script that runs on an instance or stands in for one there.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/shellcheck --severity=info userdata/*/*.sh localcloud/bin/* tests/load/*.sh

# Each benchmark's JSON figures, stamped with the machine, the date and the commit they were measured on.
bench: $(STAMP)
	for script in benchmarks/[!_]*.py; do $(PY) benchmarks/_stamp.py $$script || exit 1; done

# On a machine with CUDA and torch, a bare one too (no venv, no boto3, nothing installed): exact resume on
# the GPU (it fails here rather than skip) and P9. `spot_trainer` is imported through a link to spot_trainer/.
GPU_PATH := build/gpu-path
GPU_ENV := PYTHONPATH=$(CURDIR)/$(GPU_PATH):$(CURDIR)
gpu-check:
	mkdir -p $(GPU_PATH) && ln -sfn $(CURDIR)/trainer $(GPU_PATH)/spot_trainer
	$(GPU_ENV) $(PYTHON) -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else "gpu-check: no CUDA device here")'
	$(GPU_ENV) $(PYTHON) -m pytest --noconftest -p no:cacheprovider -o addopts='' tests/integration/test_cuda_determinism.py
	$(GPU_ENV) $(PYTHON) -m pytest --noconftest -p no:cacheprovider -o addopts='' tests/integration/test_cuda_sharded_saves.py
	$(GPU_ENV) $(PYTHON) benchmarks/p9_determinism_cost.py
	$(GPU_ENV) $(PYTHON) benchmarks/p9_strict_parts.py

synth: $(STAMP)
	npx cdk synth --quiet

clean:
	rm -rf cdk.out .pytest_cache
