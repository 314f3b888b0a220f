"""`rollout.engine=replay`: episodes replayed from generations another run's engine recorded, with no model served.

What it is for: training again on exactly the tokens an earlier engine sampled (to bisect a divergence between
two versions of the update, or to study the objective on fixed rollouts) without serving anything. The recording
is `<run directory>/replay.jsonl`, one generation a line: `input_ids`, `output_ids`, `logprobs`, `finish_reason`
and `weight_version`, as `Generation` holds them. A request is answered by the next recorded generation for the
same prompt tokens (episodes sharing a prompt, as a group's first turns do, take them in recording order); a prompt
with none left is the engine's failure (a system error, refilled, never scored). Publishing changes nothing the
replay serves: each generation reports the version it was recorded under, so staleness checks see its age.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Sequence
from pathlib import Path
from typing import get_args

from rollout.engines.protocol import EngineError, FinishReason, Generation, SamplingParams, TokenScores
from tbjax.config import Config
from tbjax.parallel.distributed import is_driver
from tbjax.trainer.backends.protocol import MemoryPart, Serve, nothing
from tbjax.trainer.train_state import Params
from tbjax.trainer.update import GRPOTrainer

RECORDING = "replay.jsonl"


class ReplayEngine:
    """The Engine protocol over recorded generations, keyed by their prompt tokens."""

    def __init__(self, generations: Sequence[tuple[Sequence[int], Generation]]) -> None:
        self._left: dict[tuple[int, ...], collections.deque[Generation]] = collections.defaultdict(collections.deque)
        for input_ids, generation in generations:
            self._left[tuple(input_ids)].append(generation)

    async def generate(self, input_ids: Sequence[int], sampling: SamplingParams, *,
                       session_id: str | None = None) -> Generation:
        left = self._left.get(tuple(input_ids))
        if not left:
            raise EngineError(f"no recorded generation is left for this prompt of {len(input_ids)} tokens: the "
                              f"replay ({RECORDING}) holds none that an episode of this run asks for")
        return left.popleft()

    async def end_session(self, session_id: str) -> None:
        """Nothing is kept per session."""

    async def score(self, input_ids: Sequence[int]) -> list[TokenScores]:
        raise EngineError("a replay scores nothing (it serves no model): set train.weight_probe=false")

    async def health(self) -> bool:
        return True

    async def close(self) -> None:
        self._left.clear()


class ReplayBackend:
    starts_from_base = False  # it serves what was recorded, whatever the step

    def __init__(self, engine: ReplayEngine | None) -> None:
        self.engine = engine

    def publish(self, trainer: GRPOTrainer, params: Params, version: str) -> Serve:
        return nothing

    async def release_memory(self) -> None:
        """A replay holds no device memory."""

    async def resume_memory(self, part: MemoryPart) -> None:
        """A replay holds no device memory."""

    async def close(self) -> None:
        if self.engine is not None:
            await self.engine.close()


def read_recording(path: Path) -> list[tuple[list[int], Generation]]:
    """The recorded generations of `path`, in order; a missing or malformed file is an error naming it."""
    if not path.is_file():
        raise FileNotFoundError(f"rollout.engine=replay replays the generations recorded in {path}, and there is no "
                                f"such file: write one ({RECORDING}: one JSON generation a line) or choose another "
                                "rollout.engine")
    generations = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        try:
            record = json.loads(line)
            if record["finish_reason"] not in get_args(FinishReason):
                raise ValueError(f"finish_reason {record['finish_reason']!r} is none of {get_args(FinishReason)}")
            generations.append((list(record.pop("input_ids")), Generation(
                output_ids=tuple(record["output_ids"]), logprobs=tuple(record["logprobs"]),
                finish_reason=record["finish_reason"], weight_version=str(record["weight_version"]),
                prompt_tokens=int(record.get("prompt_tokens", 0)))))
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise ValueError(f"{path}:{number}: not a recorded generation ({type(error).__name__}: {error}); each "
                             "line holds input_ids, output_ids, logprobs, finish_reason and weight_version") from None
    return generations


def build(config: Config, trainer: GRPOTrainer, params: Params, step: int, model_dir: Path) -> ReplayBackend:
    """The driver replays the run directory's recording; the other processes hold no engine."""
    recording = config.run.directory / RECORDING
    return ReplayBackend(ReplayEngine(read_recording(recording)) if is_driver() else None)
