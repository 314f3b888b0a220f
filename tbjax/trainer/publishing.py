"""A GRPO step's new weights reaching the rollout engine: published by the run's backend (tbjax.trainer.backends:
every process takes part, and the driver's half makes the engine serve them), then verified there by the weight
probe (tbjax.trainer.weight_probe). The synchronous and eager loops do both at once (`publish`, then `verify`);
exact asynchronous mode publishes now and hands serving and verifying to the batch producer as a Publication
(`publish_later`)."""

from __future__ import annotations

from rollout.batch_producer import Publication
from tbjax.trainer.run_setup import Run
from tbjax.trainer.weight_probe import Expected


async def publish(run: Run, version: str) -> None:
    """Publishes the run's weights as `version` and has the engine serve them, then takes the weight probe's
    expected log-probs: the trainer's under them, while its parameters are on the devices (colocated runs move
    them to host memory right after)."""
    await run.backend.publish(run.trainer, run.state.params, version)()
    if run.weight_probe is not None:
        run.weight_probe.expect(run.state.params, version)


def publish_later(run: Run, version: str) -> Publication:
    """Exact mode: `publish`'s collective part now (the weights published, the probe's expected log-probs
    taken), and what makes the engine serve them and verifies that it does, for the producer to call later."""
    serve = run.backend.publish(run.trainer, run.state.params, version)
    expected = run.weight_probe.expect(run.state.params, version) if run.weight_probe is not None else None

    async def served_and_verified() -> dict[str, float]:
        await serve()
        return await verify(run, expected)
    return served_and_verified


async def verify(run: Run, expected: Expected | None = None) -> dict[str, float]:
    """The driver has the engine score the probe (against `expected`, else the last publish's): its largest
    difference, or a WeightProbeError."""
    engine = run.backend.engine
    if run.weight_probe is None or engine is None:
        return {}
    expected = expected or run.weight_probe.expected
    metrics = {"weight_probe_max_diff": await run.weight_probe.verify(engine, expected)}
    if expected is not None and expected.base_gap is not None:  # LoRA: how far the served adapter takes the
        metrics["weight_probe_base_gap"] = expected.base_gap  # probe from the base
    return metrics
