"""The jitted GRPO update: micro-batch invariance, sharded equals single device, the zero-signal skip."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from tbjax.models import from_pretrained
from tbjax.parallel.mesh import make_mesh, parse_mesh_spec
from tbjax.sections.model import RuntimeConfig
from tbjax.sections.training import GRPOSection, OptimSection
from tbjax.trainer.packing import batch_from_groups
from tbjax.trainer.update import GRPOTrainer
from tests.tbjax.trainer.support import flat, synthetic_groups


@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean_token_mean"])
def test_gradient_is_invariant_to_the_micro_batch_split(tiny_dir, aggregation):
    model = from_pretrained(tiny_dir("qwen3"))
    config = GRPOSection(aggregation=aggregation)
    trainer = GRPOTrainer(model, config, logprob_chunk=512)
    state = trainer.init_state(model)
    groups = synthetic_groups()
    results = []
    for row_len, micro in [(512, 1), (128, 2), (64, 1)]:  # one row; micro-batches of 2 rows; of 1 row
        batch = batch_from_groups(groups, config, row_len, micro)
        arrays = {k: jnp.asarray(v) for k, v in batch.arrays.items()}
        grads, sums = trainer.gradients(state.params, arrays, jnp.float32(batch.denominator))
        results.append((flat(grads), float(sums["loss"]) / batch.denominator))
    batch = batch_from_groups(groups, config, 64, 1)
    assert batch.shape[0] == 9  # micro-batches: one call of 9, calls of 4 + 4 + 1, nine calls of 1
    arrays = {k: jnp.asarray(v) for k, v in batch.arrays.items()}
    for per_call in (4, 1):
        chunked = GRPOTrainer(model, config, logprob_chunk=512, micro_batches_per_call=per_call)
        grads, sums = chunked.gradients(state.params, arrays, jnp.float32(batch.denominator))
        results.append((flat(grads), float(sums["loss"]) / batch.denominator))
    for grads, loss in results[1:]:
        np.testing.assert_allclose(grads, results[0][0], atol=1e-6)
        assert loss == pytest.approx(results[0][1], abs=1e-6)
    assert np.abs(results[0][0]).max() > 1e-4  # a real gradient, not zeros


def test_sharded_update_on_3x8_equals_single_device(tiny_dir):
    """Gradients agree to 1e-6 and the updated state to 1e-5. The reference lr (1e-6) keeps Adam's
    normalisation, which turns any tiny gradient of either sign into a step of size lr, from amplifying
    float reassociation noise beyond what the comparison measures."""
    path = tiny_dir("qwen3")
    optim = OptimSection()
    groups = synthetic_groups(seed=1)
    single_model = from_pretrained(path)
    single = GRPOTrainer(single_model, optim=optim, logprob_chunk=512)
    mesh = make_mesh(parse_mesh_spec("3x8"))
    sharded_model = from_pretrained(path, mesh=mesh)
    sharded = GRPOTrainer(sharded_model, optim=optim, logprob_chunk=512)
    assert sharded.rows_multiple == 24
    initial = flat(nnx.to_pure_dict(nnx.state(single_model, nnx.Param)))  # before the update donates it
    outcomes, gradients = [], []
    for trainer, model in ((single, single_model), (sharded, sharded_model)):
        batch = batch_from_groups(groups, GRPOSection(), 128, 1, trainer.rows_multiple)
        state = trainer.init_state(model)
        arrays = {k: jnp.asarray(v) for k, v in batch.arrays.items()}
        gradients.append(flat(trainer.gradients(state.params, arrays, jnp.float32(batch.denominator))[0]))
        outcomes.append(trainer.update(state, trainer.prepare(state.params, batch)))
    np.testing.assert_allclose(gradients[1], gradients[0], atol=1e-6)
    (a, ma), (b, mb) = outcomes
    assert np.abs(flat(a.params) - initial).max() > 5e-7  # the update really moved the parameters
    kernel = b.params["layers"][0]["mlp"]["gate_proj"]["kernel"]
    assert kernel.sharding.spec[0] == "fsdp" and len(kernel.addressable_shards) == 24
    np.testing.assert_allclose(flat(b.params), flat(a.params), atol=1e-5)
    np.testing.assert_allclose(flat(b.opt_state), flat(a.opt_state), atol=1e-5)
    assert mb["loss"] == pytest.approx(ma["loss"], abs=1e-5) and int(b.step) == int(a.step) == 1


def test_no_signal_means_no_batch():
    groups = synthetic_groups()
    for group in groups:
        for t in group:
            t.reward = 1.0
    assert batch_from_groups(groups, GRPOSection(), 128, 1) is None


@pytest.mark.parametrize("param_dtype", ["float32", "bfloat16"])
def test_offloaded_moments_wait_in_host_memory_while_gradients_accumulate(tiny_dir, param_dtype):
    """`offload_optimizer`: the moments' device buffers (and a bfloat16 policy's float32 masters) are gone
    while the micro-batches' gradients accumulate, the step lands them back on the device, and the result is
    bitwise the update without offload."""
    groups, outcomes, seen = synthetic_groups(seed=2), [], []
    for offload in (False, True):
        model = from_pretrained(tiny_dir("qwen3"), runtime=RuntimeConfig(param_dtype=param_dtype))
        trainer = GRPOTrainer(model, optim=OptimSection(learning_rate=1e-3), logprob_chunk=512,
                              offload_optimizer=offload)
        state = trainer.init_state(model)
        assert (state.master is not None) == (param_dtype == "bfloat16")
        moments = jax.tree.leaves((state.opt_state, state.master))
        accumulate = trainer.programs.accumulate

        def spy(*args, accumulate=accumulate, moments=moments, offload=offload):
            seen.append((offload, all(m.is_deleted() for m in moments)))
            return accumulate(*args)

        trainer.programs = trainer.programs._replace(accumulate=spy)
        batch = batch_from_groups(groups, GRPOSection(), 64, 1)
        assert batch.shape[0] > 1  # several micro-batches
        state, metrics = trainer.update(state, trainer.prepare(state.params, batch))
        assert {x.sharding.memory_kind for x in jax.tree.leaves(state)} == {"device"}
        outcomes.append((flat(state.params), flat((state.opt_state, state.master)), metrics["loss"]))
    assert seen == [(False, False), (True, True)]
    np.testing.assert_array_equal(outcomes[1][0], outcomes[0][0])
    np.testing.assert_array_equal(outcomes[1][1], outcomes[0][1])
    assert outcomes[1][2] == outcomes[0][2]
