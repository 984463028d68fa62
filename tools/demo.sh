#!/usr/bin/env bash
# `make demo`: see tools/demo.py.
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python tools/demo.py "$@"
