"""Delta publishing (tbjax.models.hf.delta): a delta applied on the version before it gives, bit for bit, the
whole version of the same model; whole versions recur every `full_every` publishes and after a restart; the
versions a delta chain needs are kept."""

import json

import jax.numpy as jnp
import numpy as np
import pytest
from safetensors.numpy import load_file

from tbjax.models import save_pretrained
from tbjax.models.hf.delta import ELEMENTS_FILE, DeltaPublisher
from tbjax.models.hf.safetensors_reader import SafetensorsReader
from tbjax.models.hf.versions import DELTA_FILE
from tests.tbjax.publish_support import nudge, tiny_model


def tensors(directory) -> dict[str, np.ndarray]:
    reader = SafetensorsReader(directory)
    return {name: reader.read(name, (slice(None),)) for name in reader.names()}


def applied(previous: dict[str, np.ndarray], delta) -> dict[str, np.ndarray]:
    """`previous` with the delta in `delta` applied, as a server applies it."""
    record = json.loads((delta / DELTA_FILE).read_text())
    result = {name: value.copy() for name, value in previous.items()}
    if record["granularity"] == "tensors":
        result.update(tensors(delta))
    else:
        changes = load_file(str(delta / ELEMENTS_FILE))
        for name in record["tensors"]:
            result[name].reshape(-1)[changes[f"{name}.indices"]] = changes[f"{name}.values"]
    return result


@pytest.mark.parametrize("granularity", ["tensors", "elements"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_delta_on_the_version_before_gives_the_whole_version(tmp_path, granularity, dtype) -> None:
    model, publisher = tiny_model(), DeltaPublisher(granularity, full_every=10)
    served = tensors(publisher.publish(model, tmp_path / "w", 1, dtype=dtype))
    for version in (2, 3, 4):
        nudge(model, 0.25 * version)
        delta = publisher.publish(model, tmp_path / "w", version, dtype=dtype)
        record = json.loads((delta / DELTA_FILE).read_text())
        assert record["previous"] == f"v{version - 1}" and record["base"] == "v1"
        assert record["tensors"] == ["model.layers.0.mlp.up_proj.weight", "model.norm.weight"]
        assert record["elements"] == 3
        served = applied(served, delta)
        whole = tensors(save_pretrained(model, tmp_path / f"whole{version}", dtype=dtype))
        assert served.keys() == whole.keys()
        for name in whole:
            assert served[name].tobytes() == whole[name].tobytes(), name


def test_whole_versions_recur_and_the_chain_is_kept(tmp_path) -> None:
    model, publisher = tiny_model(), DeltaPublisher("elements", full_every=3)
    kinds = []
    for version in range(1, 8):
        nudge(model, 0.5)
        path = publisher.publish(model, tmp_path / "w", version, keep=1)
        kinds.append("delta" if (path / DELTA_FILE).is_file() else "whole")
        present = sorted(int(p.name[1:]) for p in (tmp_path / "w").iterdir() if p.name != "latest")
        newest_whole = max(v for v, kind in zip(range(1, version + 1), kinds, strict=True) if kind == "whole")
        assert present == list(range(newest_whole, version + 1))  # keep=1, but a delta needs its chain
    assert kinds == ["whole", "delta", "delta", "whole", "delta", "delta", "whole"]
    restarted = DeltaPublisher("elements", full_every=3)  # a resumed run: nothing to compare against yet
    assert not (restarted.publish(model, tmp_path / "w", 8) / DELTA_FILE).exists()


def test_an_unchanged_model_publishes_an_empty_delta(tmp_path) -> None:
    model, publisher = tiny_model(), DeltaPublisher("tensors", full_every=5)
    publisher.publish(model, tmp_path / "w", 1)
    delta = publisher.publish(model, tmp_path / "w", 2)
    assert json.loads((delta / DELTA_FILE).read_text())["tensors"] == []
    assert tensors(delta) == {}


def test_full_every_must_be_positive() -> None:
    with pytest.raises(ValueError, match="full_every=0"):
        DeltaPublisher("tensors", full_every=0)


def test_the_first_publish_is_whole_even_where_values_are_zero(tmp_path) -> None:
    model = tiny_model()
    norm = model.norm.weight
    norm.set_value(jnp.zeros_like(norm.get_value()))  # equal to a fresh comparison buffer: still written
    path = DeltaPublisher("elements", full_every=5).publish(model, tmp_path / "w", 1)
    assert not (path / DELTA_FILE).exists()
    assert np.all(tensors(path)["model.norm.weight"] == 0)
