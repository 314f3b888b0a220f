"""Forward+backward tokens/s of a ~50M-parameter Qwen3 at seq 512 on CPU: tbjax (jitted) beside
transformers (torch CPU) on the same config and batch in the same run, plus achieved FLOP/s as a share of
a numpy float32 GEMM measured in the same run (this machine's practical matmul limit).

    python scripts/bench/model_forward_backward.py [--steps 5] [--batch 2] [--seq 512]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import torch
import transformers
from bench_common import CONFIG, median_seconds
from flax import nnx

from tbjax.models import ModelConfig, Qwen

GEMM_SCRIPT = """
import time, numpy as np
n = 2048
a, b = np.random.rand(n, n).astype(np.float32), np.random.rand(n, n).astype(np.float32)
a @ b
best = min((lambda t: (a @ b, time.perf_counter() - t)[1])(time.perf_counter()) for _ in range(5))
print(2 * n**3 / best)
"""


def gemm_flops() -> float:
    """numpy float32 GEMM FLOP/s, in a clean process: OpenBLAS core-type overrides (set on some machines
    for old builds) slow a current numpy and would flatter the ratio."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    return float(subprocess.run([sys.executable, "-c", GEMM_SCRIPT], env=env, capture_output=True, text=True,
                                check=True).stdout)


def tbjax_step(ids: np.ndarray):
    cfg = ModelConfig.from_hf_dict(CONFIG)
    model = Qwen(cfg, nnx.Rngs(0))
    graphdef, params = nnx.split(model)

    @jax.jit
    def loss_and_grad(params, ids):
        def loss(params):
            logits = nnx.merge(graphdef, params)(ids[:, :-1])
            return optax.softmax_cross_entropy_with_integer_labels(logits, ids[:, 1:]).mean()

        return jax.value_and_grad(loss)(params)

    device_ids = jnp.asarray(ids, jnp.int32)
    return lambda: jax.block_until_ready(loss_and_grad(params, device_ids)), cfg


def torch_step(ids: np.ndarray):
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**CONFIG))
    model.train()
    inputs = torch.tensor(ids)

    def step():
        model.zero_grad(set_to_none=True)
        logits = model(inputs[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), inputs[:, 1:].reshape(-1))
        loss.backward()

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=512)
    args = parser.parse_args()
    torch.set_num_threads(os.cpu_count())
    ids = np.random.default_rng(0).integers(0, CONFIG["vocab_size"], size=(args.batch, args.seq + 1))
    tokens = args.batch * args.seq

    step, cfg = tbjax_step(ids)
    seconds = median_seconds({"tbjax": step, "transformers": torch_step(ids)}, args.steps)
    jax_seconds, torch_seconds = seconds["tbjax"], seconds["transformers"]
    peak = gemm_flops()
    train_flops = 3 * cfg.flops_per_token(args.seq) * tokens  # backward ~ 2x forward

    print(f"model: qwen3 {cfg.num_params() / 1e6:.1f}M params, batch {args.batch} x seq {args.seq}, "
          f"{os.cpu_count()} cores, jax {jax.__version__}, torch {torch.__version__}")
    print(f"tbjax        : {tokens / jax_seconds:9.1f} tokens/s  ({jax_seconds * 1e3:.0f} ms/step)")
    print(f"transformers : {tokens / torch_seconds:9.1f} tokens/s  ({torch_seconds * 1e3:.0f} ms/step)")
    print(f"ratio tbjax / transformers: {torch_seconds / jax_seconds:.2f}x (target >= 1.0)")
    print(f"numpy f32 GEMM: {peak / 1e9:.1f} GFLOP/s; tbjax achieves {train_flops / jax_seconds / 1e9:.1f} GFLOP/s "
          f"= {train_flops / jax_seconds / peak:.0%} of it (target >= 40%)")


if __name__ == "__main__":
    main()
