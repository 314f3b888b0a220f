"""Per-device memory of the GRPO update, estimated from shapes and the mesh alone.

GPU targets need it because XLA cannot compile for a GPU it does not have; every compiled target prints it
beside the compiler's figure, so the estimate is checked each time it is used.

The update is two programs (tbjax.trainer.update), so the device peaks twice: in `accumulate` (the micro-batches'
forward and backward passes, one after the other) and in `apply` (AdamW). Exact (their shardings are known):
parameters, AdamW moments, the float32 gradient accumulator, one call's packed micro-batches. Modelled on what
XLA makes of our programs, with counts read from TPU compiles of the 27B reference layouts
(tests/tbjax/plan/test_compile_tpu.py keeps each peak within 10% of the compiler's):
- the moments, and the float32 master weights of parameters narrower than float32, are on the device through
  `accumulate` unless they wait in host memory (offload_optimizer);
- gradients: one micro-batch's gradient in the parameter dtype, which the scanned backward materialises whole,
  beside the float32 accumulator;
- residual checkpoints: with remat, the layer scan keeps each layer's input, [tokens on the device, hidden];
  without remat, every layer's intermediates;
- one layer's recompute and backward: the sequence gathered for attention and the MLP ([tokens of the
  device's rows, hidden] several times), the MLP's intermediates, the layer's gathered weights;
- attention: xla materialises scores [heads, seq, seq] per row; cuDNN is handed the packed-segment mask,
  which it turns into a dense bias [seq, seq] per row; splash keeps O(seq) state;
- the vocabulary: the embedding and unembedding tables gathered whole (lookup, chunked log-probs and their
  gradients) and two [tokens, chunk] float32 logit chunks, or all the logits where they are small enough
  to be kept for the backward pass (tbjax.trainer.logprobs.KEEP_LOGITS_BYTES);
- apply: the parameters, the masters, the moments and the accumulator alone. XLA fuses AdamW element by element into the
  donated buffers, so its temporaries are small beside them (tbjax/README.md, Will it fit?, has the figure).
MoE and hybrid (Gated DeltaNet) models are counted as a dense model of the same widths: rougher.
Under LoRA (`lora.rank` > 0) the parameters, gradients, accumulator, moments and masters are the adapters' (float32,
so no masters), and the base they adapt is counted apart: frozen in its dtype, on the device in both programs.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import numpy as np

from tbjax.models import ModelConfig
from tbjax.parallel.mesh import MeshSpec
from tbjax.parallel.sharding import ShardingRules
from tbjax.trainer.logprobs import kept_logits_bytes
from tbjax.trainer.packing import FIELDS
from tbjax.trainer.train_state import TrainState

# Counts of whole tensors alive at the peak of one layer's backward (see the module docstring), read from the
# TPU compiles of the 27B reference layouts (tests/tbjax/plan/test_compile_tpu.py checks them); no GPU compile
# has checked them.
GATHERED_SEQUENCE_COPIES = 6  # [rows x seq, hidden] in the compute dtype
MLP_INTERMEDIATE_COPIES = 5  # [rows x seq, mlp / tensor] in the compute dtype
LAYER_WEIGHT_COPIES = 2  # one layer's weights, gathered, in the compute dtype
VOCAB_TABLE_COPIES = 4  # [vocab, hidden] in the compute dtype: embedding and unembedding, value and gradient
XLA_SCORE_COPIES = 3  # [heads / tensor, seq, seq] float32 per row: scores, probabilities, their gradient


@dataclasses.dataclass(frozen=True)
class MemoryPlan:
    """Bytes per device, by what holds them, and the two peaks they make."""

    params: int
    optimizer: int
    optimizer_on_host: bool  # through `accumulate` (offload_optimizer, or colocated), with the masters
    micro_gradient: int
    accumulator: int
    residuals: int
    layer_working_set: int
    attention: int
    vocabulary: int
    batch: int
    master: int = 0  # float32 master weights (0 for float32 parameters, which are their own)
    frozen: int = 0  # under LoRA: the base weights, which no program updates (0 otherwise)
    attention_note: str = ""

    @property
    def gradients(self) -> int:
        return self.micro_gradient + self.accumulator

    @property
    def activations(self) -> int:
        return self.residuals + self.layer_working_set + self.attention + self.vocabulary

    @property
    def backward_peak(self) -> int:
        optimizer = 0 if self.optimizer_on_host else self.optimizer + self.master
        return self.frozen + self.params + optimizer + self.gradients + self.activations + self.batch

    @property
    def apply_peak(self) -> int:
        return self.frozen + self.params + self.master + self.optimizer + self.accumulator

    @property
    def total(self) -> int:
        return max(self.backward_peak, self.apply_peak)

    def lines(self) -> list[tuple[str, int]]:
        """(what, bytes) for every part, in the order the report prints them."""
        return [(label, value) for _, label, value in self._parts()]

    def peak_lines(self) -> list[tuple[str, int]]:
        """The lines of the program whose peak is the plan's peak: what would have to shrink."""
        if self.apply_peak > self.backward_peak:
            held = {"frozen", "params", "master", "optimizer", "accumulator"}
        else:
            held = {field for field, _, _ in self._parts()} - ({"optimizer", "master"} if self.optimizer_on_host
                                                               else set())
        return [(label, value) for field, label, value in self._parts() if field in held]

    def _parts(self) -> list[tuple[str, str, int]]:
        """(field, label, bytes) of every part."""
        where = "in host memory until apply" if self.optimizer_on_host else "on the device throughout"
        labels = {
            "frozen": "frozen base weights (LoRA: no gradients, moments or masters)",
            "params": "LoRA adapters (float32, trained)" if self.frozen else "parameters",
            "master": f"master weights (float32, {where})",
            "optimizer": f"optimizer state (AdamW moments, float32, {where})",
            "accumulator": "gradient accumulator (float32)",
            "micro_gradient": "a micro-batch's gradient (the trained parameters' dtype)",
            "residuals": "residual checkpoints (one per layer)",
            "layer_working_set": "one layer's recompute and backward",
            "attention": f"attention ({self.attention_note})", "vocabulary": "vocabulary tables and logit chunks",
            "batch": "the packed micro-batches of one accumulate call",
        }
        return [(field, label, getattr(self, field)) for field, label in labels.items()
                if field not in ("master", "frozen") or getattr(self, field)]


@dataclasses.dataclass(frozen=True)
class UpdateShape:
    """What one update step processes per micro-batch, from the config's train section."""

    row_len: int
    micro_batch_rows: int  # per batch shard (the devices that share a row)
    micro_batches: int
    logprob_chunk: int
    batch_shards: int  # how many ways a micro-batch's rows split (the trainer's rows_multiple)
    micro_batches_per_call: int  # scanned by one `accumulate` call (train.micro_batches_per_call; 0: all)
    # per-token log-prob arrays the update adds before its first step (old log-probs with several optimizer
    # steps per batch, the reference's with a KL term)
    logprob_arrays: int = 0

    @property
    def call_micro_batches(self) -> int:
        return min(self.micro_batches_per_call or self.micro_batches, self.micro_batches)


def estimate_update(cfg: ModelConfig, spec: MeshSpec, rules: ShardingRules, state: TrainState,
                    shape: UpdateShape, optimizer_on_host: bool, frozen: Any = None) -> MemoryPlan:
    """`state`: the trainer's state as ShapeDtypeStructs with shardings (GRPOTrainer.state_shapes(), on a
    real or abstract mesh); `optimizer_on_host`: the moments wait in host memory through `accumulate`;
    `frozen`: under LoRA, the base weights likewise (GRPOTrainer.frozen_shapes())."""
    param_bytes = shard_bytes(state.params)
    param_elements = sum(math.prod(_shard_shape(s)) for s in jax.tree.leaves(state.params))
    c = np.dtype(cfg.compute_dtype).itemsize
    sizes = spec.sizes

    def split(logical: str, size: int) -> int:
        parts = math.prod(sizes[a] for a in rules.mesh_axes(logical))
        return parts if size % parts == 0 else 1

    rows, seq = shape.micro_batch_rows, shape.row_len
    tokens_full = rows * seq  # the device's rows, sequence gathered
    tokens = tokens_full // split("seq", seq)  # the residual stream on the device
    d = cfg.hidden_size
    heads = cfg.num_heads // split("q_heads", cfg.num_heads)
    mlp = cfg.intermediate_size // split("mlp", cfg.intermediate_size)
    layer_params = (cfg.num_params() - cfg.vocab_size * d * (1 if cfg.tie_word_embeddings else 2)) / cfg.num_layers

    if cfg.runtime.remat == "none":  # every intermediate of every layer waits for the backward
        per_layer = tokens_full * (6 * d + 2 * heads * cfg.head_dim + 3 * mlp) * c
        residuals = cfg.num_layers * per_layer
    else:
        residuals = cfg.num_layers * tokens * d * c
    working = (GATHERED_SEQUENCE_COPIES * tokens_full * d + MLP_INTERMEDIATE_COPIES * tokens_full * mlp
               + LAYER_WEIGHT_COPIES * layer_params) * c
    attention, note = _attention(cfg, rows, seq, heads, c)
    logits = max(2 * tokens * min(shape.logprob_chunk, cfg.vocab_size) * 4, kept_logits_bytes(tokens, cfg.vocab_size))
    vocabulary = VOCAB_TABLE_COPIES * cfg.vocab_size * d * c + logits
    # eight int32/float32 fields per token, the added log-probs, and the head's int32 index of trained positions
    # at its widest
    batch = (len(FIELDS) + shape.logprob_arrays + 1) * shape.call_micro_batches * rows * seq * 4
    return MemoryPlan(
        params=param_bytes, optimizer=shard_bytes(state.opt_state), optimizer_on_host=optimizer_on_host,
        master=shard_bytes(state.master),
        micro_gradient=param_bytes, accumulator=param_elements * 4, frozen=shard_bytes(frozen),
        residuals=int(residuals), layer_working_set=int(working), attention=int(attention),
        vocabulary=int(vocabulary), batch=batch, attention_note=note)


def _attention(cfg: ModelConfig, rows: int, seq: int, heads: int, c: int) -> tuple[float, str]:
    impl = cfg.runtime.attention_impl
    if impl == "xla":
        return XLA_SCORE_COPIES * rows * heads * seq * seq * 4, "xla: [heads, seq, seq] float32 scores"
    if impl == "cudnn":
        return rows * seq * seq * c, "cuDNN: the packed-segment mask as a dense [seq, seq] bias"
    # the Pallas kernels repeat kv heads to the query heads (k, v and their gradients) and keep O(seq) statistics
    return rows * heads * seq * (4 * cfg.head_dim * c + 4 * 4), f"{impl}: O(seq) state, kv heads repeated"


def _shard_shape(leaf: jax.ShapeDtypeStruct) -> tuple[int, ...]:
    return leaf.sharding.shard_shape(leaf.shape) if leaf.sharding is not None else leaf.shape


def shard_bytes(tree) -> int:
    """Bytes of one device's shards of a tree of ShapeDtypeStructs."""
    return sum(math.prod(_shard_shape(s)) * np.dtype(s.dtype).itemsize for s in jax.tree.leaves(tree))
