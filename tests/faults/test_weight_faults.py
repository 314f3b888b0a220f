"""Weights a server must not take, and a cache that must not keep what bad weights left.

The old `python -m tbjax.serve` loaded NaN, Inf or bit-flipped safetensors with 200 "weights updated"; a
corrupt header, a truncated file, a `null` config or a broken index got a 500 with a traceback; a config.json
that differed only in `transformers_version`, `torch_dtype` or `architectures` was refused as "a different
architecture". After one version with NaN weights had decoded, good weights still gave token 0 forever: the
masked cache positions kept NaN keys and values, and 0 x NaN reached the output. Now each bad directory is a
400 naming the problem, with the server serving on unchanged; a swap zeroes the cache, and masked positions
are zeroed before they are read.

One real server (`tiny_server`: the SGLang launcher starting `python -m tbjax.serve`) on 127.0.0.1 serves a
tiny random Qwen3 written by transformers; one in-process JaxEngine checks the cache.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from rollout.engines.protocol import SamplingParams
from tbjax.engine.weight_checks import WeightsError
from tests.faults.serve_support import GREEDY, greedy_answer

WEIGHTS = "model.safetensors"


def damaged(model_dir: Path, out: Path, damage: Callable[[Path], None]) -> Path:
    shutil.copytree(model_dir, out)
    damage(out)
    return out


def poison(value: float) -> Callable[[Path], None]:
    def write(directory: Path) -> None:
        tensors = load_file(directory / WEIGHTS)
        name = sorted(tensors)[len(tensors) // 2]
        tensors[name] = tensors[name].copy()
        tensors[name].flat[7] = value
        save_file(tensors, directory / WEIGHTS)
    return write


def rewrite_config(change: Callable[[dict[str, Any]], Any]) -> Callable[[Path], None]:
    def write(directory: Path) -> None:
        path = directory / "config.json"
        path.write_text(json.dumps(change(json.loads(path.read_text()))))
    return write


def overwrite(offset: int, data: bytes) -> Callable[[Path], None]:
    def write(directory: Path) -> None:
        with open(directory / WEIGHTS, "r+b") as f:
            f.seek(offset)
            f.write(data)
    return write


def truncate(directory: Path) -> None:
    path = directory / WEIGHTS
    path.write_bytes(path.read_bytes()[:len(path.read_bytes()) // 2])


def broken_index(directory: Path) -> None:
    (directory / "model.safetensors.index.json").write_text('{"weight_map": ')


REFUSED = {
    "nan": (poison(float("nan")), "parameters hold NaN or Inf"),
    "inf": (poison(float("inf")), "parameters hold NaN or Inf"),
    "exponent_bits_flipped": (poison(np.frombuffer(np.uint32(0x7F800001).tobytes(), np.float32)[0]),
                              "parameters hold NaN or Inf"),
    "corrupt_header": (overwrite(0, b"\xff" * 8), "cannot be read as an HF checkpoint"),
    "header_not_json": (overwrite(8, b"}{"), "cannot be read as an HF checkpoint"),
    "truncated": (truncate, "cannot be read as an HF checkpoint"),
    "null_config": (rewrite_config(lambda config: None), "cannot be read as an HF checkpoint"),
    "broken_index": (broken_index, "cannot be read as an HF checkpoint"),
    "weights_of_another_depth": (rewrite_config(lambda c: {**c, "num_hidden_layers": c["num_hidden_layers"] + 1}),
                                 "different architecture than the served model (num_hidden_layers differ)"),
    "a_billion_layers": (rewrite_config(lambda c: {**c, "num_hidden_layers": 10**9}),  # hung the server, 12 GB
                         "different architecture than the served model (num_hidden_layers differ)"),
    "another_architecture": (rewrite_config(lambda c: {**c, "rms_norm_eps": c["rms_norm_eps"] * 10}),
                             "different architecture than the served model (rms_norm_eps differ)"),
}


@pytest.mark.parametrize("damage", REFUSED)
def test_bad_weights_are_a_400_and_the_server_serves_on(tiny_server, tiny_qwen3_dir, tmp_path, damage) -> None:
    url, reference = tiny_server
    write, problem = REFUSED[damage]
    directory = damaged(tiny_qwen3_dir, tmp_path / damage, write)
    response = httpx.post(f"{url}/update_weights_from_disk", timeout=120,
                          json={"model_path": str(directory), "weight_version": damage})
    assert response.status_code == 400, response.text
    assert problem in response.json()["message"] and "Traceback" not in response.text
    assert greedy_answer(url) == reference
    assert httpx.get(f"{url}/get_model_info").json()["weight_version"] != damage


@pytest.mark.parametrize("key, value", [("transformers_version", "9.99.0"), ("torch_dtype", "bfloat16"),
                                        ("architectures", ["SomethingElseForCausalLM"])])
def test_config_keys_that_describe_the_file_do_not_change_the_architecture(tiny_server, tiny_qwen3_dir, tmp_path,
                                                                            key, value) -> None:
    url, reference = tiny_server
    directory = damaged(tiny_qwen3_dir, tmp_path / key, rewrite_config(lambda config: {**config, key: value}))
    response = httpx.post(f"{url}/update_weights_from_disk", timeout=120,
                          json={"model_path": str(directory), "weight_version": key})
    assert response.status_code == 200, response.text
    assert greedy_answer(url) == reference  # the same weights, served as version `key`


def test_finite_weights_that_overflow_are_the_server_s_failure_not_the_client_s(tiny_server, tiny_qwen3_dir,
                                                                                  tmp_path) -> None:
    """Every final-norm weight at 3e38: finite, so loaded; its log-probs are not. /generate answered 400 "Out of
    range float values are not JSON compliant", which the SGLang client takes for its own bug."""
    url, reference = tiny_server

    def huge_norm(directory: Path) -> None:
        tensors = load_file(directory / WEIGHTS)
        tensors["model.norm.weight"] = np.full_like(tensors["model.norm.weight"], 3e38)
        save_file(tensors, directory / WEIGHTS)

    def load(directory: Path) -> httpx.Response:
        return httpx.post(f"{url}/update_weights_from_disk", json={"model_path": str(directory)}, timeout=120)

    assert load(damaged(tiny_qwen3_dir, tmp_path / "huge", huge_norm)).status_code == 200
    response = httpx.post(f"{url}/generate", json=GREEDY, timeout=120)
    assert response.status_code == 503 and "non-finite log-probs" in response.json()["error"]
    assert load(tiny_qwen3_dir).status_code == 200 and greedy_answer(url) == reference


SAMPLING = SamplingParams(max_new_tokens=8, temperature=0.0)
PROMPT = GREEDY["input_ids"]


def test_nan_left_in_the_cache_never_reaches_an_output(engine) -> None:
    before = asyncio.run(engine.generate(PROMPT, SAMPLING))
    cache = engine.cache
    engine.cache = type(cache)(jnp.full_like(cache.k, jnp.nan), jnp.full_like(cache.v, jnp.nan), cache.linear)
    after = asyncio.run(engine.generate(PROMPT, SAMPLING))
    assert after.output_ids == before.output_ids and np.all(np.isfinite(after.logprobs))


def test_a_weight_swap_zeroes_the_cache_and_refuses_non_finite_parameters(engine) -> None:
    asyncio.run(engine.generate(PROMPT, SAMPLING))
    assert np.any(np.asarray(engine.cache.k))
    state = engine.state
    asyncio.run(engine.set_state(state, "again"))
    assert not np.any(np.asarray(engine.cache.k)) and not np.any(np.asarray(engine.cache.v))
    poisoned = jax.tree.map(lambda a: a.at[(0,) * a.ndim].set(jnp.inf), state)
    with pytest.raises(WeightsError, match="parameters hold NaN or Inf"):
        asyncio.run(engine.set_state(poisoned, "poisoned"))
    assert engine.weight_version == "again"
