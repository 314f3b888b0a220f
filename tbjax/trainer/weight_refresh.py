"""A GRPO step's new weights on their way to the rollout engine: staged where the engine takes them from (a
copy for the embedded engine, published files for servers: collective, every process takes part), made to be
served by the driver, and checked there by the refit probe (tbjax.trainer.refit_check). The synchronous and
eager loops do all of it at once (`refresh`, then `verify_refit`); exact asynchronous mode stages now and
hands the rest to the batch producer as a Landing (`staged_refresh`)."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable

from flax import nnx

from rollout.batch_producer import Landing
from rollout.engines.sglang import SGLangEngine
from tbjax.engine.jax_engine import JaxEngine
from tbjax.models.hf.versions import publish_adapter, publish_weights
from tbjax.models.lora import adapters_spec
from tbjax.trainer.lockstep import engine_model
from tbjax.trainer.refit_check import Expected
from tbjax.trainer.run_setup import Run


def stage(run: Run, version: str) -> Callable[[], Awaitable[None]]:
    """Puts the new weights where the engine takes them from: a copy on the driver for the embedded engine,
    published files for servers. Every process takes part (gathers are collective, and host replicas are
    written by every process). Returns the driver's call that makes the engine serve them (a no-op elsewhere)."""
    rollout = run.config.rollout
    if rollout.engine == "embedded":
        model = engine_model(run.trainer, run.state.params, copy=rollout.max_staleness > 0)
        if isinstance(run.engine, JaxEngine):
            return functools.partial(run.engine.set_state, nnx.state(model), version)
        return _nothing
    root = rollout.publish_root(run.config.run.name, run.directory)
    policy = run.trainer.model_for(run.state.params)
    if run.trainer.lora:  # the adapters alone reach the servers
        path = publish_adapter(policy, adapters_spec(policy), root / "adapters", version,
                               base_model=str(run.model_dir), replicas=rollout.publish_replicas,
                               keep=rollout.publish_keep)
        if isinstance(run.engine, SGLangEngine):
            return functools.partial(run.engine.update_adapter, str(path), version)
    else:
        publish = run.deltas.publish if run.deltas is not None else publish_weights  # a delta or a whole version
        path = publish(policy, root / "weights", version, tokenizer_dir=run.model_dir,
                       replicas=rollout.publish_replicas, keep=rollout.publish_keep)
        if run.engine is not None:
            return functools.partial(run.engine.update_weights, str(path), version)
    return _nothing


async def _nothing() -> None:
    """What a process without the engine does to make it serve new weights."""


async def refresh(run: Run, version: str) -> None:
    """Publishes the new weights, then takes the refit probe's expected log-probs: the trainer's under them,
    while its parameters are on the devices (colocated runs move them to host memory right after)."""
    await stage(run, version)()
    if run.refit is not None:
        run.refit.expect(run.state.params, version)


async def staged_refresh(run: Run, version: str) -> Landing:
    """Exact mode: `refresh`'s collective part now (the weights staged, the probe's expected log-probs taken),
    and what makes the engine serve them and checks that it does, for the producer to land later."""
    serve = stage(run, version)
    expected = run.refit.expect(run.state.params, version) if run.refit is not None else None

    async def landing() -> dict[str, float]:
        await serve()
        return await verify_refit(run, expected)
    return landing


async def verify_refit(run: Run, expected: Expected | None = None) -> dict[str, float]:
    """The driver has the engine score the probe (against `expected`, else the last publish's): its largest
    difference, or a RefitError."""
    if run.refit is None or run.engine is None:
        return {}
    expected = expected or run.refit.expected
    metrics = {"refit_probe_max_diff": await run.refit.verify(run.engine, expected)}
    if expected is not None and expected.base_gap is not None:  # LoRA: how far the served adapter takes the
        metrics["refit_probe_base_gap"] = expected.base_gap  # probe from the base
    return metrics
