"""Per-device memory of the GRPO update, estimated from shapes and the mesh alone.

GPU targets need it because XLA cannot compile for a GPU it does not have; every compiled target prints it
beside the compiler's figure, so the estimate is checked each time it is used.

Exact (their shardings are known): parameters, AdamW moments, the packed batch. Modelled on what XLA makes
of our update (tbjax.train_step), with counts read from TPU compiles of the 27B reference layouts
(tests/tbjax/test_compile_tpu.py keeps the total within 10% of the compiler's):
- gradients: one micro-batch's gradient in the parameter dtype, which the scanned backward materialises whole,
  and the float32 accumulator (sharded like the parameters) twice: XLA double-buffers the micro-batch loop's
  carry. With a single micro-batch it folds the loop away and only the gradient itself remains;
- residual checkpoints: with remat, the layer scan keeps each layer's input, [tokens on the device, hidden];
  without remat, every layer's intermediates;
- one layer's recompute and backward: the sequence gathered for attention and the MLP ([tokens of the
  device's rows, hidden] several times), the MLP's intermediates, the layer's gathered weights;
- attention: xla materialises scores [heads, seq, seq] per row; cuDNN is handed the packed-segment mask,
  which it turns into a dense bias [seq, seq] per row; splash keeps O(seq) state;
- the vocabulary: the embedding and unembedding tables gathered whole (lookup, chunked log-probs and their
  gradients) and two [tokens, chunk] float32 logit chunks, or all the logits where they are small enough
  to be kept for the backward pass (tbjax.logprobs.KEEP_LOGITS_BYTES).
MoE and hybrid (Gated DeltaNet) models are counted as a dense model of the same widths: rougher.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import numpy as np

from tbjax.logprobs import kept_logits_bytes
from tbjax.mesh import MeshSpec
from tbjax.models import ModelConfig
from tbjax.packing import FIELDS
from tbjax.sharding import ShardingRules
from tbjax.train_step import TrainState

# Counts of whole tensors alive at the peak of one layer's backward (see the module docstring), read from the
# TPU compiles of the 27B reference layouts (within 5% of them); no GPU compile has checked them (no GPU here).
GATHERED_SEQUENCE_COPIES = 6  # [rows x seq, hidden] in the compute dtype
MLP_INTERMEDIATE_COPIES = 5  # [rows x seq, mlp / tensor] in the compute dtype
LAYER_WEIGHT_COPIES = 2  # one layer's weights, gathered, in the compute dtype
VOCAB_TABLE_COPIES = 4  # [vocab, hidden] in the compute dtype: embedding and unembedding, value and gradient
XLA_SCORE_COPIES = 3  # [heads / tensor, seq, seq] float32 per row: scores, probabilities, their gradient


@dataclasses.dataclass(frozen=True)
class MemoryPlan:
    """Bytes per device, by what holds them."""

    params: int
    optimizer: int
    gradients: int
    residuals: int
    layer_working_set: int
    attention: int
    vocabulary: int
    batch: int
    attention_note: str = ""

    @property
    def total(self) -> int:
        return (self.params + self.optimizer + self.gradients + self.residuals + self.layer_working_set
                + self.attention + self.vocabulary + self.batch)

    @property
    def activations(self) -> int:
        return self.residuals + self.layer_working_set + self.attention + self.vocabulary

    def lines(self) -> list[tuple[str, int]]:
        return [("parameters", self.params), ("optimizer state (AdamW moments, float32)", self.optimizer),
                ("gradients (a micro-batch's + the float32 accumulator, double-buffered)", self.gradients),
                ("residual checkpoints (one per layer)", self.residuals),
                ("one layer's recompute and backward", self.layer_working_set),
                (f"attention ({self.attention_note})", self.attention),
                ("vocabulary tables and logit chunks", self.vocabulary), ("packed batch", self.batch)]


@dataclasses.dataclass(frozen=True)
class UpdateShape:
    """What one update step processes per micro-batch, from the config's train section."""

    row_len: int
    micro_batch_rows: int  # per batch shard (the devices that share a row)
    micro_batches: int
    logprob_chunk: int
    batch_shards: int  # how many ways a micro-batch's rows split (the trainer's rows_multiple)


def estimate_update(cfg: ModelConfig, spec: MeshSpec, rules: ShardingRules, state: TrainState,
                    shape: UpdateShape) -> MemoryPlan:
    """`state`: the trainer's state as ShapeDtypeStructs with shardings (GRPOTrainer.state_shapes(), on a
    real or abstract mesh)."""
    param_bytes = _shard_bytes(state.params)
    param_elements = sum(math.prod(_shard_shape(s)) for s in jax.tree.leaves(state.params))
    itemsize = np.dtype(cfg.param_dtype).itemsize
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
    # eight int32/float32 fields per token, and the head's int32 index of trained positions at its widest
    batch = (len(FIELDS) + 1) * shape.micro_batches * rows * seq * 4
    return MemoryPlan(
        params=param_bytes, optimizer=_shard_bytes(state.opt_state),
        gradients=param_elements * (itemsize + (2 * 4 if shape.micro_batches > 1 else 0)),
        residuals=int(residuals), layer_working_set=int(working), attention=int(attention),
        vocabulary=int(vocabulary), batch=batch, attention_note=note)


def _attention(cfg: ModelConfig, rows: int, seq: int, heads: int, c: int) -> tuple[float, str]:
    impl = cfg.runtime.attention_impl
    if impl == "xla":
        return XLA_SCORE_COPIES * rows * heads * seq * seq * 4, "xla: [heads, seq, seq] float32 scores"
    if impl == "cudnn":
        return rows * seq * seq * c, "cuDNN: the packed-segment mask as a dense [seq, seq] bias"
    return 4 * rows * heads * seq * 4, "splash: O(seq) softmax statistics"


def _shard_shape(leaf: jax.ShapeDtypeStruct) -> tuple[int, ...]:
    return leaf.sharding.shard_shape(leaf.shape) if leaf.sharding is not None else leaf.shape


def _shard_bytes(tree) -> int:
    return sum(math.prod(_shard_shape(s)) * np.dtype(s.dtype).itemsize for s in jax.tree.leaves(tree))
