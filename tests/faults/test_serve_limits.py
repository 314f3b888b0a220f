"""Sizes a server must bound: a small body that recompiled decoding for everyone, and large ones it parsed.

On the old `python -m tbjax.serve`, each new power-of-two length of `stop_token_ids` (33, 65, 129 ids, bodies
under 1 KB) compiled decoding anew and held every request in flight for 14-16 s; the list had no cap (2M ids
were accepted). No body had a size limit: 200 MB of whitespace was parsed and a 100 MB `rid` echoed back.
Now stop lists are padded to one width (`MAX_STOP_TOKENS`, more is a 400), bodies past the limit are a 413
before they are read, and names (rid, weight version) are bounded.

One real server (`tiny_server`: the SGLang launcher starting `python -m tbjax.serve`) on 127.0.0.1 serves a
tiny random Qwen3 written by transformers; one in-process JaxEngine counts the decoding compiles.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from rollout.engines.protocol import SamplingParams
from tbjax.engine.device_step import decode
from tbjax.engine.jax_engine import JaxEngine
from tbjax.engine.request_checks import MAX_STOP_TOKENS
from tbjax.models import from_pretrained
from tests.faults.serve_support import GREEDY, greedy_answer

PROMPT = GREEDY["input_ids"]


def test_a_body_past_the_limit_is_413_unread_declared_or_chunked(tiny_server) -> None:
    url, reference = tiny_server
    whitespace = b" " * 4_000_000 + b'{"input_ids": [5, 6]}'
    declared = httpx.post(f"{url}/generate", content=whitespace, timeout=60)
    chunked = httpx.post(f"{url}/generate", content=iter([whitespace[i:i + 65536]
                                                          for i in range(0, len(whitespace), 65536)]), timeout=60)
    for response in (declared, chunked):
        assert response.status_code == 413 and "byte limit" in response.json()["error"]
    assert greedy_answer(url) == reference


@pytest.mark.parametrize(("body", "field", "rule"), [
    ({**GREEDY, "rid": "r" * 10_000}, "rid", "string_too_long"),
    ({**GREEDY, "sampling_params": {"stop_token_ids": [7] * (MAX_STOP_TOKENS + 1)}},
     "sampling_params.stop_token_ids", "too_long"),
])
def test_long_names_and_stop_lists_are_400(tiny_server, body, field, rule) -> None:
    url, reference = tiny_server
    response = httpx.post(f"{url}/generate", json=body, timeout=60)
    assert response.status_code == 400
    assert any(e["field"] == field and e["rule"] == rule for e in response.json()["errors"])
    assert greedy_answer(url) == reference


def test_stop_lists_of_any_allowed_length_share_one_compiled_decode(tiny_qwen3_dir) -> None:
    engine = JaxEngine(from_pretrained(tiny_qwen3_dir), slots=2, max_len=64, decode_steps=4)

    async def generate_with(stops: int) -> None:
        await engine.generate(PROMPT, SamplingParams(max_new_tokens=8, temperature=0.0,
                                                     stop_token_ids=tuple(range(200, 200 + stops))))

    try:
        asyncio.run(generate_with(1))
        compiled = decode._cache_size()
        for stops in (2, 5, 17, 33 - 1, MAX_STOP_TOKENS):
            asyncio.run(generate_with(stops))
        assert decode._cache_size() == compiled
        with pytest.raises(ValueError, match=f"at most {MAX_STOP_TOKENS}"):
            asyncio.run(generate_with(MAX_STOP_TOKENS + 1))
    finally:
        asyncio.run(engine.close())
