"""The request every attack on the shared tiny `tbjax.serve` (tests/faults/conftest.py's `tiny_server`) must leave
answered as before: a greedy /generate with log-probs, and its answer read off a server."""

from __future__ import annotations

from typing import Any

import httpx

GREEDY = {"input_ids": list(range(5, 17)), "sampling_params": {"max_new_tokens": 8, "temperature": 0.0},
          "return_logprob": True}


def greedy_answer(url: str) -> Any:
    """The server's tokens and log-probs for GREEDY (what an attack must leave unchanged)."""
    response = httpx.post(f"{url}/generate", json=GREEDY, timeout=120)
    assert response.status_code == 200, response.text
    return response.json()["output_ids"], response.json()["meta_info"]["output_token_logprobs"]
