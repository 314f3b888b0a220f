"""How much of a whole version a delta publish writes, on real consecutive GRPO updates: the tiny Qwen3 of the
laptop run's architecture and the 48.2M-parameter bench Qwen3 take `--updates` AdamW steps (the seed's lr 1e-6,
on a fixed synthetic batch of scripts/bench/grpo_step.py), each published by tbjax.models.hf.delta's
DeltaPublisher after the update. Four settings: float32 parameters published in float32; the same published in
bfloat16; bfloat16 parameters stepped through float32 master weights (optim.master_dtype), published in
bfloat16; the same without master weights. For each delta: the share of tensors that changed, and the shares
of a whole version's bytes that a `tensors` delta (the changed tensors whole) and an `elements` delta (its file:
a 4-byte index and the value per changed element) write.

    python scripts/bench/delta_publish.py [--updates 3]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from bench_common import CONFIG
from flax import nnx
from grpo_step import synthetic_groups

from tbjax.assets.tiny import hf_config
from tbjax.models import ModelConfig, Qwen, RuntimeConfig
from tbjax.models.hf.delta import ELEMENTS_FILE, DeltaPublisher
from tbjax.models.hf.versions import DELTA_FILE
from tbjax.sections.training import GRPOSection, OptimSection
from tbjax.trainer.packing import batch_from_groups
from tbjax.trainer.update import GRPOTrainer

SETTINGS = {  # name: (parameter dtype, master weights, published dtype)
    "float32 -> float32": ("float32", "float32", "float32"),
    "float32 -> bfloat16": ("float32", "float32", "bfloat16"),
    "bfloat16 + float32 masters -> bfloat16": ("bfloat16", "float32", "bfloat16"),
    "bfloat16, no masters -> bfloat16": ("bfloat16", "none", "bfloat16"),
}
MODELS = {"tiny": hf_config("qwen3", 512), "bench 48.2M": CONFIG}


def delta_shares(architecture: dict, setting: tuple[str, str, str], updates: int, root: Path) -> list[dict]:
    """Publishes the model after each of `updates` updates; each delta's shares of tensors and of bytes."""
    param_dtype, masters, published = setting
    config = ModelConfig.from_hf_dict(architecture, RuntimeConfig(param_dtype=param_dtype, compute_dtype="float32"))
    model = Qwen(config, nnx.Rngs(0))
    grpo, optim = GRPOSection(), OptimSection(master_dtype=masters)
    trainer = GRPOTrainer(model, grpo, optim)
    state = trainer.init_state(model)
    shape = argparse.Namespace(episodes=8, group_size=4, prompt=64, completion=192, lengths="varied")
    batch = batch_from_groups(synthetic_groups(shape, config.vocab_size), grpo, 256, 1)
    assert batch is not None, "the synthetic groups are informative"
    publisher = DeltaPublisher("elements", full_every=updates + 1)
    whole = publisher.publish(trainer.model_for(state.params), root, 0, dtype=published)
    sizes = {name: tensor.nbytes for name, tensor in publisher.published.items()}
    total = sum(sizes.values())
    assert whole.is_dir()
    shares = []
    for version in range(1, updates + 1):
        state, _ = trainer.update(state, trainer.prepare(state.params, batch))
        delta = publisher.publish(trainer.model_for(state.params), root, version, dtype=published)
        changed = json.loads((delta / DELTA_FILE).read_text())["tensors"]
        shares.append({"tensors": len(changed) / len(sizes),
                       "tensor bytes": sum(sizes[name] for name in changed) / total,
                       "element bytes": (delta / ELEMENTS_FILE).stat().st_size / total})
    return shares


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--updates", type=int, default=3)
    args = parser.parse_args()
    print(f"{args.updates} consecutive updates (AdamW lr {OptimSection().learning_rate:g}); per delta: tensors "
          "changed, a `tensors` delta's bytes, an `elements` delta's bytes, as shares of a whole version")
    for model_name, architecture in MODELS.items():
        for setting_name, setting in SETTINGS.items():
            with tempfile.TemporaryDirectory() as tmp:
                shares = delta_shares(architecture, setting, args.updates, Path(tmp))
            cells = "  ".join(f"{s['tensors']:6.1%} {s['tensor bytes']:6.1%} {s['element bytes']:7.2%}" for s in shares)
            print(f"{model_name:12s} {setting_name:40s} {cells}")


if __name__ == "__main__":
    main()
