"""The Qwen causal language model (Qwen2/2.5, Qwen3, Qwen3-MoE, Qwen3.5/3.6 hybrids): one decoder block
parameterised by the config, stacked as a Python list or, with `scan_layers`, as one stacked block run by
`jax.lax.scan`. The block's token mixer is softmax attention (`self_attn`) or, in a hybrid's linear layers,
Gated DeltaNet (`linear_attn`); both take the same arguments, so everything around them is shared.

Call it as `model(input_ids[b, s]) -> logits[b, s, vocab] float32`. Packed batches pass `segment_ids`
(0 = padding, attention never crosses a segment) and per-token `positions`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import AbstractMesh, Mesh

from tbjax.models.architecture import ModelConfig
from tbjax.models.attention import Attention
from tbjax.models.gated_deltanet import GatedDeltaNet
from tbjax.models.layers import MLP, RMSNorm, make_param
from tbjax.models.moe import SparseMoE
from tbjax.models.rope import Rotary
from tbjax.parallel.sharding import ShardingRules, shard_activation
from tbjax.sections.lora import LoraSpec

REMAT_POLICIES = {
    "full": jax.checkpoint_policies.nothing_saveable,
    "dots": jax.checkpoint_policies.checkpoint_dots,
    "dots_no_batch": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
}


class DecoderBlock(nnx.Module):
    """Pre-norm residual block: x + mixer(norm(x)), then + mlp(norm(x)) (dense or sparse MoE); the mixer is
    attention or, for `linear`, Gated DeltaNet."""

    def __init__(self, cfg: ModelConfig, moe: bool, rngs: nnx.Rngs | None, mesh: Mesh | AbstractMesh | None = None,
                 rules: ShardingRules | None = None, linear: bool = False):
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg, rngs)
        self.linear = linear
        if linear:
            self.linear_attn = GatedDeltaNet(cfg, rngs)
        else:
            self.self_attn = Attention(cfg, rngs, mesh, rules)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg, rngs)
        self.mlp = SparseMoE(cfg, rngs) if moe else MLP(cfg, rngs)

    def __call__(self, x: jax.Array, cos: jax.Array, sin: jax.Array, segments: jax.Array) -> jax.Array:
        mixer = self.linear_attn if self.linear else self.self_attn
        return self.finish(x, mixer(self.input_layernorm(x), cos, sin, segments))

    def finish(self, x: jax.Array, attention_out: jax.Array) -> jax.Array:
        """The block after attention: residual, then the (dense or sparse) MLP with its residual. Decoding
        computes attention against a KV cache and shares this half."""
        x = x + attention_out
        return x + self.mlp(self.post_attention_layernorm(x))


def _stacked_blocks(cfg: ModelConfig, rngs: nnx.Rngs | None, mesh: Mesh | AbstractMesh | None,
                    rules: ShardingRules) -> DecoderBlock:
    """All layers as one block whose parameters have a leading [layers] axis (for `lax.scan`)."""
    moe, linear = cfg.is_moe_layer(0), cfg.is_linear_layer(0)  # ModelConfig refuses scan over mixed layers
    keys = jax.random.split(rngs.params(), cfg.num_layers) if rngs is not None else None

    @nnx.vmap(in_axes=0, out_axes=0, axis_size=cfg.num_layers)
    def make(key: jax.Array | None) -> DecoderBlock:
        return DecoderBlock(cfg, moe, nnx.Rngs(params=key) if key is not None else None, mesh, rules, linear)

    stacked = make(keys)
    for _, var in nnx.iter_graph(stacked):
        if isinstance(var, nnx.Param):
            var.set_metadata(logical_axes=("layers", *var.get_metadata()["logical_axes"]))
    return stacked


class Qwen(nnx.Module):
    """`mesh`/`rules` (optional) pin the activations' sharding between blocks; parameters carry their own."""

    def __init__(self, cfg: ModelConfig, rngs: nnx.Rngs | None = None, *, mesh: Mesh | AbstractMesh | None = None,
                 rules: ShardingRules | None = None):
        self.config = cfg
        self.mesh = mesh
        self.rules = rules or ShardingRules()
        self.lora_spec: LoraSpec | None = None  # its adapters' spec, once tbjax.models.lora.add_adapters adds them
        self.rotary = Rotary(cfg.rope, cfg.rotary_dim)
        self.embed_tokens = make_param(rngs, (cfg.vocab_size, cfg.hidden_size), ("vocab", "embed"),
                                       cfg.param_dtype, "normal")
        if cfg.runtime.scan_layers:
            self.layers = _stacked_blocks(cfg, rngs, mesh, self.rules)
        else:
            self.layers = nnx.List([DecoderBlock(cfg, cfg.is_moe_layer(i), rngs, mesh, self.rules,
                                                cfg.is_linear_layer(i)) for i in range(cfg.num_layers)])
        self.norm = RMSNorm(cfg.hidden_size, cfg, rngs)
        self.lm_head = None if cfg.tie_word_embeddings else make_param(
            rngs, (cfg.vocab_size, cfg.hidden_size), ("vocab", "embed"), cfg.param_dtype, "normal")

    def __call__(self, input_ids: jax.Array, positions: jax.Array | None = None,
                 segment_ids: jax.Array | None = None) -> jax.Array:
        """input_ids: [batch, seq] int32 -> logits [batch, seq, vocab] float32."""
        return self.logits(self.hidden_states(input_ids, positions, segment_ids))

    def hidden_states(self, input_ids: jax.Array, positions: jax.Array | None = None,
                      segment_ids: jax.Array | None = None) -> jax.Array:
        """Final-normed hidden states [batch, seq, embed] in the compute dtype (the trainer turns these
        into log-probs chunk by chunk, so [tokens, vocab] never materialises whole)."""
        cfg = self.config
        if positions is None:
            positions = jnp.broadcast_to(jnp.arange(input_ids.shape[1], dtype=jnp.int32), input_ids.shape)
        if segment_ids is None:
            segment_ids = jnp.ones(input_ids.shape, jnp.int32)
        x = self._constrain(self.embed_tokens[...].astype(cfg.compute_dtype)[input_ids])
        cos, sin = self.rotary.cos_sin(positions)
        x = self._run_layers(x, cos, sin, segment_ids)
        return self.norm(x)

    def logits(self, hidden: jax.Array) -> jax.Array:
        """hidden: [..., embed] -> [..., vocab] float32 (tied models reuse the embedding table)."""
        table = self.embed_tokens if self.lm_head is None else self.lm_head
        flat = hidden.reshape(-1, hidden.shape[-1])  # see layers.flat_dot
        logits = jnp.einsum("nd,vd->nv", flat, table[...].astype(hidden.dtype), preferred_element_type=jnp.float32)
        return logits.reshape(*hidden.shape[:-1], logits.shape[-1])

    def _constrain(self, x: jax.Array) -> jax.Array:
        return shard_activation(x, ("batch", "seq", "act_embed"), self.mesh, self.rules)

    def _run_layers(self, x: jax.Array, cos: jax.Array, sin: jax.Array, segments: jax.Array) -> jax.Array:
        runtime = self.config.runtime

        def run_block(graphdef: nnx.GraphDef, state: nnx.State, x: jax.Array) -> jax.Array:
            return self._constrain(nnx.merge(graphdef, state)(x, cos, sin, segments))

        if runtime.remat != "none":
            run_block = jax.checkpoint(run_block, static_argnums=(0,), policy=REMAT_POLICIES[runtime.remat])
        if isinstance(self.layers, DecoderBlock):  # one block stacked for lax.scan (runtime.scan_layers)
            graphdef, state = nnx.split(self.layers)
            x, _ = jax.lax.scan(lambda h, layer_state: (run_block(graphdef, layer_state, h), None), x, state)
            return x
        for layer in self.layers:
            x = run_block(*nnx.split(layer), x)
        return x
