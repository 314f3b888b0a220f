"""JaxEngine against the model's own full forward pass: same greedy tokens, the trainer's log-probs, and
continuous batching / prefix reuse / weight swaps that change nothing they should not."""

import asyncio

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rollout.engines.protocol import SamplingParams
from tbjax.engine.jax_engine import JaxEngine
from tbjax.models import RuntimeConfig, from_pretrained
from tbjax.models.hf.versions import publish_weights
from tests.tbjax.engine.sessions_support import REFERENCE_SAMPLING, prompt, two_turns


def run(coroutine):
    return asyncio.run(coroutine)


async def generate_all(engine, requests):
    return await asyncio.gather(*(engine.generate(ids, sampling) for ids, sampling in requests))


def trainer_logprobs(model, ids: list[int], completion: tuple[int, ...], temperature: float) -> np.ndarray:
    """What the trainer recomputes: log_softmax(logits / T) of the full sequence at the sampled tokens."""
    logits = model(jnp.asarray([ids + list(completion)], jnp.int32))[0, len(ids) - 1:-1]
    logprobs = jax.nn.log_softmax(logits / temperature, axis=-1)
    return np.asarray(logprobs)[np.arange(len(completion)), list(completion)]


@pytest.fixture(scope="module")
def model(tiny_dir):
    return from_pretrained(tiny_dir("qwen3"))


@pytest.mark.parametrize("arch,scan", [("qwen3", False), ("qwen3-moe", True), ("qwen2", False), ("qwen3_5", False)])
def test_greedy_decoding_equals_full_forward_argmax(tiny_dir, arch, scan):
    model = from_pretrained(tiny_dir(arch), runtime=RuntimeConfig(scan_layers=scan))
    engine = JaxEngine(model, slots=2, max_len=128)
    ids = prompt(0, 21)
    result = run(engine.generate(ids, SamplingParams(max_new_tokens=12, temperature=0.0)))
    # one full forward over prompt + completion: each generated token is the argmax after its prefix
    logits = np.asarray(model(jnp.asarray([ids + list(result.output_ids)], jnp.int32)))[0]
    assert list(result.output_ids) == logits[len(ids) - 1:-1].argmax(-1).tolist()
    assert len(result.output_ids) == 12 and result.finish_reason == "length"
    run(engine.close())


def test_behaviour_logprobs_match_the_trainer_recomputation(model):
    engine = JaxEngine(model, slots=4, max_len=256)
    requests = [(prompt(i, 10 + 7 * i), SamplingParams(max_new_tokens=24, seed=i, **REFERENCE_SAMPLING))
                for i in range(4)]
    results = run(generate_all(engine, requests))
    for (ids, _), result in zip(requests, results, strict=True):
        expected = trainer_logprobs(model, ids, result.output_ids, 1.0)
        np.testing.assert_allclose(result.logprobs, expected, atol=1e-4)
    run(engine.close())


def test_requests_joining_mid_decode_sample_what_they_would_alone(model):
    """Continuous batching: a request admitted while others decode gets the tokens it gets alone."""
    sampling = [SamplingParams(max_new_tokens=40, seed=100 + i, **REFERENCE_SAMPLING) for i in range(5)]
    prompts = [prompt(10 + i, 5 + 9 * i) for i in range(5)]
    alone = []
    for ids, params in zip(prompts, sampling, strict=True):
        engine = JaxEngine(model, slots=1, max_len=256)
        alone.append(run(engine.generate(ids, params)).output_ids)
        run(engine.close())

    async def staggered():
        engine = JaxEngine(model, slots=3, max_len=256)  # fewer slots than requests: some wait for a slot
        tasks = []
        for ids, params in zip(prompts, sampling, strict=True):
            tasks.append(asyncio.create_task(engine.generate(ids, params)))
            await asyncio.sleep(0.05)
        results = await asyncio.gather(*tasks)
        await engine.close()
        return results

    assert [r.output_ids for r in run(staggered())] == alone


def test_multi_turn_prompts_reuse_the_cached_prefix(model):
    async def episode():
        engine = JaxEngine(model, slots=2, max_len=256)
        first_prompt = prompt(3, 30)
        first = await engine.generate(first_prompt, SamplingParams(max_new_tokens=8, temperature=0.0))
        follow_up = first_prompt + list(first.output_ids) + prompt(4, 6)
        second = await engine.generate(follow_up, SamplingParams(max_new_tokens=8, temperature=0.0), session_id="e")
        fresh = JaxEngine(model, slots=1, max_len=256)
        uncached = await fresh.generate(follow_up, SamplingParams(max_new_tokens=8, temperature=0.0))
        await engine.close()
        await fresh.close()
        return first, second, uncached

    first, second, uncached = run(episode())
    assert second.cached_tokens == 30 + 8 - 1  # everything but the last sampled token was cached
    assert uncached.cached_tokens == 0
    assert second.output_ids == uncached.output_ids
    np.testing.assert_allclose(second.logprobs, uncached.logprobs, atol=1e-5)


def test_stop_tokens_end_the_generation_and_stay_in_the_output(model):
    engine = JaxEngine(model, slots=1, max_len=128)
    ids = prompt(5, 12)
    free = run(engine.generate(ids, SamplingParams(max_new_tokens=10, temperature=0.0)))
    stop = free.output_ids[3]
    stopped = run(engine.generate(ids, SamplingParams(max_new_tokens=10, temperature=0.0, stop_token_ids=(stop,))))
    first_stop = free.output_ids.index(stop)
    assert stopped.output_ids == free.output_ids[:first_stop + 1] and stopped.finish_reason == "stop"
    run(engine.close())


def test_a_publish_changes_version_and_logits(tiny_dir, tmp_path):
    async def publish():  # the load writes into the model's parameters: its own, not the module's `model`
        engine = JaxEngine(from_pretrained(tiny_dir("qwen3")), slots=2, max_len=128, weight_version="0")
        ids, params = prompt(6, 16), SamplingParams(max_new_tokens=6, temperature=0.0)
        before = await engine.generate(ids, params)
        perturbed = from_pretrained(tiny_dir("qwen3"))
        perturbed.lm_head[...] = perturbed.lm_head[...] * 1.5
        await engine.update_weights(str(publish_weights(perturbed, tmp_path, 2)), "2")
        after = await engine.generate(ids, params)
        await engine.close()
        return before, after, perturbed, ids

    before, after, perturbed, ids = run(publish())
    assert (before.weight_version, after.weight_version) == ("0", "2")
    np.testing.assert_allclose(after.logprobs, trainer_logprobs(perturbed, ids, after.output_ids, 1.0), atol=1e-4)
    assert not np.allclose(before.logprobs, after.logprobs)


def test_memory_release_and_resume(model):
    async def cycle():
        engine = JaxEngine(model, slots=1, max_len=64)
        params = SamplingParams(max_new_tokens=4, temperature=0.0)
        first = await engine.generate(prompt(7, 8), params)
        await engine.release_memory()
        assert engine.cache is None
        await engine.resume_memory()
        second = await engine.generate(prompt(7, 8), params)
        await engine.close()
        return first, second

    first, second = run(cycle())
    assert first.output_ids == second.output_ids


def test_bad_requests_are_refused_clearly(model):
    engine = JaxEngine(model, slots=1, max_len=32)
    with pytest.raises(ValueError, match="does not fit the engine's max_len 32"):
        run(engine.generate(prompt(8, 40), SamplingParams(max_new_tokens=4)))
    with pytest.raises(ValueError, match="input_ids is empty"):
        run(engine.generate([], SamplingParams(max_new_tokens=4)))
    with pytest.raises(ValueError, match="max_new_tokens must be >= 1"):
        SamplingParams(max_new_tokens=0)
    run(engine.close())


def test_chunked_prefill_equals_one_shot_prefill(model):
    ids, params = prompt(9, 70), SamplingParams(max_new_tokens=10, seed=5, **REFERENCE_SAMPLING)
    chunked = JaxEngine(model, slots=1, max_len=256, prefill_chunk=16)
    whole = JaxEngine(model, slots=1, max_len=256, prefill_chunk=256)
    a, b = run(chunked.generate(ids, params)), run(whole.generate(ids, params))
    assert a.output_ids == b.output_ids
    np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-5)
    run(chunked.close())
    run(whole.close())


def test_deterministic_mode_samples_independently_of_batching(model):
    """With deterministic=True a seeded request's tokens and log-probs do not depend on its neighbours or
    on cached prefixes: the property bitwise-resumable training rests on."""
    ids, params = prompt(11, 40), SamplingParams(max_new_tokens=12, seed=9, **REFERENCE_SAMPLING)

    async def alone_and_crowded():
        engine = JaxEngine(model, slots=4, max_len=128, deterministic=True)
        alone = await engine.generate(ids, params)
        others = [engine.generate(prompt(20 + i, 10 + 13 * i), SamplingParams(max_new_tokens=30, seed=i))
                  for i in range(3)]
        crowded, *_ = await asyncio.gather(engine.generate(ids, params), *others)
        await engine.close()
        return alone, crowded

    alone, crowded = run(alone_and_crowded())
    assert crowded.cached_tokens == 0
    assert alone.output_ids == crowded.output_ids and alone.logprobs == crowded.logprobs


def test_deterministic_sessions_reuse_their_own_prefix_whatever_else_runs(model):
    """Deterministic mode reuses a session's own cached turns, so a multi-turn episode does not prefill its
    conversation anew each turn, and still samples what it samples alone: with more sessions than slots,
    the others wait for a slot instead of taking the one holding the episode's conversation."""
    async def alone():
        engine = JaxEngine(model, slots=2, max_len=128, deterministic=True, decode_steps=4)
        result = await two_turns(engine, "episode", 5)
        await engine.close()
        return result

    async def crowded():
        engine = JaxEngine(model, slots=2, max_len=128, deterministic=True, decode_steps=4)
        mine, *others = await asyncio.gather(two_turns(engine, "episode", 5, pause_s=0.2),
                                             *(two_turns(engine, f"other-{i}", 40 + i) for i in range(4)))
        await engine.close()
        return mine, others

    (first, second), ((first_c, second_c), others) = run(alone()), run(crowded())
    assert second.cached_tokens == second_c.cached_tokens == 20 + 8 - 1  # all but the last sampled token
    assert first_c.cached_tokens == 0  # a new session reuses nothing, whatever an idle slot holds
    assert (first.output_ids, second.output_ids) == (first_c.output_ids, second_c.output_ids)
    assert (first.logprobs, second.logprobs) == (first_c.logprobs, second_c.logprobs)
    assert all(len(turn.output_ids) == 8 for pair in others for turn in pair)


def test_sessions_never_ended_cannot_stall_a_deterministic_engine(model, caplog):
    """A client that never ends its sessions (more of them than slots) still gets answers: the least
    recently used idle session loses its slot, with a warning that its reuse now depends on scheduling."""
    sampling = SamplingParams(max_new_tokens=4, seed=1, **REFERENCE_SAMPLING)

    async def scenario():
        engine = JaxEngine(model, slots=1, max_len=64, deterministic=True, decode_steps=4, session_hold_s=0.5)
        first = await engine.generate(prompt(1, 10), sampling, session_id="a")
        await engine.generate(prompt(2, 10), sampling, session_id="b")  # "a" still owns the only slot
        again = await engine.generate(prompt(1, 10) + list(first.output_ids), sampling, session_id="a")
        await engine.close()
        return again

    again = run(scenario())
    assert len(again.output_ids) == 4 and again.cached_tokens == 0
    evictions = [r.getMessage() for r in caplog.records if "loses its cached prefix" in r.getMessage()]
    assert len(evictions) == 2 and "session a loses" in evictions[0] and "session b loses" in evictions[1]


def test_tokens_per_decode_call_change_nothing_sampled(model):
    """decode_steps only groups tokens into calls: seeded requests of different lengths, some ending on a
    stop token mid-call, sample the same tokens one call per token or sixteen (log-probs to float rounding:
    a loop body fuses differently from a single step)."""
    prompts = [prompt(30 + i, 6 + 11 * i) for i in range(5)]

    def outputs(decode_steps: int, stops: tuple[int, ...] = ()):
        engine = JaxEngine(model, slots=4, max_len=128, decode_steps=decode_steps)
        requests = [(ids, SamplingParams(max_new_tokens=10 + 9 * i, seed=i, stop_token_ids=stops,
                                         **REFERENCE_SAMPLING)) for i, ids in enumerate(prompts)]
        results = run(generate_all(engine, requests))
        run(engine.close())
        return [(r.output_ids, r.logprobs, r.finish_reason) for r in results]

    unstopped = outputs(16)
    stops = (unstopped[1][0][4], unstopped[3][0][7])  # two requests end mid-call on a stop token
    one_by_one, grouped = outputs(1, stops), outputs(16, stops)
    assert [(ids, reason) for ids, _, reason in grouped] == [(ids, reason) for ids, _, reason in one_by_one]
    for (_, a, _), (_, b, _) in zip(grouped, one_by_one, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)
    assert {reason for _, _, reason in one_by_one} == {"stop", "length"}


def test_padding_rows_leave_an_idle_slots_cached_prefix_intact(model):
    """Busy rows run padded to a power of two with idle slots; their writes must land past the cache's end,
    or a conversation cached in that idle slot would resume from corrupted keys."""
    greedy = SamplingParams(max_new_tokens=8, temperature=0.0)

    async def episode():
        engine = JaxEngine(model, slots=4, max_len=256)
        first_prompt = prompt(3, 30)
        first = await engine.generate(first_prompt, greedy)
        # three others decode together: padded to four rows, the fourth is the idle slot caching `first`
        await asyncio.gather(*(engine.generate(prompt(40 + i, 12), SamplingParams(max_new_tokens=40, seed=i))
                               for i in range(3)))
        follow_up = first_prompt + list(first.output_ids) + prompt(4, 6)
        second = await engine.generate(follow_up, greedy)
        fresh = JaxEngine(model, slots=1, max_len=256)
        uncached = await fresh.generate(follow_up, greedy)
        await engine.close()
        await fresh.close()
        return second, uncached

    second, uncached = run(episode())
    assert second.cached_tokens == 30 + 8 - 1
    assert second.output_ids == uncached.output_ids
    np.testing.assert_allclose(second.logprobs, uncached.logprobs, atol=1e-5)


def test_hybrid_state_ends_where_the_sequence_ends_and_is_reused_whole(tiny_dir):
    """Gated DeltaNet state cannot be rewound: a turn that stops mid-call must leave its slot's state at the
    stop (what its row sampled after is not fed), a follow-up extending the whole conversation resumes from it,
    and a prompt sharing only part of it starts afresh."""
    model = from_pretrained(tiny_dir("qwen3_5"))
    first_prompt = prompt(5, 25)
    probe = JaxEngine(model, slots=1, max_len=256)
    unstopped = run(probe.generate(first_prompt, SamplingParams(max_new_tokens=12, temperature=0.0))).output_ids
    run(probe.close())
    stop = unstopped[5]
    greedy = SamplingParams(max_new_tokens=12, temperature=0.0, stop_token_ids=(stop,))

    async def episode():
        engine = JaxEngine(model, slots=2, max_len=256, decode_steps=16)
        first = await engine.generate(first_prompt, greedy)
        follow_up = first_prompt + list(first.output_ids) + prompt(6, 7)
        second = await engine.generate(follow_up, greedy)
        diverging = await engine.generate(first_prompt[:10] + prompt(7, 5), greedy)
        fresh = JaxEngine(model, slots=1, max_len=256)
        uncached = await fresh.generate(follow_up, greedy)
        await engine.close()
        await fresh.close()
        return first, second, diverging, uncached

    first, second, diverging, uncached = run(episode())
    assert first.finish_reason == "stop" and first.output_ids[-1] == stop and len(first.output_ids) < 12
    assert second.cached_tokens == len(first_prompt) + len(first.output_ids) - 1
    assert second.output_ids == uncached.output_ids
    # the cached state came through recurrent decode steps, the uncached one through chunked prefill: float32
    # sums in another order (1.3e-5 apart on a log-prob of -4.9 seen here)
    np.testing.assert_allclose(second.logprobs, uncached.logprobs, rtol=1e-5, atol=1e-5)
    assert diverging.cached_tokens == 0
