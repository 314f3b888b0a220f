"""How alike two runs' parameter changes are: the Pearson correlation of (A - START) and (B - START) over every
weight, with the share of weights each run moved. The check that a bfloat16 policy with float32 master weights
trains as its float32 twin does (exports of both with `tbjax.export ... --dtype float32`, START the HF
directory both started from; the README's training section gives the commands).

    python scripts/update_correlation.py START A B
"""

from __future__ import annotations

import argparse
from pathlib import Path

import jax
import numpy as np
from flax import nnx

from tbjax.models import from_pretrained


def weights(directory: Path) -> np.ndarray:
    """Every parameter of the HF directory, read as float32 (bfloat16 weights upcast exactly), flattened."""
    params = nnx.state(from_pretrained(directory), nnx.Param)
    return np.concatenate([np.ravel(np.asarray(leaf, np.float32)) for leaf in jax.tree.leaves(params)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("start", type=Path, help="the HF directory both runs started from")
    parser.add_argument("a", type=Path, help="one run's float32 export")
    parser.add_argument("b", type=Path, help="the other run's float32 export")
    args = parser.parse_args()
    start = weights(args.start)
    a, b = weights(args.a) - start, weights(args.b) - start
    if not a.any() or not b.any():
        raise SystemExit(f"error: {'A' if not a.any() else 'B'} is START itself: that run changed no weight "
                         "(a skipped step, or an export of its parameters rather than its masters?)")
    print(f"moved: A {np.mean(a != 0):.1%} of {a.size:,} weights, B {np.mean(b != 0):.1%}; "
          f"largest change A {np.abs(a).max():.3g}, B {np.abs(b).max():.3g}")
    print(f"correlation of the changes: {np.corrcoef(a, b)[0, 1]:.4f}")


if __name__ == "__main__":
    main()
