#!/usr/bin/env bash
# The device check for a lent GPU machine (jax with CUDA, torch and transformers already installed there):
#   run it through the device tool from the repository root, e.g. `bash scripts/gpu_check.sh`.
# Packages the machine lacks (pydantic, mcp, starlette, ...) travel as Python 3.12 wheels in .whl/ when present.
set -euo pipefail
cd "$(dirname "$0")/.."
if compgen -G ".whl/*.whl" >/dev/null; then
  python -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}"
export XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 PYTHONUNBUFFERED=1
python scripts/gpu_check.py 2>&1 | tee "${OUT:-/tmp}/gpu_check.txt"
