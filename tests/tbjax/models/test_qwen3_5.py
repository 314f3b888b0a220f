"""The Qwen3.5/3.6 hybrid (Gated DeltaNet + gated attention) against transformers beyond what the shared
parity and round-trip tests cover: sequences longer than two chunks, step-by-step decoding from the same
parameters, packed documents, the nested multimodal checkpoint and errors for configs we cannot run."""

import json
import logging
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers
from flax import nnx
from safetensors import safe_open

from tbjax.models import RuntimeConfig, UnsupportedModelError, from_pretrained, save_pretrained
from tbjax.models.decoding import KVCache, forward_cached
from tests.tbjax.models.support import forward, torch_logits

CHUNK = 16  # small chunks: many chunk boundaries in a short sequence
LENGTH = 200


@pytest.mark.parametrize("arch,chunk,shape", [("qwen3_5", 64, (2, 150)), ("qwen3_5-vl", CHUNK, (1, LENGTH))])
def test_logits_match_transformers_over_several_chunks(tiny_dir, arch, chunk, shape):
    """150 tokens: 3 chunks of the checkpoint's own 64; 200 tokens: 13 small ones (the decoding test's forward)."""
    path = tiny_dir(arch)
    ids = np.random.default_rng(1).integers(0, 518, size=shape)
    model = from_pretrained(path, runtime=RuntimeConfig(linear_chunk_size=chunk))
    got = np.asarray(forward(model, jnp.asarray(ids, jnp.int32)))
    np.testing.assert_allclose(got, torch_logits(path, ids), atol=2e-4, rtol=0)


def test_decoding_token_by_token_equals_the_chunked_forward(tiny_dir):
    """200 tokens: a 37-token prefill in a 64-token bucket, then one token per step beside an idle slot
    whose state must not move, against one chunked forward of the whole sequence."""
    model = from_pretrained(tiny_dir("qwen3_5-vl"), runtime=RuntimeConfig(linear_chunk_size=CHUNK))
    length, prefill, max_len = LENGTH, 37, 256
    ids = np.random.default_rng(1).integers(0, 518, size=(1, length)).astype(np.int32)
    full = np.asarray(forward(model, jnp.asarray(ids)))[0]
    step = jax.jit(lambda cache, *args: forward_cached(model, cache, *args[:4], max_len, args[4]))
    cache = KVCache.zeros(model.config, 2, max_len)
    bucket = np.zeros((1, 64), np.int32)
    bucket[0, :prefill] = ids[0, :prefill]
    logits, cache = step(cache, bucket, np.asarray([1]), np.asarray([0]), np.asarray([prefill - 1]),
                         np.asarray([prefill]))
    worst = np.abs(np.asarray(logits[0]) - full[prefill - 1]).max()
    idle_state = jax.tree.map(lambda a: np.asarray(a[:, 0]), cache.linear)
    for t in range(prefill, length):
        tokens = np.asarray([[7], [ids[0, t]]], np.int32)
        logits, cache = step(cache, tokens, np.asarray([0, 1]), np.asarray([max_len - 1, t]), np.asarray([0, 0]),
                             np.asarray([0, 1]))
        worst = max(worst, np.abs(np.asarray(logits[1]) - full[t]).max())
    assert worst <= 1e-4
    jax.tree.map(lambda before, a: np.testing.assert_array_equal(before, a[:, 0]), idle_state, cache.linear)


def test_packed_batch_equals_separate_sequences(tiny_dir):
    """Three documents packed in row 0 behind left padding give each document's logits as rows 1-3, the
    documents alone (right-padded, which causality keeps from the real tokens), in the same forward."""
    model = from_pretrained(tiny_dir("qwen3_5"), runtime=RuntimeConfig(linear_chunk_size=CHUNK))
    rng = np.random.default_rng(2)
    docs = [rng.integers(3, 518, size=n) for n in (21, 3, 40)]
    pad = 8
    width = pad + sum(len(d) for d in docs)
    ids, positions, segments = (np.zeros((1 + len(docs), width), np.int32) for _ in range(3))
    ids[0] = np.concatenate([np.zeros(pad), *docs])
    segments[0] = np.concatenate([np.zeros(pad)] + [np.full(len(d), i + 1) for i, d in enumerate(docs)])
    positions[0] = np.concatenate([np.arange(pad)] + [np.arange(len(d)) for d in docs])
    for row, doc in enumerate(docs, start=1):
        ids[row, :len(doc)], segments[row], positions[row] = doc, 1, np.arange(width)
    got = np.asarray(forward(model, *(jnp.asarray(a) for a in (ids, positions, segments))))
    start = pad
    for row, doc in enumerate(docs, start=1):
        np.testing.assert_allclose(got[0, start:start + len(doc)], got[row, :len(doc)], atol=1e-4, rtol=0)
        start += len(doc)


def test_bfloat16_compute_is_as_close_to_float32_as_transformers_is(tiny_dir):
    """bfloat16 parameters and compute (float32 recurrent state): the logits' error against float32 is no
    larger than transformers' own bfloat16 error on the same model."""
    path = tiny_dir("qwen3_5")
    ids = np.random.default_rng(3).integers(0, 518, size=(1, 96))
    reference = torch_logits(path, ids)
    bf16 = np.asarray(forward(from_pretrained(path, dtype="bfloat16"), jnp.asarray(ids, jnp.int32)))
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16).eval()
    with torch.no_grad():
        torch_bf16 = model(torch.tensor(ids)).logits.float().numpy()
    ours, theirs = np.abs(bf16 - reference).mean(), np.abs(torch_bf16 - reference).mean()
    assert np.isfinite(bf16).all() and 0 < ours < 1.25 * theirs


def test_multimodal_checkpoint_loads_its_text_model_and_round_trips(tiny_dir, tmp_path, caplog):
    """The vision encoder is named in the log and skipped (and the parameter count from config.json is the
    model's); save -> load -> save reproduces every tensor (the vision encoder copied through) byte for byte."""
    source = tiny_dir("qwen3_5-vl")
    with caplog.at_level(logging.INFO, logger="tbjax.models.hf.importer"):
        model = from_pretrained(source)
    assert "ignoring the vision encoder: 21 tensors under model.visual." in caplog.text
    assert model.config.tie_word_embeddings and model.config.layer_types[1] == "full_attention"
    assert model.config.num_params() == sum(p.size for p in jax.tree.leaves(nnx.state(model, nnx.Param)))
    first = save_pretrained(model, tmp_path / "first")
    second = save_pretrained(from_pretrained(first), tmp_path / "second")
    assert json.loads((second / "config.json").read_text())["text_config"]["model_type"] == "qwen3_5_text"
    with (safe_open(source / "model.safetensors", "np") as a, safe_open(first / "model.safetensors", "np") as b,
          safe_open(second / "model.safetensors", "np") as c):
        assert set(a.keys()) == set(b.keys()) == set(c.keys())
        for name in a.keys():
            np.testing.assert_array_equal(a.get_tensor(name), b.get_tensor(name))
            np.testing.assert_array_equal(b.get_tensor(name), c.get_tensor(name))


@pytest.mark.parametrize("change,message", [
    ({"layer_types": ["linear_attention", "sliding_attention", "full_attention", "linear_attention"]},
     "layer_types must list 4 entries .* with sliding_attention"),
    ({"layer_types": ["linear_attention", "full_attention"]}, "layer_types must list 4 entries .*got 2"),
    ({"attn_output_gate": False}, "attn_output_gate=false"),
    ({"linear_num_value_heads": 3}, "linear_num_value_heads=3 is not a multiple of linear_num_key_heads=2"),
    ({"num_experts": 8}, "Qwen3.5 MoE"),
])
def test_configs_we_cannot_run_are_refused_by_field(tiny_dir, tmp_path, change, message):
    path = tmp_path / "bad"
    shutil.copytree(tiny_dir("qwen3_5"), path)
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, **change}))
    with pytest.raises(UnsupportedModelError, match=message):
        from_pretrained(path)


def test_scan_layers_is_refused_for_hybrids(tiny_dir):
    with pytest.raises(UnsupportedModelError, match="scan_layers is not implemented .*linear_attention"):
        from_pretrained(tiny_dir("qwen3_5"), runtime=RuntimeConfig(scan_layers=True))
