"""What the engine tests and the sessions-over-HTTP tests share: seeded prompts, the seed paper's rollout
sampling, and a session's two turns, played on any Engine (the in-process JaxEngine or the SGLang client)."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np

from rollout.engines.protocol import Engine, Generation, SamplingParams

REFERENCE_SAMPLING: dict[str, Any] = dict(temperature=1.0, top_k=20, top_p=0.95)  # the seed paper's rollout settings


def prompt(seed: int, length: int) -> list[int]:
    return [int(t) for t in np.random.default_rng(seed).integers(3, 518, size=length)]


async def two_turns(engine: Engine, session: str, seed: int, pause_s: float = 0.0) -> tuple[Generation, Generation]:
    """A session's two turns (the second repeats the first with its answer and a reply), then its end."""
    first_prompt = prompt(seed, 20)
    first = await engine.generate(first_prompt, SamplingParams(max_new_tokens=8, seed=seed, **REFERENCE_SAMPLING),
                                  session_id=session)
    await asyncio.sleep(pause_s)  # a tool runs: other sessions may take every free slot meanwhile
    second_prompt = first_prompt + list(first.output_ids) + prompt(seed + 100, 5)
    second = await engine.generate(second_prompt, SamplingParams(max_new_tokens=8, seed=seed + 1,
                                                                 **REFERENCE_SAMPLING), session_id=session)
    await engine.end_session(session)
    return first, second
