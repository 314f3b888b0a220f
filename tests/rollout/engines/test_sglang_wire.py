"""The /generate request and response format, without a server (SGLang's native API)."""

import math

import pytest

from rollout.engines.protocol import SamplingParams
from rollout.engines.sglang_wire import ProtocolError, generate_payload, parse_generation


def response(ids, entries, finish, **meta):
    return {"output_ids": ids, "meta_info": {"output_token_logprobs": entries, "finish_reason": finish, **meta}}


def test_payload_sends_every_sampling_value_and_no_server_default():
    sampling = SamplingParams(max_new_tokens=64, temperature=1.0, top_p=0.95, top_k=20, stop_token_ids=(151645,))
    payload = generate_payload([1, 2], sampling, "r1")
    assert payload == {
        "input_ids": [1, 2], "rid": "r1", "return_logprob": True, "logprob_start_len": -1, "stream": False,
        "sampling_params": {
            "max_new_tokens": 64, "temperature": 1.0, "top_p": 0.95, "top_k": 20, "min_p": 0.0, "stop": [],
            "stop_token_ids": [151645], "ignore_eos": False, "skip_special_tokens": False, "no_stop_trim": True,
            "repetition_penalty": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0}}
    assert generate_payload([1], SamplingParams(max_new_tokens=1, seed=7), "r")["sampling_params"]["sampling_seed"] == 7


def test_parses_triples_with_null_text_and_token_counts():
    body = response([5, 6], [[-0.5, 5, None], [-1.5, 6, "x"]], {"type": "length"},
                    prompt_tokens=9, cached_tokens=4, weight_version="3")
    generation, missing = parse_generation(body, "default", 16)
    assert (generation.output_ids, generation.logprobs) == ((5, 6), (-0.5, -1.5))
    assert (generation.finish_reason, generation.weight_version, generation.prompt_tokens,
            generation.cached_tokens, missing) == ("length", "3", 9, 4, 0)


def test_trimmed_stop_token_is_restored_with_its_logprob_when_sent():
    body = response([5], [[-0.5, 5, None], [-0.25, 9, None]], {"type": "stop", "matched": 9})
    generation, missing = parse_generation(body, "v0", 16)
    assert generation.output_ids == (5, 9) and generation.logprobs == (-0.5, -0.25) and missing == 0
    assert generation.weight_version == "v0"  # the server did not report one


def test_trimmed_stop_token_without_logprob_is_nan_not_zero():
    generation, missing = parse_generation(response([5], [[-0.5, 5, None]], {"type": "stop", "matched": 9}), "v", 16)
    assert generation.output_ids == (5, 9) and missing == 1
    assert generation.logprobs[0] == -0.5 and math.isnan(generation.logprobs[1])


def test_repeated_cumulative_logprob_snapshots_keep_the_final_one():
    snapshots = [[-0.5, 5, None]] + [[-0.5, 5, None], [-1.5, 6, None], [-0.25, 9, None]]  # sglang-jax's
    generation, missing = parse_generation(response([5, 6], snapshots, {"type": "stop", "matched": 9}), "v", 16)
    assert generation.output_ids == (5, 6, 9) and generation.logprobs == (-0.5, -1.5, -0.25) and missing == 0


def test_stop_string_match_appends_nothing():
    generation, _ = parse_generation(response([5], [[-0.5, 5, None]], {"type": "stop", "matched": "</x>"}), "v", 16)
    assert generation.output_ids == (5,)


@pytest.mark.parametrize("body, problem", [
    (response([5, 6], [[-0.5, 5, None]], {"type": "length"}), "output_token_logprobs"),
    (response([5], [[-0.5, 8, None]], {"type": "length"}), "is for token 8"),
    (response([5], [[-0.5, 5, None], [-0.5, 8, None]], {"type": "length"}), "is for token 8"),
    (response([5], [[-0.5, 5, None]], {"type": "done"}), "finish_reason"),
    (response([5], [["x", 5, None]], {"type": "length"}), r"\[logprob, token_id, text\]"),
    ({"text": "hi"}, "meta_info"),
])
def test_malformed_responses_are_protocol_errors(body, problem):
    with pytest.raises(ProtocolError, match=problem):
        parse_generation(body, "v", 16)
