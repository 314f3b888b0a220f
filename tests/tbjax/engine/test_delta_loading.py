"""Deltas loaded in place by the embedded engine (tbjax.engine.delta_loading): after each delta the served
parameters equal, bit for bit, a whole load of the same version, and a delta the engine cannot apply changes
nothing."""

import asyncio
import json

import jax
import numpy as np
import pytest
from flax import nnx

from tbjax.engine.jax_engine import JaxEngine
from tbjax.engine.weight_checks import WeightsError
from tbjax.models import from_pretrained, save_pretrained
from tbjax.models.hf.delta import ELEMENTS_FILE, DeltaPublisher
from tbjax.models.hf.versions import DELTA_FILE
from tests.tbjax.publish_support import nudge, tiny_model


def served(engine: JaxEngine) -> list[np.ndarray]:
    """The engine's parameters, as host copies."""
    model = nnx.merge(engine.graphdef, engine.state)
    return [np.asarray(x) for x in jax.tree.leaves(nnx.state(model, nnx.Param))]


def loaded(directory) -> list[np.ndarray]:
    """A whole load's parameters, as host copies."""
    return [np.asarray(x) for x in jax.tree.leaves(nnx.state(from_pretrained(directory), nnx.Param))]


def equal_bits(left: list[np.ndarray], right: list[np.ndarray]) -> bool:
    return len(left) == len(right) and all(a.tobytes() == b.tobytes() for a, b in zip(left, right, strict=True))


def assert_refused_unchanged(first, delta, message: str) -> None:
    """An engine serving `first` refuses `delta` with `message`, its parameters unchanged."""
    engine = JaxEngine(from_pretrained(first), slots=1, max_len=32, weights_dir=first)
    try:
        before = served(engine)
        with pytest.raises(WeightsError, match=message):
            asyncio.run(engine.update_weights(str(delta), "next"))
        assert equal_bits(served(engine), before)
    finally:
        asyncio.run(engine.close())


@pytest.mark.parametrize("granularity", ["tensors", "elements"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_each_delta_leaves_the_weights_a_whole_load_gives(tmp_path, granularity, dtype) -> None:
    model, publisher = tiny_model(), DeltaPublisher(granularity, full_every=10)
    first = publisher.publish(model, tmp_path / "w", 1, dtype=dtype)
    engine = JaxEngine(from_pretrained(first), slots=1, max_len=32, weights_dir=first)
    try:
        for version in (2, 3):
            nudge(model, 0.25 * version)
            delta = publisher.publish(model, tmp_path / "w", version, dtype=dtype)
            assert (delta / DELTA_FILE).is_file()
            asyncio.run(engine.update_weights(str(delta), str(version)))
            whole = save_pretrained(model, tmp_path / f"whole{version}", dtype=dtype)
            assert equal_bits(served(engine), loaded(whole))
            assert engine.weight_version == str(version)
    finally:
        asyncio.run(engine.close())


def test_a_delta_on_another_version_is_refused_and_changes_nothing(tmp_path) -> None:
    model, publisher = tiny_model(), DeltaPublisher("elements", full_every=10)
    first = publisher.publish(model, tmp_path / "w", 1)
    nudge(model, 0.5)
    publisher.publish(model, tmp_path / "w", 2)
    nudge(model, 0.5)
    third = publisher.publish(model, tmp_path / "w", 3)  # applies on v2, which the engine never loaded
    assert_refused_unchanged(first, third, r"is a delta on .*v2, but this engine serves .*v1; load a whole "
                                           r"version first")


def test_an_index_outside_its_tensor_is_refused_before_anything_changes(tmp_path) -> None:
    from safetensors.numpy import load_file, save_file

    model, publisher = tiny_model(), DeltaPublisher("elements", full_every=10)
    first = publisher.publish(model, tmp_path / "w", 1)
    nudge(model, 0.5)
    delta = publisher.publish(model, tmp_path / "w", 2)
    stored = load_file(str(delta / ELEMENTS_FILE))
    name = json.loads((delta / DELTA_FILE).read_text())["tensors"][0]
    stored[f"{name}.indices"][-1] = 10**9
    save_file(stored, str(delta / ELEMENTS_FILE))
    assert_refused_unchanged(first, delta, "indices reach outside its")


def test_a_delta_that_fails_midway_goes_back_to_the_whole_version_and_its_deltas(tmp_path) -> None:
    from safetensors.numpy import load_file, save_file

    model, publisher = tiny_model(), DeltaPublisher("elements", full_every=10)
    first = publisher.publish(model, tmp_path / "w", 1)
    engine = JaxEngine(from_pretrained(first), slots=1, max_len=32, weights_dir=first)
    try:
        nudge(model, 0.5)
        asyncio.run(engine.update_weights(str(publisher.publish(model, tmp_path / "w", 2)), "2"))
        second = served(engine)
        nudge(model, 0.5)
        bad = publisher.publish(model, tmp_path / "w", 3)
        stored = load_file(str(bad / ELEMENTS_FILE))
        # the engine writes model.norm.weight first (hf_layouts' order), then the layer's tensor: fails midway
        assert json.loads((bad / DELTA_FILE).read_text())["tensors"] == ["model.layers.0.mlp.up_proj.weight",
                                                                          "model.norm.weight"]
        stored["model.layers.0.mlp.up_proj.weight.values"][:] = np.nan
        save_file(stored, str(bad / ELEMENTS_FILE))
        with pytest.raises(WeightsError, match=r"NaN or Inf .*went back to the weights of .*v2"):
            asyncio.run(engine.update_weights(str(bad), "3"))
        assert equal_bits(served(engine), second) and engine.weight_version == "2"
    finally:
        asyncio.run(engine.close())
