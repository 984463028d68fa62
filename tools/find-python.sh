#!/usr/bin/env bash
# Prints the path of a Python 3.12 interpreter: $HVSYNC_PYTHON, python3.12 on PATH, or pyenv's 3.12.x.
set -euo pipefail
if [ -n "${HVSYNC_PYTHON:-}" ]; then echo "$HVSYNC_PYTHON"; exit 0; fi
for cand in python3.12 python3; do
  p=$(command -v "$cand" 2>/dev/null || true)
  if [ -n "$p" ] && PYENV_VERSION=3.12 "$p" -c 'import sys; sys.exit(0 if sys.version_info[:2]==(3,12) else 1)' 2>/dev/null; then
    PYENV_VERSION=3.12 "$p" -c 'import sys; print(sys.executable)'; exit 0
  fi
done
if command -v pyenv >/dev/null 2>&1; then
  root=$(pyenv root)
  for d in $(ls -d "$root"/versions/3.12* 2>/dev/null | sort -V -r); do
    if [ -x "$d/bin/python" ]; then echo "$d/bin/python"; exit 0; fi
  done
fi
echo "find-python: no Python 3.12 found (set HVSYNC_PYTHON)" >&2
exit 1
