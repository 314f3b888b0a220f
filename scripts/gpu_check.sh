#!/usr/bin/env bash
# The device check for a lent GPU machine (jax with CUDA, torch and transformers already installed there):
#   run it through the device tool from the repository root, e.g. `bash scripts/gpu_check.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD:${PYTHONPATH:-}"
export XLA_PYTHON_CLIENT_MEM_FRACTION=0.95
python -m pip install -q --no-deps -e . >/dev/null 2>&1 || true
python scripts/gpu_check.py 2>&1 | tee "${OUT:-/tmp}/gpu_check.txt"
