#!/usr/bin/env bash
# Builds the venv that `python -m tbjax.compile --target tpu:...` compiles TPU programs in, without a TPU:
# jax[tpu] (libtpu) at the JAX version of the project's venv, plus tbjax's runtime dependencies. libtpu never
# goes into the project's venv (JAX would try to start a TPU backend on every import there), and tbjax itself
# is not installed: tbjax.compile runs it from the checkout that calls it (PYTHONPATH).
#
#   scripts/tpu_aot_venv.sh [VENV]     (default ~/.cache/tbjax/tpu-aot-venv; about 1 minute and 1.8 GB)
#
# Idempotent: a venv whose stamp matches the requested versions is left as it is.
set -euo pipefail

VENV=${1:-$HOME/.cache/tbjax/tpu-aot-venv}
REPO=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
JAX_VERSION=${TBJAX_TPU_JAX_VERSION:-0.10.2}  # libtpu wheels are built per JAX release

# tbjax's runtime dependencies from pyproject.toml, so the venv follows the project's pins.
DEPS=$("$PYTHON" - "$REPO/pyproject.toml" <<'EOF'
import sys, tomllib
deps = tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]
print("\n".join(d for d in deps if not d.startswith("jax")))
EOF
)
STAMP="jax[tpu]==$JAX_VERSION $(echo "$DEPS" | tr '\n' ' ')"

if [[ -f "$VENV/tbjax-stamp" && "$(cat "$VENV/tbjax-stamp")" == "$STAMP" ]]; then
  echo "$VENV is up to date"
  exit 0
fi
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
mapfile -t DEP_LIST <<< "$DEPS"
"$VENV/bin/pip" install --quiet "jax[tpu]==$JAX_VERSION" "${DEP_LIST[@]}"
"$VENV/bin/python" -c "import libtpu, jax; print('jax', jax.__version__, 'with libtpu at', libtpu.__path__[0])"
echo "$STAMP" > "$VENV/tbjax-stamp"
