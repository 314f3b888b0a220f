"""The weight probe, which verifies each publish: does the engine serve the weights just published? After each
publish every engine replica scores a fixed probe sequence (teacher-forced log-probs,
`rollout.engines.protocol.Scorer`), and each must report the version just published and match the trainer's own
log-probs for the same sequence under the published parameters within a tolerance; otherwise the step fails with a
WeightProbeError naming the version, the replica and the largest difference.

A weight sync that goes wrong silently (a load from the wrong directory, a partial or stale load, a layout
or conversion bug, a perturbed copy) moves the probe's log-probs far beyond numerics. What the probe cannot
see is a difference below the tolerance: in bfloat16 one optimizer step may change the weights less than
that, so a replica that kept the previous step's weights is caught by the version it reports, not by its
log-probs. The probe is scored at temperature 1 on both sides (SGLang scores greedy requests untempered).

Under LoRA only the adapters are published, and a server that never applied them serves the base. So the
trainer also scores the probe with its adapters off, and `base_gap` says how far the published policy is
from the base on the probe: once it exceeds the tolerance, a replica that passes is serving the adapter.

The trainer's side is computed while its parameters are on the devices (inside the colocated hand-over's
publish, `expect`); the engines are asked once they serve again (`verify`, after the hand-over, when
colocated servers have their KV cache back).
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from rollout.engines.protocol import Scorer, TokenScores
from tbjax.trainer.packing import HEAD_INDEX, trained_positions
from tbjax.trainer.param_views import adapters_off
from tbjax.trainer.teacher_forced import TEACHER_FORCED_FIELDS, batch_on_mesh, replicated, trainer_logprobs
from tbjax.trainer.train_state import Params
from tbjax.trainer.update import GRPOTrainer

PROBE_LENGTH = 32
PROBE_SEED = 20240601
# float32 engine and trainer agree far within their tolerance; bfloat16 kernels of different engines (SGLang's
# against XLA's) differ most on a probe's unlikely tokens, so bfloat16's is wide (tbjax/README.md, Watch)
TOLERANCE = {"float32": 1e-4, "bfloat16": 0.1}


class WeightProbeError(RuntimeError):
    """An engine replica does not serve the weights just published."""


def probe_tokens(vocab_size: int, length: int = PROBE_LENGTH) -> list[int]:
    """The fixed probe: `length` token ids drawn once from a fixed seed (the same every step and run)."""
    return [int(t) for t in np.random.default_rng(PROBE_SEED).integers(0, vocab_size, length)]


def probe_batch(tokens: list[int], rows: int) -> dict[str, np.ndarray]:
    """The probe as one packed micro-batch [1, rows, len] (the same row `rows` times, so that the rows split
    evenly over the mesh's batch axes), every position but the last trained."""
    length = len(tokens)
    row = {"tokens": np.asarray(tokens), "positions": np.arange(length), "segments": np.ones(length),
           "targets": np.asarray([*tokens[1:], 0]), "mask": np.arange(length) < length - 1}
    arrays = {k: np.broadcast_to(v, (1, rows, length)).astype(np.int32) for k, v in row.items()}
    arrays[HEAD_INDEX] = trained_positions(arrays.pop("mask"), rows)
    return arrays


@dataclasses.dataclass(frozen=True)
class Expected:
    version: str
    logprobs: np.ndarray  # [len - 1] float32, the trainer's
    base_gap: float | None = None  # under LoRA: the largest difference from the base's (adapters off)


class WeightProbe:
    """The trainer's side of the probe (`expect`) and the check of every replica's against it (`verify`)."""

    def __init__(self, trainer: GRPOTrainer, vocab_size: int, tolerance: float) -> None:
        self.trainer, self.tolerance = trainer, tolerance
        self.tokens = probe_tokens(vocab_size)
        self.batch = probe_batch(self.tokens, trainer.rows_multiple)
        self.expected: Expected | None = None
        self._jitted_probe_logprobs = jax.jit(self._probe_logprobs, out_shardings=replicated(trainer))

    def _probe_logprobs(self, params: Params, frozen: Params, batch: dict[str, jax.Array]) -> jax.Array:
        micro = {k: batch[k][0] for k in TEACHER_FORCED_FIELDS}
        return trainer_logprobs(self.trainer, params, frozen, micro, 1.0)[0, :len(self.tokens) - 1]

    def expect(self, params: Params, version: str) -> Expected:
        """The trainer's probe log-probs under `params`, the parameters published as `version` (kept as
        `expected`, what `verify` checks by default). Every process calls it (the parameters are sharded over
        all of them)."""
        batch = batch_on_mesh(self.trainer, self.batch)
        logprobs = np.asarray(jax.device_get(self._jitted_probe_logprobs(params, self.trainer.frozen, batch)))
        gap = None
        if self.trainer.lora:
            base = np.asarray(jax.device_get(
                self._jitted_probe_logprobs(adapters_off(params), self.trainer.frozen, batch)))
            gap = float(np.max(np.abs(logprobs - base)))
        self.expected = Expected(version, logprobs, gap)
        return self.expected

    async def verify(self, engine: Scorer, expected: Expected | None = None) -> float:
        """Every replica's probe log-probs against `expected` (default: the last `expect`'s; a version published
        earlier and served later brings its own); the largest difference, or WeightProbeError."""
        expected = expected or self.expected
        if expected is None:
            raise RuntimeError("WeightProbe.verify before expect: nothing was published")
        return max([self._compare(scores, expected) for scores in await engine.score(self.tokens)], default=0.0)

    def _compare(self, scores: TokenScores, expected: Expected) -> float:
        if scores.weight_version != expected.version:
            raise WeightProbeError(f"weight version {expected.version} was published, but engine replica "
                                   f"{scores.source} serves version {scores.weight_version}: the publish did not "
                                   "reach it")
        difference = float(np.max(np.abs(np.asarray(scores.logprobs, np.float32) - expected.logprobs)))
        if not difference <= self.tolerance:  # NaN fails too
            raise WeightProbeError(f"weight version {expected.version}: engine replica {scores.source} scores the "
                                   f"weight probe up to {difference:.3g} away from the trainer (tolerance "
                                   f"{self.tolerance:g}, train.weight_probe_tolerance): it does not serve the weights "
                                   "just published")
        return difference
