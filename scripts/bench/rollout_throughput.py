"""Decode throughput of the JaxEngine at 1, 8 and 32 concurrent sequences against transformers' `generate`
(torch CPU, the same batch size) on the same tiny Qwen3, in the same run. Sampling is the seed run's
(T=1, top-k 20, top-p 0.95) on both sides; every sequence decodes exactly --new-tokens tokens.

    python scripts/bench/rollout_throughput.py [--model DIR] [--prompt 128] [--new-tokens 128]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import transformers

from rollout.engines.protocol import SamplingParams
from tbjax.assets.tiny import make_flax_checkpoint
from tbjax.engine.jax_engine import JaxEngine
from tbjax.models import from_pretrained

CONCURRENCY = (1, 8, 32)


def prompts(n: int, length: int, vocab: int) -> list[list[int]]:
    rng = np.random.default_rng(0)
    return [[int(t) for t in rng.integers(3, vocab, size=length)] for _ in range(n)]


def jax_tokens_per_second(engine: JaxEngine, batch: list[list[int]], new_tokens: int) -> float:
    params = SamplingParams(max_new_tokens=new_tokens, temperature=1.0, top_k=20, top_p=0.95)

    async def run() -> int:
        results = await asyncio.gather(*(engine.generate(p, params) for p in batch))
        return sum(len(r.output_ids) for r in results)

    for _ in range(2):  # compile every bucket this workload meets (a shape's second call compiles once more)
        asyncio.run(run())
    start = time.perf_counter()
    produced = asyncio.run(run())
    return produced / (time.perf_counter() - start)


def torch_tokens_per_second(model, batch: list[list[int]], new_tokens: int) -> float:
    ids = torch.tensor(batch)
    kwargs = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=True, temperature=1.0, top_k=20,
                  top_p=0.95, attention_mask=torch.ones_like(ids), pad_token_id=0)
    with torch.no_grad():
        model.generate(ids, **kwargs)
        start = time.perf_counter()
        out = model.generate(ids, **kwargs)
    return (out.shape[1] - ids.shape[1]) * ids.shape[0] / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, help="HF directory (default: the tiny Qwen3, made on the spot)")
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=128)
    args = parser.parse_args()
    torch.set_num_threads(os.cpu_count())
    model_dir = args.model or make_flax_checkpoint(Path(tempfile.mkdtemp()) / "tiny-qwen3")
    jax_model = from_pretrained(model_dir)
    torch_model = transformers.AutoModelForCausalLM.from_pretrained(model_dir).eval()
    vocab = jax_model.config.vocab_size
    print(f"model: {jax_model.config.model_type} {jax_model.config.num_params() / 1e6:.2f}M params, prompt "
          f"{args.prompt}, {args.new_tokens} new tokens per sequence, {os.cpu_count()} cores")
    for n in CONCURRENCY:
        batch = prompts(n, args.prompt, vocab)
        engine = JaxEngine(jax_model, slots=max(CONCURRENCY), max_len=args.prompt + args.new_tokens + 2)
        ours = jax_tokens_per_second(engine, batch, args.new_tokens)
        asyncio.run(engine.close())
        theirs = torch_tokens_per_second(torch_model, batch, args.new_tokens)
        target = "  (target >= 3x)" if n == 8 else ""
        print(f"{n:3d} concurrent: JaxEngine {ours:9.1f} tok/s, transformers generate {theirs:9.1f} tok/s, "
              f"ratio {ours / theirs:5.2f}x{target}")


if __name__ == "__main__":
    main()
