"""`rollout.engine=sglang`: SGLang-compatible servers (SGLang, sglang-jax, tbjax.serve) at rollout.sglang_urls,
driven by the driver's SGLangEngine client. Publishing writes an HF directory (or, under LoRA, a PEFT adapter)
under rollout.publish_dir, every process taking part (host replicas are written by every process), and the
driver has every server load it; the servers start from the base checkpoint they were launched with.
"""

from __future__ import annotations

import functools
from pathlib import Path

from rollout.engines.sglang import SGLangEngine
from rollout.engines.sglang_settings import CUDA_GRAPH, KV_CACHE, WEIGHTS
from tbjax.config import Config
from tbjax.models.hf.delta import DeltaPublisher
from tbjax.models.hf.versions import publish_adapter, publish_weights
from tbjax.models.lora import adapters_spec
from tbjax.parallel.distributed import is_driver
from tbjax.sections.rollout import RolloutSection
from tbjax.trainer.backends.protocol import MemoryPart, Serve, nothing
from tbjax.trainer.train_state import Params
from tbjax.trainer.update import GRPOTrainer

MEMORY_TAGS = {"weights": [WEIGHTS], "cache": [KV_CACHE, CUDA_GRAPH]}


class SGLangBackend:
    starts_from_base = True

    def __init__(self, engine: SGLangEngine | None, rollout: RolloutSection, root: Path, model_dir: Path) -> None:
        self.engine, self.rollout, self.root, self.model_dir = engine, rollout, root, model_dir
        # rollout.publish_delta: whole versions every publish_full_every publishes, only changes between them
        self.deltas = DeltaPublisher(rollout.publish_delta, rollout.publish_full_every) \
            if rollout.publish_delta != "off" else None

    def publish(self, trainer: GRPOTrainer, params: Params, version: str) -> Serve:
        """Writes the version under the publish root (the adapters alone under LoRA); the driver's call has
        every server load it."""
        rollout, policy = self.rollout, trainer.model_for(params)
        if trainer.lora:
            path = publish_adapter(policy, adapters_spec(policy), self.root / "adapters", version,
                                   base_model=str(self.model_dir), replicas=rollout.publish_replicas,
                                   keep=rollout.publish_keep)
            load = None if self.engine is None else self.engine.update_adapter
        else:
            write = self.deltas.publish if self.deltas is not None else publish_weights
            path = write(policy, self.root / "weights", version, tokenizer_dir=self.model_dir,
                         replicas=rollout.publish_replicas, keep=rollout.publish_keep)
            load = None if self.engine is None else self.engine.update_weights
        return nothing if load is None else functools.partial(load, str(path), version)

    async def release_memory(self) -> None:
        if self.engine is not None:
            await self.engine.release_memory()

    async def resume_memory(self, part: MemoryPart) -> None:
        if self.engine is not None:
            await self.engine.resume_memory(MEMORY_TAGS[part])

    async def close(self) -> None:
        if self.engine is not None:
            await self.engine.close()


def build(config: Config, trainer: GRPOTrainer, params: Params, step: int, model_dir: Path) -> SGLangBackend:
    """The driver's client of the configured servers (None elsewhere), reporting weight version `step`; SGLang's
    answers are checked against the policy's vocabulary."""
    rollout = config.rollout
    engine = SGLangEngine.from_urls(
        rollout.sglang_urls, weight_version=str(step), vocab_size=trainer.model_for(params).config.vocab_size,
        pause_mode="retract" if rollout.max_staleness else "abort",
        flush_cache=rollout.swap_prefix_cache == "flush") if is_driver() else None
    return SGLangBackend(engine, rollout, rollout.publish_root(config.run.name, config.run.directory), model_dir)
