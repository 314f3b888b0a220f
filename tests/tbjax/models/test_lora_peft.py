"""LoRA against peft (torch CPU, float32) on transformers' Qwen3, Qwen2 and the Qwen3.5 hybrid (whose Gated
DeltaNet in_proj_qkv is one fused module in HF and three projections here): an adapter peft saved, loaded by
tbjax, gives peft's logits; one tbjax saved, loaded by peft, gives tbjax's; merging equals peft's
merge_and_unload; a fresh adapter leaves the base's logits exactly; and bad adapters are refused by name."""

from __future__ import annotations

import json
import re

import jax.numpy as jnp
import numpy as np
import peft
import pytest
import torch
import transformers
from flax import nnx
from safetensors.numpy import load_file, save_file

from tbjax.models import from_pretrained
from tbjax.models.hf.exporter import hf_tensors
from tbjax.models.hf.peft_adapter import load_adapter, save_adapter
from tbjax.models.lora import add_adapters, merge_adapters
from tbjax.sections.lora import ATTENTION_MLP, GATED_DELTANET, LoraError, LoraSpec

TOL = 1e-4
# The hybrid's delta-rule recurrence carries float32 rounding further than attention does (its transformers
# parity test allows 2e-4); under peft's adapter, both factors random, its logits reach several units, and how
# far apart they round depends on the CPU's vector instructions (past 1e-4 on an AVX-512 FP16 Xeon).
HYBRID_TOL = 3e-4


def is_hybrid(base_dir) -> bool:
    return json.loads((base_dir / "config.json").read_text())["model_type"].startswith("qwen3_5")


def tolerance(base_dir) -> float:
    return HYBRID_TOL if is_hybrid(base_dir) else TOL


def targets_for(base_dir) -> tuple[str, ...]:
    """What peft adapts: attention and the MLP, and in a hybrid its Gated DeltaNet projections too."""
    return ATTENTION_MLP + GATED_DELTANET if is_hybrid(base_dir) else ATTENTION_MLP


@nnx.jit
def forward(model, ids):
    return model(ids)


def ids() -> np.ndarray:
    return np.random.default_rng(0).integers(0, 518, size=(2, 24))


def torch_logits(model, tokens: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor(tokens)).logits.numpy()


def peft_model(base_dir, seed: int = 0) -> peft.PeftModel:
    """peft's LoRA on transformers' model, A and B both random (init_lora_weights=False)."""
    torch.manual_seed(seed)
    base = transformers.AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32).eval()
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=list(targets_for(base_dir)), init_lora_weights=False,
                             lora_dropout=0.0)
    return peft.get_peft_model(base, config).eval()


@pytest.fixture(scope="module", params=["qwen3", "qwen2", "qwen3_5"])
def peft_saved(request, tiny_dir, tmp_path_factory):
    base_dir = tiny_dir(request.param)
    model = peft_model(base_dir)
    out = tmp_path_factory.mktemp(f"peft-{request.param}")
    model.save_pretrained(out)
    return base_dir, out, torch_logits(model, ids()), model


def test_a_peft_adapter_loaded_by_tbjax_gives_peft_logits(peft_saved):
    base_dir, adapter_dir, expected, _ = peft_saved
    model = from_pretrained(base_dir)
    base = np.asarray(forward(model, jnp.asarray(ids(), jnp.int32)))
    spec = load_adapter(model, adapter_dir)
    assert (spec.rank, spec.alpha, spec.modules) == (4, 8.0, frozenset(targets_for(base_dir)))
    got = np.asarray(forward(model, jnp.asarray(ids(), jnp.int32)))
    assert np.abs(expected - base).max() > 100 * TOL  # the adapter changes the logits ...
    np.testing.assert_allclose(got, expected, atol=tolerance(base_dir), rtol=0)  # ... as peft computes them


def test_a_tbjax_adapter_loaded_by_peft_gives_tbjax_logits(peft_saved, tmp_path):
    base_dir = peft_saved[0]
    model = from_pretrained(base_dir)
    spec = LoraSpec(rank=8, alpha=16.0, targets=targets_for(base_dir))
    add_adapters(model, spec, seed=3)
    for variable in [v for _, v in nnx.iter_graph(model) if isinstance(v, nnx.LoRAParam)]:
        if np.all(np.asarray(variable[...]) == 0):  # B: make it nonzero so the adapter acts
            variable[...] = 0.05 * np.random.default_rng(len(variable.shape)).standard_normal(variable.shape)
    ours = np.asarray(forward(model, jnp.asarray(ids(), jnp.int32)))
    save_adapter(model, spec, tmp_path / "adapter", base_model=str(base_dir))
    base = transformers.AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32).eval()
    loaded = peft.PeftModel.from_pretrained(base, tmp_path / "adapter").eval()
    np.testing.assert_allclose(torch_logits(loaded, ids()), ours, atol=tolerance(base_dir), rtol=0)


def test_merging_equals_peft_merge_and_unload(peft_saved):
    base_dir, adapter_dir, _, reference = peft_saved
    merged_reference = {name: p.detach().numpy() for name, p in
                        peft_model(base_dir).merge_and_unload().named_parameters()}
    model = from_pretrained(base_dir)
    load_adapter(model, adapter_dir)
    adapted = np.asarray(forward(model, jnp.asarray(ids(), jnp.int32)))
    merge_adapters(model)
    assert not [v for _, v in nnx.iter_graph(model) if isinstance(v, nnx.LoRAParam)]
    # merged weights round once where the adapter's sum rounded twice: the hybrid's delta rule carries that
    # float32 rounding further (its transformers parity test allows 2e-4 too)
    np.testing.assert_allclose(np.asarray(forward(model, jnp.asarray(ids(), jnp.int32))), adapted, atol=2e-4)
    merged = dict(hf_tensors(model, np.float32))  # every weight as HF holds it, fused in_proj_qkv included
    assert set(merged) == set(merged_reference)
    for name, value in merged.items():
        np.testing.assert_allclose(value, merged_reference[name], atol=1e-5, rtol=0, err_msg=name)


def test_a_fresh_adapter_is_the_base_policy_exactly(tiny_dir):
    model = from_pretrained(tiny_dir("qwen3"))
    before = np.asarray(forward(model, jnp.asarray(ids(), jnp.int32)))
    paths = add_adapters(model, LoraSpec(rank=4, alpha=8.0))
    assert len(paths) == 7 * model.config.num_layers
    np.testing.assert_array_equal(np.asarray(forward(model, jnp.asarray(ids(), jnp.int32))), before)


def test_moe_experts_are_left_alone_and_their_attention_adapted(tiny_dir):
    model = from_pretrained(tiny_dir("qwen3-moe"))
    paths = add_adapters(model, LoraSpec(rank=2, alpha=2.0))
    assert {path[-1] for path in paths} <= {"q_proj", "k_proj", "v_proj", "o_proj"} and paths


def test_settings_that_cannot_act_are_refused(tiny_dir, peft_saved, tmp_path):
    with pytest.raises(LoraError, match="wrap no projection.*q_proj"):
        add_adapters(from_pretrained(tiny_dir("qwen3")), LoraSpec(rank=2, alpha=2.0, targets=("in_proj_z",)))
    with pytest.raises(LoraError, match="adapt no Gated DeltaNet projection.*all_linear"):
        add_adapters(from_pretrained(tiny_dir("qwen3_5")), LoraSpec(rank=2, alpha=2.0))
    with pytest.raises(LoraError, match="neither profiles"):
        LoraSpec(rank=2, alpha=2.0, targets=("qproj",))
    with pytest.raises(LoraError, match="at least 1"):
        LoraSpec(rank=0, alpha=2.0)
    adapter_dir = peft_saved[1]
    broken = tmp_path / "broken"
    broken.mkdir()
    config = json.loads((adapter_dir / "adapter_config.json").read_text())
    (broken / "adapter_config.json").write_text(json.dumps({**config, "use_dora": True}))
    (broken / "adapter_model.safetensors").write_bytes((adapter_dir / "adapter_model.safetensors").read_bytes())
    with pytest.raises(LoraError, match="use_dora=True is not supported"):
        load_adapter(from_pretrained(peft_saved[0]), broken)
    (broken / "adapter_config.json").write_text(json.dumps({**config, "r": 2}))
    with pytest.raises(LoraError, match=r"lora_A \(4, \d+\) and lora_B .* where this model needs .*r=2"):
        load_adapter(from_pretrained(peft_saved[0]), broken)
    (broken / "adapter_config.json").write_text(json.dumps(config))
    tensors = load_file(str(adapter_dir / "adapter_model.safetensors"))
    missing = sorted(tensors)[0]
    save_file({k: v for k, v in tensors.items() if k != missing}, str(broken / "adapter_model.safetensors"))
    module, part = missing.removeprefix("base_model.model.").rsplit(".", 2)[:2]
    with pytest.raises(LoraError, match=f"{re.escape(module)} has {part} missing"):
        load_adapter(from_pretrained(peft_saved[0]), broken)
    (broken / "adapter_model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{broken}")
    with pytest.raises(LoraError, match="unreadable adapter"):
        load_adapter(from_pretrained(peft_saved[0]), broken)
    with pytest.raises(LoraError, match="holds no PEFT adapter"):
        load_adapter(from_pretrained(peft_saved[0]), tmp_path / "nowhere")
