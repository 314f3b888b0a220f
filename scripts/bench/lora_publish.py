"""Publish-to-served time of a LoRA adapter against a whole-model publish, on CPU, in the same run: the
~50M-parameter Qwen3 with rank-16 adapters on attention and the MLP (the seed's LoRA recipe). The adapter side is
what a LoRA run does after each update: tbjax.models.hf.versions.publish_adapter writes the PEFT directory, and an
`tbjax.serve --enable-lora` engine (tbjax.engine.adapters.AdapterServing) loads it under a new name, swaps it
in for the next request and unloads the previous one. The whole-model side is the full-parameter publish:
publish_weights, then the engine's update_weights from disk. Prints each step, the bytes each moves, and the
ratio, and the 27B reference's adapter size at the same rank.

    python scripts/bench/lora_publish.py [--rounds 5] [--rank 16] [--dir DIR (default: a temporary directory)]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import tempfile
from pathlib import Path

import yaml
from bench_common import CONFIG, median_seconds
from flax import nnx
from publish_to_served import REFERENCE, directory_bytes, rate

from tbjax.engine.adapters import AdapterServing
from tbjax.engine.jax_engine import JaxEngine
from tbjax.models import ModelConfig, Qwen
from tbjax.models.hf.versions import publish_adapter, publish_weights
from tbjax.models.lora import add_adapters
from tbjax.plan.publish_time import adapter_params
from tbjax.sections.lora import LoraSpec

ENGINE = {"slots": 1, "max_len": 64}


class AdapterPublish:
    """One adapter publish per call: publish version N, load it as "vN", serve one request under it (the swap),
    unload version N - 1, as the trainer and a LoRA server do after each update."""

    def __init__(self, policy: Qwen, spec: LoraSpec, serving: AdapterServing, root: Path) -> None:
        self.policy, self.spec, self.serving, self.root = policy, spec, serving, root
        self.versions = itertools.count()
        self.loop = asyncio.new_event_loop()

    def __call__(self) -> None:
        version = next(self.versions)
        path = publish_adapter(self.policy, self.spec, self.root, version)
        self.loop.run_until_complete(self._serve(f"v{version}", str(path)))
        if version:
            self.serving.unload(f"v{version - 1}")

    async def _serve(self, name: str, path: str) -> None:
        await self.serving.load(name, path)
        async with self.serving.serving(name):
            pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds per contender, after 2 warm-up rounds")
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--dir", type=Path, help="where to write (default: a temporary directory under /tmp)")
    args = parser.parse_args()
    config = ModelConfig.from_hf_dict({**CONFIG, "dtype": "float32"})
    spec = LoraSpec(rank=args.rank, alpha=2.0 * args.rank)
    full_policy, policy = Qwen(config, nnx.Rngs(0)), Qwen(config, nnx.Rngs(0))
    add_adapters(policy, spec, seed=1)
    base = JaxEngine(Qwen(config, nnx.Rngs(0)), **ENGINE)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(tmp)
        published = publish_weights(full_policy, root / "weights", 0)
        serving = AdapterServing.on(Qwen(config, nnx.Rngs(0)), args.rank, spec.targets, max_loaded=2, **ENGINE)
        adapter = AdapterPublish(policy, spec, serving, root / "adapters")
        seconds = median_seconds({
            "adapter": adapter,
            "full publish": lambda: publish_weights(full_policy, root / "weights", 0),
            "full load": lambda: asyncio.run(base.update_weights(str(published), "0")),
        }, args.rounds)
        adapter_bytes = directory_bytes(root / "adapters" / "latest")
        model_bytes = directory_bytes(published)
        adapter.loop.run_until_complete(serving.engine.close())
    asyncio.run(base.close())
    full = seconds["full publish"] + seconds["full load"]
    reference = ModelConfig.from_hf_dict(yaml.safe_load(REFERENCE.read_text())["model"]["architecture"])
    print(f"model: qwen3 {config.num_params() / 1e6:.1f}M params float32, LoRA r{args.rank} on attention_mlp "
          f"({adapter_params(config, spec) / 1e6:.2f}M params), {os.cpu_count()} cores, median of {args.rounds} "
          "rounds")
    print(f"adapter publish-to-served (publish, load, swap, unload the last): {rate(adapter_bytes, seconds['adapter'])}"
          f"  ({adapter_bytes / 1e6:.1f} MB)")
    print(f"full publish-to-served (publish, update_weights)              : {rate(model_bytes, full)}"
          f"  ({model_bytes / 1e6:.1f} MB)")
    print(f"adapter / full: {seconds['adapter'] / full:.3f} of the time, {adapter_bytes / model_bytes:.3f} of the "
          "bytes")
    print(f"27B reference at r{args.rank}: {adapter_params(reference, spec) * 4 / 1e9:.2f} GB of float32 adapters "
          f"against {reference.num_params() * 2 / 1e9:.1f} GB of bfloat16 weights")


if __name__ == "__main__":
    main()
