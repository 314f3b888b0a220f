"""Hypothesis strategies for POST /generate bodies of `tbjax.serve`, as a client could send them.

Four kinds: a valid body (cheap to answer: at most 12 prompt tokens, at most 4 new ones),
with SGLang fields this server ignores and fields nobody knows beside it; a valid body broken at one or two
fields by a value that breaks that field's rule (it must be refused); a valid body with one field replaced by
any hostile JSON value (`tests.faults.hostile_support`: it may happen to be valid); and bytes that are no JSON object
(broken JSON, other JSON values, nesting past any parser's limit).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st
from pydantic_core import from_json

from tbjax.engine.http_bodies import INT32_MAX, MAX_TEMPERATURE, MIN_TEMPERATURE
from tests.faults.hostile_support import json_values, long_lists, texts

SGLANG_IGNORED = ("text", "stream", "return_text_in_logprobs", "custom_logit_processor")
NOT_AN_OBJECT = (b"", b"{", b'{"input_ids": [5, 6]', b"[]", b"null", b'"x"', b"5", b"NaN", b"\xff\xfe",
                 b"{'input_ids': [5]}", b'{"input_ids": [5, 6]}}', b'{"input_ids": [5], "rid": "\\ud800"}',
                 b"[" * 10_000 + b"]" * 10_000, b'{"a":' * 5_000 + b"1" + b"}" * 5_000)


@dataclass(frozen=True)
class Body:
    """What is sent, and what must come back: True 200, False 400, None either (a hostile value may be valid)."""

    content: bytes
    valid: bool | None


def _sent(body: dict[str, Any], valid: bool | None) -> Body:
    """`body` as JSON. One its parser (pydantic's, the server's) refuses, for a lone UTF-16 surrogate anywhere in
    it (the key or value of a field nobody knows included), must be refused."""
    content = json.dumps(body).encode()
    try:
        from_json(content)
    except ValueError:
        return Body(content, False)
    return Body(content, valid)


def _breaking(vocab_size: int, max_len: int) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
    """(top-level field -> values breaking its rule, sampling_params field -> values breaking its rule)."""
    nan, inf = float("nan"), float("inf")
    top = {
        "input_ids": [[], None, "5 6", [5, "6"], [5, 1.0], [5, True], [5, -1], [5, vocab_size], [5, 10**6],
                      [5, 2**31], [5, 2**63], [5, 10**30], [[5]], {"0": 5}, [5] * max_len],
        "sampling_params": ["abc", [], 5, True],
        "rid": [5, [], {}, True],
        "return_logprob": ["yes", 1, 0.0],
        "logprob_start_len": [-2, 1.5, "0", 2**31, True],
        # a server started without --enable-lora refuses any adapter name: it cannot run the request as asked
        "lora_path": ["policy-v1", "", 5, [], True, "x" * 300],
    }
    sampling = {
        "max_new_tokens": [0, -1, 2**31, 10**30, 1.5, "4", True, nan],
        "temperature": [-0.1, 1e-9, 1e7, nan, inf, -inf, "0.5", True],
        "top_p": [0, -0.5, 1.5, nan, inf, "1"],
        "top_k": [0, -2, 2**31, 2**40, 1.5, "20", True],
        "min_p": [-0.1, 1.0, 2, nan, inf],
        "stop_token_ids": ["ab", 5, [vocab_size], [-1], [1.5], ["7"], [[7]], [2**40]],
        "sampling_seed": ["abc", 1.5, 2**64, -(2**63) - 1, True, [1], nan],
    }
    return top, sampling


def valid_bodies(vocab_size: int) -> st.SearchStrategy[dict[str, Any]]:
    token = st.integers(0, vocab_size - 1)
    sampling = st.fixed_dictionaries({"max_new_tokens": st.integers(1, 4)}, optional={
        "temperature": st.sampled_from([0.0, MIN_TEMPERATURE, MAX_TEMPERATURE])
        | st.floats(MIN_TEMPERATURE, MAX_TEMPERATURE),
        "top_p": st.floats(0, 1, exclude_min=True),
        "top_k": st.sampled_from([-1, 1, INT32_MAX]) | st.integers(1, 64),
        "min_p": st.floats(0, 1, exclude_max=True),
        "stop_token_ids": st.lists(token, max_size=3),
        "sampling_seed": st.integers(-(2**63), 2**64 - 1),
    })
    unknown = st.dictionaries(texts().map("x-{}".format), json_values(), max_size=2)  # no field of SGLang's
    prompt = st.lists(token, min_size=1, max_size=12)
    body = st.fixed_dictionaries({"input_ids": prompt, "sampling_params": sampling}, optional={
        "rid": st.text(max_size=40), "return_logprob": st.booleans(),
        "logprob_start_len": st.integers(-1, 16), **dict.fromkeys(SGLANG_IGNORED, json_values())})
    return st.builds(lambda known, extra: {**extra, **known}, body, unknown)


@st.composite
def generate_bodies(draw: st.DrawFn, vocab_size: int, max_len: int) -> Body:
    """Any of the four kinds (module docstring), for a server of `vocab_size` tokens and `max_len` cache rows."""
    kind = draw(st.sampled_from(["valid", "broken", "replaced", "not_an_object"]))
    if kind == "not_an_object":
        other = draw(st.sampled_from(NOT_AN_OBJECT) | json_values().map(lambda v: json.dumps(v).encode()))
        return Body(other, None if other.startswith(b"{") and b"input_ids" in other else False)
    body = draw(valid_bodies(vocab_size))
    if kind == "valid":
        return _sent(body, True)
    top, sampling = _breaking(vocab_size, max_len)
    if kind == "broken":
        for _ in range(draw(st.integers(1, 2))):
            table, target = draw(st.sampled_from([(top, body), (sampling, body["sampling_params"])]))
            name = draw(st.sampled_from(sorted(table)))
            if isinstance(target, dict):  # an earlier break may have replaced sampling_params
                target[name] = draw(st.sampled_from(table[name]))
        return _sent(body, False)
    table, target = draw(st.sampled_from([(top, body), (sampling, body["sampling_params"])]))
    target[draw(st.sampled_from(sorted(table)))] = draw(json_values() | long_lists())
    return _sent(body, None)
