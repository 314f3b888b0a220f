"""LoRA GRPO through the trainer: an update changes the adapters alone (the bfloat16 base bitwise the same, no
master copy, moments the adapters' size), the KL reference is the base with its adapters off, and the gradient
equals peft's through transformers' Qwen3 with torch autograd."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import peft
import torch
import transformers
from flax import nnx
from safetensors.numpy import load_file

from tbjax.models import from_pretrained
from tbjax.models.hf.peft_adapter import load_adapter, save_adapter
from tbjax.models.lora import add_adapters
from tbjax.sections.lora import ATTENTION_MLP, LoraSpec
from tbjax.sections.training import GRPOSection, OptimSection
from tbjax.trainer.objective import REF_LOGPROBS
from tbjax.trainer.packing import batch_from_groups
from tbjax.trainer.update import GRPOTrainer
from tests.tbjax.trainer.support import flat, graded_groups
from tests.tbjax.trainer.torch_reference_support import TIS_CAP, group_advantages, torch_loss, with_behaviour_near

SPEC = LoraSpec(rank=4, alpha=8.0)


def adapter_elements(model) -> int:
    return sum(int(np.prod(v.shape)) for _, v in nnx.iter_graph(model) if isinstance(v, nnx.LoRAParam))


def test_an_update_trains_the_adapters_alone(tiny_dir):
    model = from_pretrained(tiny_dir("qwen3"), dtype="bfloat16")
    base = flat(nnx.to_pure_dict(nnx.state(model, nnx.Param)))  # before any adapter: the bfloat16 weights
    add_adapters(model, SPEC, seed=1)
    trainer = GRPOTrainer(model, GRPOSection(kl_coef=0.1), OptimSection(learning_rate=1e-2), logprob_chunk=512,
                          mini_batches=2)
    state = trainer.init_state(model)
    trainer.keep_reference(state.params)
    assert trainer.lora and state.master is None  # float32 adapters: nothing narrower to keep a master of
    assert {np.dtype(x.dtype) for x in jax.tree.leaves(state.params)} == {np.dtype(np.float32)}
    assert flat(state.params).size == adapter_elements(model)
    moments = sum(x.size for x in jax.tree.leaves(state.opt_state) if x.ndim)
    assert moments == 2 * adapter_elements(model)  # AdamW's mu and nu, of the adapters only
    start = flat(state.params).copy()
    batch = batch_from_groups(graded_groups(seed=2), trainer.grpo, 128, 1)
    state, metrics = trainer.update(state, trainer.prepare(state.params, batch))
    assert metrics["grad_norm"] > 0 and metrics["optimizer_steps"] == 2
    assert np.abs(flat(state.params) - start).max() > 1e-3  # the adapters moved
    frozen = flat(trainer.frozen)
    assert frozen.dtype == base.dtype == np.dtype(jnp.bfloat16)
    np.testing.assert_array_equal(frozen.view(np.uint16), base.view(np.uint16))  # the base, bit for bit


def test_the_kl_reference_is_the_base_with_its_adapters_off(tiny_dir):
    path = tiny_dir("qwen3")
    plain = from_pretrained(path)
    plain_trainer = GRPOTrainer(plain, GRPOSection(), logprob_chunk=512)
    plain_params = plain_trainer.init_state(plain).params
    model = from_pretrained(path)
    add_adapters(model, SPEC, seed=1)
    for variable in [v for _, v in nnx.iter_graph(model) if isinstance(v, nnx.LoRAParam)]:  # B != 0: it acts
        variable[...] = 0.1 * np.random.default_rng(len(variable.shape)).standard_normal(variable.shape)
    trainer = GRPOTrainer(model, GRPOSection(kl_coef=0.1), logprob_chunk=512)
    state = trainer.init_state(model)
    trainer.keep_reference(state.params)
    assert flat(trainer.reference).size == adapter_elements(model)  # no second copy of the weights
    batch = batch_from_groups(graded_groups(seed=2), trainer.grpo, 128, 1)
    reference = np.asarray(trainer.prepare(state.params, batch).mini_batches[0].arrays[REF_LOGPROBS])
    base = np.asarray(plain_trainer.logprobs(plain_params, batch))
    policy = np.asarray(trainer.logprobs(state.params, batch))
    np.testing.assert_allclose(reference, base, atol=1e-6)
    assert np.abs(policy - base).max() > 1e-2  # the adapted policy is another one


def test_lora_gradient_matches_peft_on_transformers_qwen3(tiny_dir, tmp_path):
    """The GRPO loss's gradient with respect to every adapter equals torch autograd through peft's LoRA on
    transformers' Qwen3 (A and B both random, so both have gradients), to 1e-4 of each tensor's largest entry."""
    path = tiny_dir("qwen3")
    torch.manual_seed(0)
    base = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    config = peft.LoraConfig(r=SPEC.rank, lora_alpha=SPEC.alpha, target_modules=list(ATTENTION_MLP),
                             init_lora_weights=False, lora_dropout=0.0)
    reference = peft.get_peft_model(base, config)
    reference.save_pretrained(tmp_path / "start")
    grpo = GRPOSection(tis_cap=TIS_CAP)
    groups = with_behaviour_near(reference, graded_groups(seed=3, groups=2), seed=3)
    torch_loss(reference, [t for g in groups for t in g], group_advantages(groups), grpo).backward()
    expected = {name.replace(".default", ""): p.grad.numpy() for name, p in reference.named_parameters()
                if p.requires_grad}

    model = from_pretrained(path)
    load_adapter(model, tmp_path / "start")
    trainer = GRPOTrainer(model, grpo, logprob_chunk=512)
    params = trainer.init_state(model).params
    batch = batch_from_groups(groups, grpo, 512, 1)
    grads, _ = trainer.gradients(params, {k: jnp.asarray(v) for k, v in batch.arrays.items()},
                                 jnp.float32(batch.denominator))
    save_adapter(trainer.model_for(grads), model.lora_spec, tmp_path / "grads")  # the gradients, by PEFT name
    got = load_file(str(tmp_path / "grads" / "adapter_model.safetensors"))
    assert set(got) == set(expected) and len(got) == 2 * 7 * model.config.num_layers
    for name, want in expected.items():
        error = np.abs(got[name] - want).max() / np.abs(want).max()
        assert error < 1e-4, (name, error)
