"""`tbjax.serve --enable-lora` over real HTTP, started the way the trainer's servers are (rollout.launch_sglang
with `lora_rank`): SGLang's adapter bodies load and unload, a request names its adapter, the served adapter
decodes what the merged model does, and bad adapter requests are 4xx answers that leave the server serving."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import portpicker
import pytest

from rollout.launch_sglang import LaunchConfig, Supervisor
from tbjax.config import load_config
from tbjax.models import from_pretrained, save_pretrained
from tbjax.models.hf.peft_adapter import save_adapter
from tbjax.models.lora import adapted_projections, add_adapters, merge_adapters
from tbjax.sections.lora import LoraSpec
from tbjax.trainer.loop import run_steps
from tbjax.trainer.run_setup import build_run
from tests.tbjax.trainer.loop_support import brief_session, config_for, signal_tasks

SERVER_RANK = 4
PROMPT = list(range(5, 17))


def generate(url: str, adapter: str | None = None) -> httpx.Response:
    body: dict[str, Any] = {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": 8, "temperature": 0.0},
                            "return_logprob": True}
    if adapter is not None:
        body["lora_path"] = adapter
    return httpx.post(f"{url}/generate", json=body, timeout=120)


def greedy(url: str, adapter: str | None = None) -> tuple[list[int], np.ndarray]:
    response = generate(url, adapter)
    assert response.status_code == 200, response.text
    answer = response.json()
    return answer["output_ids"], np.array([p[0] for p in answer["meta_info"]["output_token_logprobs"]])


def post(url: str, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{url}{path}", json=body, timeout=120)


@pytest.fixture(scope="module")
def adapted(tiny_dir, tmp_path_factory) -> tuple[Path, Path]:
    """(a rank-2 PEFT adapter on the tiny Qwen3, that model with the adapter merged, as an HF directory). B is
    drawn large enough that the adapter changes the greedy tokens."""
    root = tmp_path_factory.mktemp("lora-serve")
    model = from_pretrained(tiny_dir("qwen3"))
    spec = LoraSpec(rank=2, alpha=6.0)  # scale 3: the server folds it into B and pads A and B to its rank
    add_adapters(model, spec, seed=3)
    rng = np.random.default_rng(0)
    for projection in adapted_projections(model).values():
        lora = projection.adapter.lora
        lora.lora_b[...] = rng.normal(0.0, 0.5, lora.lora_b.shape).astype(np.float32)
    adapter = save_adapter(model, spec, root / "adapter")
    merge_adapters(model)
    merged = save_pretrained(model, root / "merged", dtype="float32")
    return adapter, merged


@pytest.fixture(scope="module")
def lora_server(tiny_dir) -> Iterator[str]:
    config = LaunchConfig(model_path=str(tiny_dir("qwen3")), tp=1, servers=1, port=portpicker.pick_unused_port(),
                          server_command=(sys.executable, "-m", "tbjax.serve"), startup_timeout_s=120, poll_s=0.25,
                          lora_rank=SERVER_RANK, extra_args=("--slots", "4", "--max-len", "1024"))
    supervisor = Supervisor(config)
    supervisor.start()
    yield supervisor.urls[0]
    supervisor.stop()


def test_a_loaded_adapter_decodes_what_the_merged_model_does(lora_server, adapted):
    url, (adapter, merged) = lora_server, adapted
    base_tokens, _ = greedy(url)
    loaded = post(url, "/load_lora_adapter", {"lora_name": "policy-v1", "lora_path": str(adapter)})
    assert loaded.status_code == 200 and loaded.json()["success"], loaded.text
    assert loaded.json()["loaded_adapters"] == {"policy-v1": str(adapter)}
    tokens, logprobs = greedy(url, "policy-v1")
    assert tokens != base_tokens  # the adapter acts
    assert greedy(url)[0] == base_tokens  # a request naming no adapter runs the base
    # the same server with the merged weights as its base, no adapter named
    swapped = post(url, "/update_weights_from_disk", {"model_path": str(merged), "weight_version": "merged"})
    assert swapped.status_code == 200, swapped.text
    merged_tokens, merged_logprobs = greedy(url)
    assert merged_tokens == tokens
    np.testing.assert_allclose(logprobs, merged_logprobs, atol=1e-4)
    unloaded = post(url, "/unload_lora_adapter", {"lora_name": "policy-v1"})
    assert unloaded.status_code == 200 and unloaded.json()["loaded_adapters"] == {}, unloaded.text
    gone = generate(url, "policy-v1")
    assert gone.status_code == 400 and "no adapter named 'policy-v1' is loaded" in gone.text


def test_bad_adapter_requests_are_4xx_and_the_server_serves_on(lora_server, adapted, tiny_dir, tmp_path):
    url, (adapter, _) = lora_server, adapted
    wide = from_pretrained(tiny_dir("qwen3"))
    add_adapters(wide, LoraSpec(rank=SERVER_RANK * 2, alpha=8.0))
    too_wide = save_adapter(wide, LoraSpec(rank=SERVER_RANK * 2, alpha=8.0), tmp_path / "rank8")
    refusals = {
        "unknown adapter": (generate(url, "nobody"), "no adapter named 'nobody' is loaded"),
        "rank above the maximum": (post(url, "/load_lora_adapter", {"lora_name": "w", "lora_path": str(too_wide)}),
                                   f"rank {SERVER_RANK * 2} is above the server's --max-lora-rank {SERVER_RANK}"),
        "missing directory": (post(url, "/load_lora_adapter", {"lora_name": "m", "lora_path": str(tmp_path / "no")}),
                              "holds no PEFT adapter"),
        "unload of an unknown name": (post(url, "/unload_lora_adapter", {"lora_name": "nobody"}),
                                      "no adapter named 'nobody' is loaded"),
        "a body without lora_path": (post(url, "/load_lora_adapter", {"lora_name": "x"}), "lora_path"),
    }
    for what, (response, message) in refusals.items():
        assert response.status_code == 400, (what, response.text)
        answer = response.json()  # /generate's failures carry `error`, the adapter endpoints' `error_message`
        assert message in answer.get("error", answer.get("error_message", "")), (what, response.text)
    first = post(url, "/load_lora_adapter", {"lora_name": "twice", "lora_path": str(adapter)})
    again = post(url, "/load_lora_adapter", {"lora_name": "twice", "lora_path": str(adapter)})
    assert first.status_code == 200 and again.status_code == 400 and "loaded already" in again.text
    assert httpx.get(f"{url}/health", timeout=30).status_code == 200
    assert greedy(url, "twice")[0]  # the server still decodes under an adapter it holds


def test_lora_grpo_publishes_adapters_the_server_serves(lora_server, adapted, tiny_dir, tmp_path):
    """Two LoRA GRPO steps on the SGLang engine against the server: each publish is a PEFT directory the server
    loads before it unloads the last, requests name it, and the weight probe finds the trainer's log-probs on the
    server while the base's are further away than that."""
    url, model_dir = lora_server, tiny_dir("qwen3")
    assert post(url, "/update_weights_from_disk", {"model_path": str(model_dir)}).status_code == 200
    for name in httpx.get(f"{url}/get_model_info", timeout=30).json()["loaded_adapters"]:
        assert post(url, "/unload_lora_adapter", {"lora_name": name}).status_code == 200
    tuned = load_config(overrides=["lora.rank=2", "lora.alpha=4", "optim.learning_rate=2e-2", "rollout.engine=sglang",
                                   "rollout.max_len=1024", f"rollout.sglang_urls=[{url}]", "validation.tasks=0"])
    config = config_for(tmp_path, 2).model_copy(update={"lora": tuned.lora, "optim": tuned.optim,
                                                        "rollout": tuned.rollout})
    run = build_run(config, from_pretrained(model_dir), model_dir, tasks=signal_tasks(model_dir))
    asyncio.run(run_steps(run, opener=brief_session))
    lines = [json.loads(line) for line in (tmp_path / "resume" / "metrics.jsonl").read_text().splitlines()]
    updated = [line for line in lines if not line["skipped"]]
    assert updated, lines
    for line in updated:
        assert line["weight_probe_base_gap"] > 10 * line["weight_probe_max_diff"], line
    served = httpx.get(f"{url}/get_model_info", timeout=30).json()["loaded_adapters"]
    assert list(served) == [f"policy-v{lines[-1]['step']}"]  # the last publish, the earlier one unloaded
    assert Path(served[f"policy-v{lines[-1]['step']}"]).parent == tmp_path / "resume" / "adapters"
