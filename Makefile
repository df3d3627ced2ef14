# The two commands a newcomer needs: `make demo` and `make test`.
# Everything is installed into .venv (Python) and node_modules (front end).

PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
PY := $(BIN)/python
export PATH := $(BIN):$(PATH)

# jupyter refuses to run as root without --allow-root
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)
DEMO_PORT ?= 8888
CHROMIUM ?= /usr/bin/chromium
TORCH := torch==2.13.0
# the oldest JupyterLab, Notebook 7 and JupyterHub supported (package.json's ranges, the
# hub service's needs): the built wheel is installed beside them in a venv of its own and
# smoke-tested there (tests/ui/test_oldest_jupyterlab.py, tests/test_hub_oldest.py)
OLDEST_VENV := .venv-oldest
OLDEST_STACK := "jupyterlab==4.0.*" "notebook==7.0.*" "jupyterhub==5.0.*"
FRONTEND_SOURCES := $(shell find labextension/src labextension/style labextension/schema -type f 2>/dev/null) package.json tsconfig.json

.PHONY: help install build demo test lint format test-python test-js test-ui chromium postgres prometheus bench bench-tabs bench-hub bench-alerts clean i18n i18n-check oldest

help:
	@echo "make demo   install everything and start JupyterLab with the extension (simulated GPUs when there is no NVIDIA driver)"
	@echo "make test   install everything and run lint, Python, front-end unit and browser tests"
	@echo "make bench  run the benchmarks (results go in docs/benchmarks.md)"

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# Python package (editable) with the test extras; the labextension is built by jlpm and
# linked into the environment, so a rebuild is picked up without reinstalling.
$(VENV)/.installed: $(VENV)/bin/python pyproject.toml
	$(PY) -m pip install --quiet "jupyterlab>=4.6,<4.7" "hatchling>=1.21" "hatch-jupyter-builder>=0.9" editables
	# the CPU build of torch, for the kernel-side tests (the server extension does not need it)
	$(PY) -m pip install --quiet "$(TORCH)" numpy
	$(MAKE) build
	# torch named again so that the test extra (lightning, transformers) cannot upgrade it
	$(PY) -m pip install --quiet --no-build-isolation --editable ".[test,bench]" "$(TORCH)"
	$(BIN)/jupyter labextension develop --overwrite . >/dev/null
	touch $@

node_modules/.installed: $(VENV)/bin/python package.json yarn.lock .yarnrc.yml
	$(PY) -m pip install --quiet "jupyterlab>=4.6,<4.7"
	$(BIN)/jlpm install
	touch $@

# the built labextension; removed first so that a stale one is never shipped
jupyter_gpucost/labextension/package.json: node_modules/.installed $(FRONTEND_SOURCES)
	rm -rf jupyter_gpucost/labextension
	$(BIN)/jlpm build:prod

build: jupyter_gpucost/labextension/package.json

install: $(VENV)/.installed build

# the wheel a user installs (built from this tree), beside the oldest supported front ends
$(OLDEST_VENV)/.installed: jupyter_gpucost/labextension/package.json pyproject.toml $(shell find jupyter_gpucost -name '*.py' -newer $(OLDEST_VENV)/.installed 2>/dev/null)
	rm -rf $(OLDEST_VENV)
	$(PYTHON) -m venv $(OLDEST_VENV)
	$(PY) -m pip wheel --quiet --no-deps --no-build-isolation -w $(OLDEST_VENV)/wheel .
	$(OLDEST_VENV)/bin/python -m pip install --quiet $(OLDEST_STACK) $(OLDEST_VENV)/wheel/*.whl
	touch $@

oldest: install $(OLDEST_VENV)/.installed

demo: install
	@TELEMETRY=$$($(PY) -c 'import pynvml; pynvml.nvmlInit(); print("auto")' 2>/dev/null || echo simulated); \
	echo "jupyter-gpucost demo: telemetry=$$TELEMETRY (simulated when no NVIDIA driver is found)"; \
	echo "Open the URL with its token printed below (JupyterLab at /lab, Notebook 7 at /tree); stop with Ctrl-C."; \
	$(BIN)/jupyter lab --ip=127.0.0.1 --port=$(DEMO_PORT) --no-browser $(ROOT_FLAG) \
		--GpuCost.telemetry=$$TELEMETRY --GpuCost.detect_machine=False --GpuCost.price_region=us-east-1

# Chromium, and a Chinese font so that the screenshots of the Chinese UI are legible
CJK_FONT = /usr/share/fonts/truetype/wqy/wqy-microhei.ttc
chromium:
	@if [ ! -x "$(CHROMIUM)" ] || [ ! -f "$(CJK_FONT)" ]; then \
		echo "Installing Chromium and a Chinese font from Debian (needed by the browser tests)"; \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium fonts-wqy-microhei >/dev/null; \
		else sudo apt-get update -qq && sudo apt-get install -y -qq chromium fonts-wqy-microhei >/dev/null; fi; \
	fi

# translations: extract every message (front end, server, settings schemas) into the .pot
# and each language's .po, then compile the .po into the .json JupyterLab and the server read
i18n: install
	$(PY) scripts/i18n.py extract
	$(PY) scripts/i18n.py compile

# lists every message with no translation (and a stale .json); fails if there is one
i18n-check: install
	$(PY) scripts/i18n.py check

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/jlpm lint:check

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .
	$(BIN)/jlpm lint

# PostgreSQL from Debian: the hub ledger's tests run against a real one on loopback
postgres:
	@if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
		echo "Installing PostgreSQL from Debian (needed by the ledger tests)"; \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq postgresql >/dev/null; \
		else sudo apt-get update -qq && sudo apt-get install -y -qq postgresql >/dev/null; fi; \
	fi

# Prometheus from Debian: the tests of GPU use from the cluster's Prometheus run a real one
# on loopback, scraping a stand-in for dcgm-exporter
prometheus:
	@if ! command -v prometheus >/dev/null 2>&1; then \
		echo "Installing Prometheus from Debian (needed by the cluster GPU use tests)"; \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq prometheus >/dev/null; \
		else sudo apt-get update -qq && sudo apt-get install -y -qq prometheus >/dev/null; fi; \
	fi

test-python: install postgres prometheus oldest
	GPUCOST_OLDEST_PYTHON=$(CURDIR)/$(OLDEST_VENV)/bin/python $(PY) -m pytest tests --ignore=tests/ui --durations=20

test-js: install
	$(BIN)/jlpm test

test-ui: install chromium oldest
	GPUCOST_CHROMIUM=$(CHROMIUM) GPUCOST_OLDEST_PYTHON=$(CURDIR)/$(OLDEST_VENV)/bin/python \
		$(PY) -m pytest tests/ui --durations=10

test: lint test-python test-js test-ui

bench: install
	$(PY) benchmarks/bench_status.py

# open tabs against the server: pushed (ours) and polled (jupyter-resource-usage); ~8 min
bench-hub: install postgres
	$(PY) benchmarks/bench_hub_service.py --users 1000 --duration 60

# a dead alert target against the hub's enforcement loop and flush (docs/benchmarks.md)
bench-alerts: install
	$(PY) benchmarks/bench_alerts.py --users 1000 --out benchmarks/results/alerts.json
	$(PY) benchmarks/bench_hub_ledger.py --postgres

bench-tabs: install chromium
	GPUCOST_CHROMIUM=$(CHROMIUM) $(PY) benchmarks/bench_tabs.py --out benchmarks/results/tabs.json

clean:
	rm -rf $(VENV) $(OLDEST_VENV) node_modules jupyter_gpucost/labextension labextension/lib tsconfig.tsbuildinfo .pytest_cache .ruff_cache .hypothesis
