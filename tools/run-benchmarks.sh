#!/usr/bin/env bash
# `make bench`: every benchmark writes benchmarks/results/<name>.json and <name>.png.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p benchmarks/results
status=0
for b in benchmarks/bench_*.py; do
  [ -e "$b" ] || continue
  echo "== $b"
  .venv/bin/python "$b" || status=1
done
exit $status
