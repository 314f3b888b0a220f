"""JaxEngine.update_weights writes a directory into the served parameters in place (tbjax.engine.weight_loading):
the parameters equal, bit for bit, what `from_pretrained` reads, in the same buffers' place; one HF tensor of
extra memory; programs shared by every layer; a refused directory touches nothing; and a load that fails
midway goes back to the engine's directory, or leaves an engine with none refusing requests."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import jax
import numpy as np
import pytest
from flax import nnx
from safetensors.numpy import load_file, save_file

from rollout.engines.protocol import EngineError, SamplingParams
from tbjax.assets.tiny import hf_config
from tbjax.engine import weight_loading
from tbjax.engine.jax_engine import JaxEngine
from tbjax.engine.weight_checks import WeightsError
from tbjax.models import ModelConfig, Qwen, RuntimeConfig, from_pretrained, save_pretrained

WEIGHTS = "model.safetensors"
PROMPT = [5, 17, 3, 250, 9, 41, 8]
GREEDY = SamplingParams(max_new_tokens=6, temperature=0.0)
SAMPLED = SamplingParams(max_new_tokens=6, temperature=1.0, top_k=20, seed=3)
LOWERING = "/jax/core/compile/jaxpr_to_mlir_module_duration"  # once per program jax compiles
BF16 = RuntimeConfig(param_dtype="bfloat16", compute_dtype="bfloat16")
LAST = "model.layers.1.mlp.down_proj.weight"  # the tiny Qwen3's tensor that an unscanned load writes last


def other_weights(source: Path, out: Path, **save) -> Path:
    """`source`'s architecture with every weight changed (w -> 0.5 - w), saved as an HF directory."""
    model = from_pretrained(source)
    nnx.update(model, jax.tree.map(lambda w: 0.5 - w, nnx.state(model)))
    return save_pretrained(model, out, tokenizer_dir=source, **save)


def of_depth(layers: int, out: Path) -> Path:
    """A random tiny Qwen3 of `layers` layers (otherwise tbjax.assets.tiny's), saved as an HF directory."""
    cfg = ModelConfig.from_hf_dict({**hf_config("qwen3", 600), "num_hidden_layers": layers})
    return save_pretrained(Qwen(cfg, nnx.Rngs(layers)), out)


def leaves(engine: JaxEngine) -> list[jax.Array]:
    return jax.tree.leaves(engine.state)


def live_bytes() -> int:
    return sum(a.nbytes for a in jax.live_arrays())


def outputs(engine: JaxEngine) -> tuple:
    """What the engine serves: a greedy and a sampled generation, each from an empty cache, and the prompt's
    scores."""
    async def ask(sampling: SamplingParams) -> tuple:
        assert engine.flush_cache()
        generation = await engine.generate(PROMPT, sampling)
        return generation.output_ids, generation.logprobs

    async def ask_all() -> tuple:
        return await ask(GREEDY), await ask(SAMPLED), (await engine.score(PROMPT))[0].logprobs
    return asyncio.run(ask_all())


def update(engine: JaxEngine, directory: Path, version: str) -> None:
    asyncio.run(engine.update_weights(str(directory), version))


@pytest.fixture
def engines() -> Iterator[Callable[..., JaxEngine]]:
    """engines(model, **settings) -> a JaxEngine, closed after the test."""
    made: list[JaxEngine] = []

    def make(model: Qwen, **settings) -> JaxEngine:
        made.append(JaxEngine(model, slots=1, max_len=64, **settings))
        return made[-1]
    yield make
    for engine in made:
        asyncio.run(engine.close())


@pytest.mark.parametrize("arch,dtype,runtime", [
    ("qwen3", "float32", RuntimeConfig()),
    ("qwen3", "float32", RuntimeConfig(scan_layers=True)),
    ("qwen3-moe", "float32", RuntimeConfig(scan_layers=True)),  # experts stacked under scanned layers
    ("qwen3_5", "float32", RuntimeConfig()),  # Gated DeltaNet: q, k, v from rows of fused tensors
    ("qwen3", "bfloat16", RuntimeConfig()),  # a bfloat16 file into float32 parameters
    ("qwen3", "float32", BF16),  # and a float32 file into bfloat16 ones
], ids=["qwen3", "qwen3-scanned", "qwen3-moe-scanned", "qwen3_5", "bf16-file", "bf16-params"])
def test_an_in_place_load_serves_what_from_pretrained_reads(tiny_dir, tmp_path, engines, arch, dtype, runtime,
                                                           request):
    new = other_weights(tiny_dir(arch, dtype), tmp_path / "new")
    engine = engines(from_pretrained(tiny_dir(arch, dtype), runtime=runtime))
    old = leaves(engine)
    update(engine, new, "1")
    imported = from_pretrained(new, runtime=runtime)
    for loaded, expected in zip(leaves(engine), jax.tree.leaves(nnx.state(imported)), strict=True):
        assert loaded.dtype == expected.dtype and loaded.sharding == expected.sharding
        np.testing.assert_array_equal(np.asarray(loaded), np.asarray(expected), strict=True)
    assert all(array.is_deleted() for array in old)  # donated: the new values took the old buffers' place
    assert engine.weight_version == "1"
    if request.node.callspec.id == "qwen3":  # equal parameters, dtypes and shardings serve equal outputs: once
        assert outputs(engine) == outputs(engines(imported))


def test_a_load_needs_one_tensor_of_memory_beyond_the_model(tiny_dir, tmp_path, engines, monkeypatch):
    """Sampled as each tensor is written: the live arrays exceed those before the load by at most the largest
    HF tensor and a few scalars (a second model, as from_pretrained built, would add all of them)."""
    new = other_weights(tiny_dir("qwen3"), tmp_path / "new")
    engine = engines(from_pretrained(tiny_dir("qwen3"), runtime=RuntimeConfig(scan_layers=True)))
    model_bytes = sum(a.nbytes for a in leaves(engine))
    write, extra = weight_loading._write_entry, []

    def watched(*args, **kwargs):
        extra.append(live_bytes() - before)
        return write(*args, **kwargs)
    monkeypatch.setattr(weight_loading, "_write_entry", watched)
    before = live_bytes()
    update(engine, new, "1")
    largest = max(t.nbytes for t in load_file(new / WEIGHTS).values())
    assert len(extra) == 3 + 2 * 11  # embed_tokens, norm, lm_head, and each layer's 11 tensors
    assert 0 < max(extra) <= largest + 1024 and largest < model_bytes / 2
    assert live_bytes() <= before


def test_a_model_twice_as_deep_compiles_no_more_programs(tmp_path, engines):
    def compiles_of_a_load(layers: int) -> int:
        engine = engines(from_pretrained(of_depth(layers, tmp_path / f"serve{layers}")))
        new = of_depth(layers, tmp_path / f"new{layers}")
        jax.clear_caches()
        events: list[str] = []

        def count(event: str, *_, **__) -> None:
            if event == LOWERING:
                events.append(event)
        jax.monitoring.register_event_duration_secs_listener(count)
        try:
            update(engine, new, "1")
        finally:
            jax.monitoring.unregister_event_duration_listener(count)
        return len(events)

    shallow = compiles_of_a_load(2)
    assert 0 < shallow == compiles_of_a_load(4)


def truncate(directory: Path) -> None:
    shard = sorted(directory.glob("*.safetensors"))[-1]
    shard.write_bytes(shard.read_bytes()[:-100])


def edit_tensors(change: Callable[[dict[str, np.ndarray]], object]) -> Callable[[Path], None]:
    def write(directory: Path) -> None:
        tensors = load_file(directory / WEIGHTS)
        change(tensors)
        save_file(tensors, directory / WEIGHTS, metadata={"format": "pt"})
    return write


def more_layers(directory: Path) -> None:
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 3}))


def wider_norm(tensors: dict[str, np.ndarray]) -> None:
    tensors["model.norm.weight"] = np.ones(65, np.float32)


REFUSED = {
    "truncated": (truncate, {}, "cannot be read as an HF checkpoint \\(SafetensorError: .*not fully covered"),
    "truncated_shard": (truncate, {"max_shard_bytes": 200_000},  # safetensors reads this shard's header only later
                        "is \\d+ bytes but its header accounts for \\d+: the file is incomplete"),
    "missing_tensor": (edit_tensors(lambda t: t.pop("model.layers.1.mlp.up_proj.weight")), {},
                       "'model.layers.1.mlp.up_proj.weight' is not in the checkpoint"),
    "wrong_shape": (edit_tensors(wider_norm), {}, "tensor model.norm.weight has shape \\[65\\]"),
    "other_sizes": (more_layers, {}, "different architecture than the served model \\(num_hidden_layers differ"),
}


@pytest.mark.parametrize("damage", REFUSED)
def test_a_refused_directory_changes_no_buffer(tiny_dir, tmp_path, engines, damage):
    write, save, problem = REFUSED[damage]
    directory = other_weights(tiny_dir("qwen3"), tmp_path / damage, **save)
    write(directory)
    engine = engines(from_pretrained(tiny_dir("qwen3")))
    served, values = leaves(engine), [np.asarray(a) for a in leaves(engine)]
    with pytest.raises(WeightsError, match=problem):
        update(engine, directory, damage)
    assert all(a is b and not a.is_deleted() for a, b in zip(leaves(engine), served, strict=True))
    assert all(np.array_equal(np.asarray(a), v) for a, v in zip(served, values, strict=True))
    assert engine.weight_version == "0"


def with_nan_last(source: Path, out: Path) -> Path:
    """`source`'s other weights with NaN in the tensor loaded last (so every other is written before it)."""
    def poison(tensors: dict[str, np.ndarray]) -> None:
        tensors[LAST] = tensors[LAST].copy()
        tensors[LAST][3, 5] = np.nan
    directory = other_weights(source, out)
    edit_tensors(poison)(directory)
    return directory


def test_nan_midway_takes_the_engine_back_to_its_directory(tiny_dir, tmp_path, engines):
    served = tiny_dir("qwen3")
    engine = engines(from_pretrained(served), weights_dir=served)
    before, old = outputs(engine), leaves(engine)
    with pytest.raises(WeightsError, match=f"parameters hold NaN or Inf \\(tensor {LAST}.*The engine went back to "
                                           "the weights of"):
        update(engine, with_nan_last(served, tmp_path / "nan"), "nan")
    assert all(a.is_deleted() for a in old)  # written over, then written back
    for loaded, expected in zip(leaves(engine), jax.tree.leaves(nnx.state(from_pretrained(served))), strict=True):
        np.testing.assert_array_equal(np.asarray(loaded), np.asarray(expected))
    assert engine.weight_version == "0" and outputs(engine) == before


def test_nan_midway_without_a_directory_refuses_requests_until_a_good_load(tiny_dir, tmp_path, engines):
    source = tiny_dir("qwen3")
    engine = engines(from_pretrained(source))
    with pytest.raises(WeightsError, match="partly version nan's: it refuses requests until good weights load"):
        update(engine, with_nan_last(source, tmp_path / "nan"), "nan")
    with pytest.raises(EngineError, match="weight version nan failed to load midway .* load good weights"):
        outputs(engine)
    with pytest.raises(EngineError, match="weight version nan failed to load midway"):
        asyncio.run(engine.score(PROMPT))
    good = other_weights(source, tmp_path / "good")
    update(engine, good, "good")
    assert outputs(engine) == outputs(engines(from_pretrained(good)))


def test_an_update_that_fails_midway_twice_keeps_going_back(tiny_dir, tmp_path, engines):
    """The directory to go back to is the last one loaded, not the first."""
    source = tiny_dir("qwen3")
    engine = engines(from_pretrained(source), weights_dir=source)
    good = other_weights(source, tmp_path / "good")
    update(engine, good, "good")
    expected = outputs(engine)
    bad = with_nan_last(source, tmp_path / "nan")
    with pytest.raises(WeightsError, match=f"went back to the weights of {good}"):
        update(engine, bad, "nan")
    shutil.rmtree(bad)
    assert engine.weight_version == "good" and outputs(engine) == expected
