"""The Qwen3.5 hybrid where training uses it: sharded over 24 forced CPU devices (3x8, and heads over
`tensor`) it computes what one device computes, and the GRPO update's gradient through Gated DeltaNet is
finite and agrees with finite differences of the same loss (also under remat)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from tbjax.models import RuntimeConfig, from_pretrained
from tbjax.parallel.mesh import make_mesh, parse_mesh_spec
from tbjax.parallel.sharding import ShardingError, ShardingRules
from tbjax.sections.training import GRPOSection
from tbjax.trainer.logprobs import chunked_logprobs
from tbjax.trainer.objective import policy_loss_terms
from tbjax.trainer.packing import batch_from_groups
from tbjax.trainer.update import GRPOTrainer
from tests.tbjax.global_arrays_support import put_global
from tests.tbjax.trainer.support import synthetic_groups

RUNTIME = RuntimeConfig(linear_chunk_size=16)


def sharded_logits(model, ids: np.ndarray, mesh) -> np.ndarray:
    global_ids = put_global(ids.astype(np.int32), mesh, ("batch", "seq"), ShardingRules())
    return np.asarray(jax.jit(lambda i: model(i))(global_ids))


def test_sharded_forward_equals_single_device(tiny_dir):
    """3x8: data x fsdp, hidden dims over the 8; 1x2x2: Gated DeltaNet's key and value heads over `tensor`."""
    path = tiny_dir("qwen3_5")
    ids = np.random.default_rng(0).integers(0, 518, size=(24, 40))
    single = from_pretrained(path, runtime=RUNTIME)
    reference = np.asarray(jax.jit(lambda i: single(i))(jnp.asarray(ids, jnp.int32)))
    for spec, tensor in (("3x8", None), ("1x2x2", "tensor")):
        mesh = make_mesh(parse_mesh_spec(spec), jax.devices()[:parse_mesh_spec(spec).num_devices])
        model = from_pretrained(path, mesh=mesh, runtime=RUNTIME)
        linear = model.layers[0].linear_attn
        assert linear.in_proj_v.kernel.sharding.spec == P("fsdp", tensor, None)
        assert linear.out_proj.kernel.sharding.spec == P(tensor, None, "fsdp")
        assert linear.conv_k.sharding.spec == P(None, tensor, None)
        assert linear.A_log.sharding.spec == P(tensor)
        np.testing.assert_allclose(sharded_logits(model, ids, mesh), reference, atol=1e-4, rtol=0)


def test_heads_that_do_not_divide_the_tensor_axis_are_an_error(tiny_dir):
    mesh = make_mesh(parse_mesh_spec("1x1x4"), jax.devices()[:4])  # 2 key heads cannot split 4 ways
    with pytest.raises(ShardingError, match=r"layers.0.linear_attn.\S+ .*'linear_k_heads' = 2 .*size 4. Fix"):
        from_pretrained(tiny_dir("qwen3_5"), mesh=mesh, runtime=RUNTIME)


def test_grpo_gradient_is_finite_and_matches_finite_differences(tiny_dir):
    """The trainer's gradient (packed episodes, segment ids, vocabulary-chunked log-probs, full remat) against
    central differences of the clipped-ratio loss along a random unit direction in a dozen Gated DeltaNet
    and attention parameters."""
    config = GRPOSection()
    batch = batch_from_groups(synthetic_groups(groups=2, size=3), config, row_len=128, micro_rows=4)
    assert batch.shape[0] == 1  # one micro-batch: the loss below is the batch's
    arrays = {k: jnp.asarray(v[0]) for k, v in batch.arrays.items()}
    denominator = jnp.float32(batch.denominator)
    model = from_pretrained(tiny_dir("qwen3_5"), runtime=RuntimeConfig(linear_chunk_size=16, remat="full"))
    trainer = GRPOTrainer(model, config, logprob_chunk=1024)
    params = trainer.init_state(model).params
    grads, _ = trainer.gradients(params, {k: v[None] for k, v in arrays.items()}, denominator)
    assert all(np.isfinite(np.asarray(g)).all() for g in jax.tree.leaves(grads))

    @jax.jit
    def loss(params, old):
        """(The batch loss with the ratio's denominator `old` held fixed, the log-probs at `params`)."""
        model = trainer.model_for(params)
        table = (model.embed_tokens if model.lm_head is None else model.lm_head)[...]
        hidden = model.hidden_states(arrays["tokens"], arrays["positions"], arrays["segments"])
        logprobs, _ = chunked_logprobs(hidden, table, arrays["targets"], 1.0, 1024)
        terms = policy_loss_terms(logprobs, old, *(arrays[k] for k in (
            "behaviour_logprobs", "advantages", "mask", "weights")), config)
        return terms["loss"] / denominator, logprobs

    _, old = loss(params, jnp.zeros(arrays["targets"].shape))
    # the rule's decay and write gates, the value conv, projections and output norm of a Gated DeltaNet layer,
    # and the gated query projection of the attention layer (q/k enter through the L2 norm of small vectors,
    # too curved for float32 differences)
    linear = ("layers", 0, "linear_attn")
    chosen = [(*linear, name) for name in ("A_log", "dt_bias", "conv_v")] + [(*linear, "norm", "weight")]
    chosen += [(*linear, name, "kernel") for name in ("in_proj_v", "in_proj_z", "in_proj_b", "in_proj_a", "out_proj")]
    chosen += [("layers", 3, "self_attn", "q_proj", "kernel")]
    rng = np.random.default_rng(0)
    direction = {path: rng.normal(size=_at(params, path).shape) for path in chosen}
    norm = np.sqrt(sum(np.sum(d * d) for d in direction.values()))
    direction = {path: jnp.asarray(d / norm, jnp.float32) for path, d in direction.items()}  # unit length
    analytic = sum(float(jnp.vdot(_at(grads, path), d)) for path, d in direction.items())
    step = 3e-3

    def moved(sign: float):
        out = jax.tree.map(lambda x: x, params)
        for path, d in direction.items():
            _set(out, path, _at(params, path) + sign * step * d)
        return out

    numeric = (float(loss(moved(1.0), old)[0]) - float(loss(moved(-1.0), old)[0])) / (2 * step)
    assert abs(analytic) > 1e-2
    assert numeric == pytest.approx(analytic, rel=1e-2)


def _at(tree, path):
    for key in path:
        tree = tree[key]
    return tree


def _set(tree, path, value):
    _at(tree, path[:-1])[path[-1]] = value
