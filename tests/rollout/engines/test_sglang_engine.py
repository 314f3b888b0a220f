"""`SGLangEngine` against stand-in SGLang servers on 127.0.0.1 (tests/rollout/sglang_stub_support.py): what is sent,
what is parsed, routing, retries and the publish sequence, over real HTTP."""

import asyncio
import math
from collections import Counter

import pytest

from rollout.engines.protocol import EngineError, SamplingParams
from rollout.engines.sglang import SGLangEngine
from rollout.engines.sglang_wire import ProtocolError
from tests.rollout.sglang_stub_support import STOP_LOGPROB, StubModel, ThreadServer, free_port, on_engine

SAMPLING = SamplingParams(max_new_tokens=16, temperature=0.7, top_p=0.95, top_k=20, min_p=0.05, stop_token_ids=(7,))


@pytest.fixture(scope="module")
def servers():
    running = [ThreadServer(StubModel(name=f"s{i}")) for i in range(3)]
    yield running
    for server in running:
        server.stop()


@pytest.fixture
def models(servers):
    for server in servers:
        server.model.reset()
    return [server.model for server in servers]


def run(servers, coroutine_fn, n: int = 3, **settings):
    """Run `coroutine_fn(engine)` against the first n servers with fast retries."""
    settings.setdefault("backoff_s", 0.01)
    return on_engine([s.url for s in servers[:n]], coroutine_fn, **settings)


def test_every_sampling_value_reaches_the_server(servers, models):
    run(servers, lambda e: e.generate([1, 2, 3], SAMPLING), n=1)
    (body,) = models[0].received
    assert body["sampling_params"] == {
        "max_new_tokens": 16, "temperature": 0.7, "top_p": 0.95, "top_k": 20, "min_p": 0.05, "stop": [],
        "stop_token_ids": [7], "ignore_eos": False, "skip_special_tokens": False, "no_stop_trim": True,
        "repetition_penalty": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0}
    assert body["input_ids"] == [1, 2, 3] and body["return_logprob"] is True and body["logprob_start_len"] == -1
    assert isinstance(body["rid"], str) and body["rid"]


def test_parses_tokens_logprobs_finish_and_cache(servers, models):
    async def two_turns(engine):
        first = await engine.generate([1, 2, 3], SAMPLING, session_id="ep")
        second = await engine.generate([1, 2, 3, *first.output_ids, 9], SAMPLING, session_id="ep")
        return first, second
    first, second = run(servers, two_turns)
    # prompt sum 6: the stub samples 106..109 with logprobs -0.25 k, then stop token 7
    assert first.output_ids == (106, 107, 108, 109, 7)
    assert first.logprobs == (-0.25, -0.5, -0.75, -1.0, STOP_LOGPROB)
    assert (first.finish_reason, first.prompt_tokens, first.cached_tokens, first.weight_version) == (
        "stop", 3, 0, "default")
    assert second.prompt_tokens == 9 and second.cached_tokens == 8  # same server: the prefix was cached


def test_length_finish_without_stop(servers, models):
    generation = run(servers, lambda e: e.generate([1], SamplingParams(max_new_tokens=2)), n=1)
    assert generation.output_ids == (101, 102) and generation.finish_reason == "length"


def test_trimmed_stop_token_is_put_back(servers, models):
    models[0].reset(trim_stop=True, text_in_logprobs=False)
    generation = run(servers, lambda e: e.generate([1, 2, 3], SAMPLING), n=1)
    assert generation.output_ids[-1] == 7 and generation.logprobs[-1] == STOP_LOGPROB


def test_trimmed_stop_logprob_is_nan_and_counted(servers, models):
    models[0].reset(trim_stop=True, trim_stop_logprob=True)

    async def generate(engine):
        return await engine.generate([1, 2, 3], SAMPLING), engine.missing_logprobs
    generation, missing = run(servers, generate, n=1)
    assert generation.output_ids[-1] == 7 and math.isnan(generation.logprobs[-1]) and missing == 1


def test_concurrent_episodes_spread_and_stick(servers, models):
    for model in models:
        model.delay_s = 0.05

    async def episodes(engine):
        async def episode(k: int):
            for turn in range(3):
                await engine.generate([k + 1000, turn], SAMPLING, session_id=f"ep{k}")
        await asyncio.gather(*(episode(k) for k in range(6)))
    run(servers, episodes)
    sessions_per_server = [{body["input_ids"][0] for body in model.received} for model in models]
    assert [len(s) for s in sessions_per_server] == [2, 2, 2]  # least loaded: 6 episodes over 3 servers
    assert [len(model.received) for model in models] == [6, 6, 6]  # every turn on its episode's server


def test_server_error_is_retried_and_the_session_moves(servers, models):
    models[0].reset(fail_generate=1)

    async def episode(engine):
        first = await engine.generate([1], SAMPLING, session_id="ep")
        await engine.generate([2], SAMPLING, session_id="ep")
        return first, engine.pool.servers[0].last_error
    generation, error = run(servers, episode, n=2)
    assert generation.output_ids[0] == 101 and "HTTP 500" in error
    assert len(models[0].received) == 1 and len(models[1].received) == 2
    assert models[0].received[0]["rid"] != models[1].received[0]["rid"]


def test_retries_on_the_same_server_when_it_is_the_only_one(servers, models):
    models[0].reset(fail_generate=2)
    generation = run(servers, lambda e: e.generate([1], SAMPLING), n=1)
    assert generation.finish_reason == "stop" and len(models[0].received) == 3


def test_client_errors_are_not_retried(servers, models):
    models[0].reset(fail_generate=5, fail_status=400)
    with pytest.raises(EngineError, match="HTTP 400"):
        run(servers, lambda e: e.generate([1], SAMPLING), n=1)
    assert len(models[0].received) == 1


def test_aborted_generation_is_retried_on_the_same_server(servers, models):
    models[0].reset(abort_generate=1)  # what a pause for a publish does to requests in flight
    generation = run(servers, lambda e: e.generate([1], SAMPLING, session_id="ep"), n=2)
    assert generation.finish_reason == "stop"
    assert (len(models[0].received), len(models[1].received)) == (2, 0)  # the episode's cache stays useful


def test_exhausted_retries_raise_engine_error_naming_each_attempt(servers, models):
    models[0].reset(fail_generate=10)
    with pytest.raises(EngineError, match=r"failed 3 times: attempt 1 on http://127\.0\.0\.1:\d+: HTTP 500"):
        run(servers, lambda e: e.generate([1], SAMPLING), n=1, max_attempts=3)


def test_a_publish_pauses_all_then_loads_all_then_continues_all(servers, models):
    shared: list = []
    for model in models:
        model.events = shared

    async def publish(engine):
        await engine.update_weights("/ckpt/weights/v3", "3")
        return await engine.generate([1], SAMPLING)
    generation = run(servers, publish)
    phases = [path for _, path, _ in shared]
    assert phases == ["/pause_generation"] * 3 + ["/update_weights_from_disk"] * 3 + ["/continue_generation"] * 3
    assert Counter(name for name, _, _ in shared) == {"s0": 3, "s1": 3, "s2": 3}
    updates = [body for _, path, body in shared if path == "/update_weights_from_disk"]
    assert updates == [{"model_path": "/ckpt/weights/v3", "weight_version": "3", "flush_cache": True}] * 3
    assert generation.weight_version == "3"


def test_a_publish_beside_running_episodes_retracts_them_and_may_keep_the_cache(servers, models):
    """Asynchronous GRPO's publish: running requests are retracted (their partial turns kept) rather than
    aborted, and with flush_cache off the servers keep their prefix cache."""
    run(servers, lambda e: e.update_weights("/ckpt/weights/v5", "5"), pause_mode="retract", flush_cache=False)
    for model in models:
        sent = {path: body for _, path, body in model.events}
        assert sent["/pause_generation"] == {"mode": "retract"}
        assert sent["/update_weights_from_disk"] == {"model_path": "/ckpt/weights/v5", "weight_version": "5",
                                                     "flush_cache": False}


def test_failed_load_still_continues_generation_and_names_the_server(servers, models):
    models[1].reset(update_ok=False)
    problem = f"{servers[1].url}/update_weights_from_disk could not load /bad \\(HTTP 400\\): 'cannot load /bad'"
    with pytest.raises(EngineError, match=problem):
        run(servers, lambda e: e.update_weights("/bad", "4"))
    assert [m.events[-1][1] for m in models] == ["/continue_generation"] * 3
    assert not any(m.paused for m in models)


def test_version_falls_back_to_the_last_publish_when_the_server_reports_none(servers, models):
    models[0].reset(report_version=False)

    async def publish(engine):
        await engine.update_weights("/w/v5", "5")
        return await engine.generate([1], SAMPLING)
    assert run(servers, publish, n=1).weight_version == "5"


def test_every_server_scores_the_prompt_with_its_own_weights(servers, models):
    models[2].reset(score_shift=0.5)  # a server whose weights are not what was published

    async def publish_and_score(engine):
        await engine.update_weights("/w/v6", "6")
        return await engine.score([3, 4, 9, 1])
    scores = run(servers, publish_and_score)
    # the stub scores token i at -0.25 * ((ids[i-1] + ids[i]) % 8 + 1): pairs 3+4, 4+9, 9+1
    assert [s.logprobs for s in scores] == [(-2.0, -1.5, -0.75)] * 2 + [(-2.5, -2.0, -1.25)]
    assert [(s.source, s.weight_version) for s in scores] == [(server.url, "6") for server in servers]
    bodies = [m.received[-1] for m in models]
    assert all(b["return_logprob"] and b["logprob_start_len"] == 0 and b["input_ids"] == [3, 4, 9, 1] for b in bodies)
    assert all(b["sampling_params"]["max_new_tokens"] == 1 and b["sampling_params"]["temperature"] == 0.0
               for b in bodies)


def test_scores_must_name_the_prompt_tokens(servers, models, monkeypatch):
    original = models[0].prompt_logprobs
    monkeypatch.setattr(models[0], "prompt_logprobs",  # a server that scored the prompt shifted by one token
                        lambda ids, start: [[lp, tok + 1, text] for lp, tok, text in original(ids, start)])
    with pytest.raises(ProtocolError, match=r"input_token_logprobs\[1\] is for token 5, but the token there is 4"):
        run(servers, lambda e: e.score([3, 4, 9]), n=1)


def test_health_is_false_when_a_server_is_down_and_benches_it(servers, models):
    async def check(urls):
        engine = SGLangEngine.from_urls(urls, connect_timeout_s=1.0, health_timeout_s=1.0)
        try:
            return await engine.health(), [s.benched_until > 0 for s in engine.pool.servers]
        finally:
            await engine.close()
    assert asyncio.run(check([servers[0].url, servers[1].url])) == (True, [False, False])
    dead = f"http://127.0.0.1:{free_port()}"
    assert asyncio.run(check([servers[0].url, dead])) == (False, [False, True])


def test_servers_without_the_update_endpoint_are_restarted_on_the_new_weights(servers, models):
    for model in models[:2]:
        model.reset(update_endpoint=False, report_version=False)
    restarted: list[str] = []

    async def two_publishes(engine):
        await engine.update_weights("/w/v1", "1")
        await engine.update_weights("/w/v2", "2")  # known by now: straight to the restart
        return await engine.generate([1], SAMPLING)
    generation = run(servers, two_publishes, n=2, restart_servers=restarted.append)
    assert restarted == ["/w/v1", "/w/v2"] and generation.weight_version == "2"
    assert [path for _, path, _ in models[0].events] == [
        "/pause_generation", "/update_weights_from_disk", "/continue_generation"]


def test_missing_update_endpoint_without_a_restarter_says_what_to_do(servers, models):
    models[0].reset(update_endpoint=False)
    with pytest.raises(EngineError, match=r"HTTP 404 .* no /update_weights_from_disk.*restart_servers"):
        run(servers, lambda e: e.update_weights("/w/v1", "1"), n=1)
    assert models[0].events[-1][1] == "/continue_generation" and not models[0].paused
