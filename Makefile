# hvsync: one workspace, three products. Every target installs what it needs first.
SHELL := /bin/bash
ROOT := $(abspath .)
PYTHON ?= $(shell tools/find-python.sh)
UV := $(ROOT)/.tools/bin/uv
export UV_PYTHON := $(PYTHON)
export UV_PYTHON_DOWNLOADS := never
export UV_LINK_MODE := copy
# NETBOX_VERSION=4.5.8|4.6.8|4.7.0|4.7.3 picks the NetBox release of `make netbox`, `make test`, `make demo`
export NETBOX_VERSION
VENV_PY := $(ROOT)/.venv/bin/python
PYTEST := $(ROOT)/.venv/bin/pytest

.PHONY: help setup test test-unit test-netbox demo bench lint netbox netbox-stop schema clean

help:
	@echo "make demo | make test | make bench | make lint | make netbox | make netbox-stop | make schema"

$(UV):
	$(PYTHON) -m venv $(ROOT)/.tools
	$(ROOT)/.tools/bin/pip install -q "uv>=0.5"

.venv/.synced: $(UV) uv.lock pyproject.toml packages/*/pyproject.toml
	$(UV) sync --frozen --all-packages
	touch $@

setup: .venv/.synced

# the plugin's rules/ (the SPEC's rules, no Django) and the wire both products load are typed strictly
lint: setup
	$(ROOT)/.venv/bin/ruff check .
	$(ROOT)/.venv/bin/ruff format --check .
	$(ROOT)/.venv/bin/mypy --strict packages/netbox-hvsync/src/netbox_hvsync/rules contracts/wire

schema: setup
	$(VENV_PY) tools/compile_pve_schema.py

test: setup
	bash tools/run-tests.sh

demo: setup
	bash tools/demo.sh

bench: setup
	bash tools/run-benchmarks.sh

netbox: setup
	$(VENV_PY) tools/netbox_instance.py up

netbox-stop: setup
	$(VENV_PY) tools/netbox_instance.py down

clean:
	rm -rf .venv .tools
