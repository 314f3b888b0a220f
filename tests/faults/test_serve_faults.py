"""Faults at `python -m tbjax.serve`'s HTTP boundary: bad bodies, cross-site requests, and what they did.

The old server passed /generate bodies to the engine unchecked. An id past int32, a top_k of 2**40, a
sampling_seed "abc" or stop_token_ids "ab" raised in the engine's worker thread, which died: requests in flight
failed, /health answered 503 and every later request 500 until a restart. Ids outside the vocabulary (10**6,
-1) were clamped by the embedding lookup and answered 200; malformed JSON, Infinity or NaN sampling values and
a null model_path were answered 500, and the kept-alive connection closed under the client's next pooled
request. Any web page could POST to it (no Host or Origin check): pause it, or load weights from a local path.
Now every body is checked by pydantic models (400 naming the field and the rule), the engine refuses what it
cannot run before its worker sees it, and requests must name a loopback host (Host) and come from no foreign
page (Origin).

One real server (`python -m tbjax.serve`, started by the SGLang launcher as the other tests do, with
`--allowed-hosts gpu-node-1`) on 127.0.0.1 serves a tiny random Qwen3; one in-process JaxEngine checks the
engine's own boundary.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import portpicker
import pytest
from hypothesis import HealthCheck, given, settings

from rollout.engines.protocol import SamplingParams
from rollout.launch_sglang import LaunchConfig, Supervisor
from tbjax.engine.http_bodies import Limits
from tests.faults.generate_bodies_support import Body, generate_bodies

PROMPT = list(range(5, 17))
GREEDY = {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": 8, "temperature": 0.0}, "return_logprob": True}
MAX_LEN = 128
FUZZ_BODIES = 200
EXTRA_HOST = "gpu-node-1"
EVIL = "https://evil.example"

# finding 1: each of these stopped the engine's worker -> (field, rule) of the 400 now
WORKER_KILLERS = {
    "id_past_int32": ({"input_ids": [5, 2**31]}, "input_ids[1]", "less_than"),
    "top_k_2_pow_40": ({"input_ids": [5, 6], "sampling_params": {"top_k": 2**40}}, "sampling_params.top_k",
                       "less_than_equal"),
    "seed_not_an_int": ({"input_ids": [5, 6], "sampling_params": {"sampling_seed": "abc"}},
                        "sampling_params.sampling_seed", "int_type"),
    "stop_ids_a_string": ({"input_ids": [5, 6], "sampling_params": {"stop_token_ids": "ab"}},
                          "sampling_params.stop_token_ids", "list_type"),
}


def answer_of(response: httpx.Response) -> tuple[Any, ...]:
    """What a /generate answer says about the generation: tokens, their log-probs, why it ended."""
    body = response.json()
    return body["output_ids"], body["meta_info"]["output_token_logprobs"], body["meta_info"]["finish_reason"]


def broke(response: httpx.Response, field: str, rule: str) -> bool:
    """A 400 whose JSON names `field` and `rule` among the rules the body broke."""
    errors = response.json().get("errors", [])
    return response.status_code == 400 and any(e["field"] == field and e["rule"] == rule for e in errors)


@pytest.fixture(scope="module")
def model_dir(tiny_dir) -> Path:
    return tiny_dir("qwen3")


@pytest.fixture(scope="module")
def server(model_dir) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """(URL, the answer to GREEDY before any attack)."""
    config = LaunchConfig(model_path=str(model_dir), tp=1, servers=1, port=portpicker.pick_unused_port(),
                          server_command=(sys.executable, "-m", "tbjax.serve"), startup_timeout_s=120, poll_s=0.25,
                          extra_args=("--slots", "4", "--max-len", str(MAX_LEN), "--allowed-hosts", EXTRA_HOST))
    supervisor = Supervisor(config)
    supervisor.start()
    url = supervisor.urls[0]
    reference = httpx.post(f"{url}/generate", json=GREEDY, timeout=120)
    assert reference.status_code == 200, reference.text
    yield url, answer_of(reference)
    supervisor.stop()


@pytest.fixture
def client(server) -> Iterator[httpx.Client]:
    """A pooled client holding one kept-alive connection, as the SGLang client's pool does."""
    with httpx.Client(base_url=server[0], timeout=60, limits=httpx.Limits(max_connections=1)) as client:
        yield client


@pytest.fixture(scope="module")
def vocab_size(model_dir) -> int:
    return json.loads((model_dir / "config.json").read_text())["vocab_size"]


@pytest.mark.parametrize("attack", WORKER_KILLERS)
def test_a_bad_body_is_refused_and_the_server_serves_on(server, client, attack):
    body, field, rule = WORKER_KILLERS[attack]
    assert broke(client.post("/generate", json=body), field, rule)
    assert client.get("/health").status_code == 200
    assert answer_of(client.post("/generate", json=GREEDY)) == server[1]


@pytest.mark.parametrize("ids,field,rule", [([5, 10**6], "input_ids[1]", "less_than"),
                                           ([-1, 5], "input_ids[0]", "greater_than_equal")],
                         ids=["past_the_vocabulary", "negative"])
def test_out_of_vocabulary_ids_are_refused_not_clamped(client, ids, field, rule):
    assert broke(client.post("/generate", json={"input_ids": ids}), field, rule)


def test_a_bad_request_leaves_one_in_flight_alone(server, client):
    """GREEDY waits in the paused engine while the worker killers arrive; it is answered as before them."""
    url, reference = server
    assert client.post("/flush_cache").status_code == 200  # no cached prefix: the reference had none
    assert client.post("/pause_generation").status_code == 200
    with ThreadPoolExecutor(1) as pool:
        in_flight = pool.submit(httpx.post, f"{url}/generate", json=GREEDY, timeout=120)
        deadline = time.monotonic() + 30
        while client.post("/flush_cache").status_code == 200:  # refused once the engine holds GREEDY
            assert time.monotonic() < deadline, "GREEDY never reached the engine"
            time.sleep(0.05)
        for body, field, rule in WORKER_KILLERS.values():
            assert broke(client.post("/generate", json=body), field, rule)
        assert client.post("/continue_generation").status_code == 200
        assert answer_of(in_flight.result()) == reference


def test_malformed_bodies_are_400_and_the_connection_stays_open(server, client):
    """The kept-alive item: each refusal comes back on the client's one pooled connection, which then serves
    the next request (the old 500s closed it under that request)."""
    refusals = [
        ("/generate", b'{"input_ids": [5, 6]', "body", "json_invalid"),
        ("/generate", b'{"input_ids": [5], "sampling_params": {"temperature": Infinity}}',
         "sampling_params.temperature", "finite_number"),
        ("/generate", b'{"input_ids": [5], "sampling_params": {"top_p": NaN}}', "sampling_params.top_p",
         "finite_number"),
        ("/update_weights_from_disk", b'{"model_path": null}', "model_path", "string_type"),
    ]
    connections = set()
    for path, content, field, rule in refusals:
        response = client.post(path, content=content, headers={"content-type": "application/json"})
        assert broke(response, field, rule), response.text
        assert response.headers.get("connection") != "close"
        assert path == "/generate" or response.json()["success"] is False  # SGLang's admin shape
        following = client.post("/generate", json=GREEDY)
        assert answer_of(following) == server[1]
        connections |= {r.extensions["network_stream"].get_extra_info("client_addr") for r in (response, following)}
    assert len(connections) == 1


def test_cross_site_requests_and_foreign_hosts_are_refused(server, client, model_dir):
    port = httpx.URL(server[0]).port
    for path, body in [("/pause_generation", {}), ("/update_weights_from_disk", {"model_path": str(model_dir)}),
                       ("/release_memory_occupation", {"tags": None})]:
        for origin in (EVIL, "null", "http://127.0.0.1.evil.example"):
            assert client.post(path, json=body, headers={"origin": origin}).status_code == 403
        assert client.post(path, json=body, headers={"host": "evil.example"}).status_code == 400  # DNS rebinding
    assert answer_of(client.post("/generate", json=GREEDY)) == server[1]  # not paused, still the same weights
    assert client.get("/get_model_info").json()["memory_released"] == []
    for host in ("127.0.0.1", "localhost", "[::1]", EXTRA_HOST):  # any port; the last by --allowed-hosts
        assert client.post("/continue_generation", headers={"host": f"{host}:{port}"}).status_code == 200
    assert client.post("/continue_generation", headers={"origin": "http://localhost:8080"}).status_code == 200


def test_fuzzed_bodies_never_stop_or_change_the_server(server, client, vocab_size):
    """FUZZ_BODIES bodies of tests.faults.generate_bodies_support, the same every run (hypothesis, derandomized):
    none is answered 5xx; a valid one 200 with tokens of the vocabulary; a refused one 400 naming the field and
    rule of every rule it broke; one past the body limit 413, unread. Afterwards the server answers GREEDY as
    before them."""
    statuses: Counter[int] = Counter()
    limit = Limits(vocab_size, MAX_LEN - 2).max_body_bytes

    @settings(max_examples=FUZZ_BODIES, derandomize=True, database=None, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])
    @given(generate_bodies(vocab_size, MAX_LEN))
    def answered(body: Body) -> None:
        response = client.post("/generate", content=body.content, headers={"content-type": "application/json"})
        statuses[response.status_code] += 1
        if len(body.content) > limit:
            assert response.status_code == 413 and "byte limit" in response.json()["error"]
            return
        assert response.status_code in ({200, 400} if body.valid is None else {200 if body.valid else 400}), \
            response.text[:2000]
        if response.status_code == 200:
            assert all(0 <= t < vocab_size for t in response.json()["output_ids"])
        else:
            errors = response.json()["errors"]
            assert errors and all(e["field"] and e["rule"] for e in errors), response.text[:2000]

    answered()
    print(f"\n{statuses.total()} fuzzed /generate bodies: {statuses[200]} answered 200, {statuses[400]} refused 400, "
          f"{statuses[413]} past the body limit")
    assert statuses.total() == FUZZ_BODIES
    assert client.get("/health").status_code == 200
    assert client.post("/flush_cache").status_code == 200  # as at the reference: nothing cached
    assert answer_of(client.post("/generate", json=GREEDY)) == server[1]


# ----------------------------------------------------------------------------- the engine's own boundary
SAMPLING = SamplingParams(max_new_tokens=12, temperature=0.0)
UNRUNNABLE = [  # (prompt, sampling) the old worker died of, or answered with a clamped id or NaN log-probs
    ([5, 2**31], SAMPLING), ([5, 10**6], SAMPLING), ([-1, 5], SAMPLING), ([5, 6.0], SAMPLING),
    (PROMPT, SamplingParams(max_new_tokens=4, top_k=2**40)),
    (PROMPT, SamplingParams(max_new_tokens=4, seed="abc")),
    (PROMPT, SamplingParams(max_new_tokens=4, stop_token_ids="ab")),
    (PROMPT, SamplingParams(max_new_tokens=4, stop_token_ids=(10**6,))),
    (PROMPT, SamplingParams(max_new_tokens=4, temperature=float("inf"))),
    (PROMPT, SamplingParams(max_new_tokens=4, temperature=float("nan"))),
]


def test_the_engine_refuses_what_it_cannot_run_and_serves_on(engine):
    async def scenario():
        alone = await engine.generate(PROMPT, SAMPLING)
        in_flight = asyncio.create_task(engine.generate(PROMPT, SAMPLING))
        await asyncio.sleep(0)  # queued: the worker holds it
        for ids, sampling in UNRUNNABLE:
            with pytest.raises(ValueError):
                await engine.generate(ids, sampling)
        assert await in_flight == alone
        assert await engine.health()

    asyncio.run(scenario())


def test_a_caller_that_gave_up_does_not_stop_the_engine(engine):
    """A caller's loop that closed before its request finished (a timeout in an `asyncio.run`): delivering
    the result onto the closed loop raised in the worker, which died."""
    async def give_up():
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(engine.generate(PROMPT, SamplingParams(max_new_tokens=40, temperature=0.0)),
                                   0.001)

    asyncio.run(give_up())
    deadline = time.monotonic() + 30
    while engine.busy:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert asyncio.run(engine.health())
    assert asyncio.run(engine.generate(PROMPT, SAMPLING)).finish_reason == "length"


def test_a_taken_port_or_a_missing_model_is_refused_before_the_model_loads(model_dir, tmp_path):
    """Both are known before loading the model (minutes at 27B): exit 2 naming the port or directory."""
    serve = [sys.executable, "-m", "tbjax.serve"]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = subprocess.run([*serve, "--model", str(model_dir), "--port", str(port)], capture_output=True,
                              text=True, timeout=120)
    assert busy.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in busy.stderr
    missing = subprocess.run([*serve, "--model", str(tmp_path / "nowhere")], capture_output=True, text=True,
                             timeout=120)
    assert missing.returncode == 2 and "no HF model directory there" in missing.stderr
