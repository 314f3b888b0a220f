"""google-tunix's side of scripts/bench/grpo_step.py; runs in tunix's own venv (its pins are its own).

It builds tunix's Qwen3 from the same config, its actor `Trainer` (nnx.jit step, donated nnx.Optimizer)
with the loss its GRPOLearner installs (`grpo_loss_fn`: full [batch, completion, vocab] logits, clipped
ratio, token-mean), and the same batch in tunix's unpacked layout: left-padded prompts, right-padded
completions. It imports nothing from tbjax. Protocol, one JSON object per line on stdout: `ready` once
built; then per stdin line `step` -> {"seconds", "cpu_seconds"} for one update (the parent interleaves
these with its own steps); `quit` -> {"peak_rss_mb"}. Library chatter goes to stderr so that stdout stays
parseable.

    python scripts/bench/tunix_grpo_worker.py BATCH.npz
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import resource
import sys
import time
from typing import Any

import jax
import numpy as np
import optax
from flax import nnx
from tunix.models.qwen3 import model as qwen3
from tunix.rl import algo_core, trainer
from tunix.rl.grpo import grpo_learner
from tunix.sft import peft_trainer

PAD_ID, EOS_ID = 0, 1


def model_config(hf: dict[str, Any]) -> qwen3.ModelConfig:
    """tunix's Qwen3 config from the HF config.json fields (float32 params and compute, no remat)."""
    return qwen3.ModelConfig(
        num_layers=hf["num_hidden_layers"], vocab_size=hf["vocab_size"], embed_dim=hf["hidden_size"],
        hidden_dim=hf["intermediate_size"], num_heads=hf["num_attention_heads"], head_dim=hf["head_dim"],
        num_kv_heads=hf["num_key_value_heads"], rope_theta=int(hf["rope_theta"]), norm_eps=hf["rms_norm_eps"],
        use_tied_embedding=hf["tie_word_embeddings"])


def build_step(setup: dict[str, Any], arrays: dict[str, np.ndarray]):
    """tunix's jitted train step over the batch, the way GRPOLearner wires its actor trainer."""
    model = qwen3.Qwen3(model_config(setup["model"]), rngs=nnx.Rngs(0))
    optim = setup["optim"]
    optimizer = optax.chain(
        optax.clip_by_global_norm(optim["grad_clip"]),
        optax.adamw(optim["learning_rate"], b1=optim["b1"], b2=optim["b2"], eps=optim["eps"],
                    weight_decay=optim["weight_decay"]))
    actor = trainer.Trainer(model, optimizer, peft_trainer.TrainingConfig(eval_every_n_steps=10**9),
                            custom_checkpoint_metadata_fn=dict)
    algo = grpo_learner.GRPOConfig(num_generations=setup["group_size"], num_iterations=1, beta=0.0,
                                   epsilon=setup["loss"]["clip_low"], loss_agg_mode="token-mean")
    algo.epsilon_high = setup["loss"]["clip_high"]  # read by grpo_loss_fn when present (DAPO-style)
    algo.temperature = setup["temperature"]  # GRPOLearner copies it from the rollout config
    actor.with_loss_fn(lambda model, train_example, algo_config: algo_core.grpo_loss_fn(
        model, train_example, algo_config=algo, pad_id=PAD_ID, eos_id=EOS_ID), has_aux=True)
    actor.with_gen_model_input_fn(lambda x: {"train_example": x, "algo_config": algo})
    train_step, _ = actor.jit_train_and_eval_step()
    prompt_ids, completion_ids = (jax.numpy.asarray(arrays[k]) for k in ("prompt_ids", "completion_ids"))
    example = grpo_learner.TrainExample(
        prompt_ids=prompt_ids, prompt_mask=prompt_ids != PAD_ID, completion_ids=completion_ids,
        completion_mask=completion_ids != PAD_ID, advantages=jax.numpy.asarray(arrays["advantages"]),
        ref_per_token_logps=None, old_per_token_logps=None)
    params = sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param)))
    return (lambda: jax.block_until_ready(train_step(example))), params


def main() -> None:
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    sys.stdout = sys.stderr

    def say(**message: object) -> None:
        protocol.write(json.dumps(message) + "\n")

    with np.load(sys.argv[1]) as data:
        arrays = {k: data[k] for k in data.files}
    step, params = build_step(json.loads(str(arrays.pop("setup"))), arrays)
    say(ready=True, params=int(params), tunix=importlib.metadata.version("google-tunix"), jax=jax.__version__,
        flax=importlib.metadata.version("flax"))
    for line in sys.stdin:
        if line.strip() == "step":
            start, cpu = time.perf_counter(), time.process_time()
            step()
            say(seconds=time.perf_counter() - start, cpu_seconds=time.process_time() - cpu)
        elif line.strip() == "quit":
            break
    say(peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


if __name__ == "__main__":
    main()
