"""The sections of how episodes are played: the engine that samples them (`rollout`), the simulated user
(`user`), one episode's limits and sampling (`episode`) and how episodes are grouped into a step's batch
(`groups`). `episode` and `groups` are rollout's own EpisodeConfig and GroupConfig, validated as sections."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

from pydantic import ConfigDict, NonNegativeInt, PositiveInt, model_validator
from pydantic.dataclasses import dataclass

from envs.chat_endpoint import ChatEndpointConfig
from rollout.episode import EpisodeConfig
from rollout.groups import GroupConfig
from tbjax.sections.base import Section

EngineName = Literal["embedded", "sglang", "replay"]


@dataclasses.dataclass(frozen=True)
class EngineTraits:
    """What the config's checks must know of a rollout backend (tbjax.trainer.backends.<name>_backend) before
    anything heavy is imported."""

    in_process: bool  # holds whole episodes in its own sequences and takes the trainer's parameters in memory
    servers: bool  # serves from rollout.sglang_urls: weights are published as files, the GPUs can be shared
    scores: bool = True  # scores the weight probe (train.weight_probe)


ENGINES: dict[EngineName, EngineTraits] = {
    "embedded": EngineTraits(in_process=True, servers=False),
    "sglang": EngineTraits(in_process=False, servers=True),
    "replay": EngineTraits(in_process=False, servers=False, scores=False),
}

# how and where weights reach the servers, not what is trained
PUBLISH_SETTINGS = ("publish_dir", "publish_replicas", "publish_keep", "publish_delta", "publish_full_every")


class RolloutSection(Section):
    # sglang: rollouts from the servers in sglang_urls; replay: generations recorded in <run>/replay.jsonl
    engine: EngineName = "embedded"
    sglang_urls: list[str] = []
    slots: int = 16  # embedded engine: concurrent sequences
    max_len: int = 32_768  # embedded engine: tokens per sequence, at least the episode's token budget
    prefill_chunk: int = 512
    # embedded engine: tokens each decode call samples per row. Fewer waste less after a row stops mid-call
    # and let finished turns' next requests in sooner; more pay the per-call cost less often
    decode_steps: PositiveInt = 16
    deterministic: bool = False  # embedded engine: rollouts independent of batching (bitwise resume), slower
    tool_call_format: Literal["hermes", "qwen3_xml"] = "hermes"
    seed: int = 0  # sampling seeds derive from it, the step and the episode
    # colocated: the SGLang servers share the trainer's GPUs and the two hand them over around each update
    # (tbjax.trainer.handover); disaggregated: the servers have GPUs of their own and nothing is handed over.
    placement: Literal["disaggregated", "colocated"] = "disaggregated"
    # asynchronous GRPO (rollout.batch_producer): the next batches' episodes run while the trainer updates, none
    # trained on more than this many weight versions after it was sampled. 0: the synchronous loop
    max_staleness: NonNegativeInt = 0
    # with max_staleness > 0, which weights sample a batch. "exact": each batch wholly under the weights of
    # max_staleness steps before (of the latest checkpoint or validation step, where that is newer): publishes
    # reach the engines between batches and the pipeline drains at those steps, so a run, and a resumed run,
    # repeat bit for bit. "eager": every publish reaches the engines at once, running episodes continue on it at
    # their next turn (fresher, no drains; which turn saw which version depends on timing), and a resumed run
    # samples the batches in flight at its checkpoint again, under the restored weights
    async_mode: Literal["exact", "eager"] = "exact"
    # sglang engine: what a publish does with the servers' prefix cache, which the old weights computed: "flush"
    # it (every later turn is prefilled anew under the new weights) or "keep" it (cheaper: later turns of a
    # running episode attend to keys and values the old weights computed)
    swap_prefix_cache: Literal["flush", "keep"] = "flush"
    # sglang engine: where each step's weights (or LoRA adapters) are published for the servers to load
    # (tbjax.models.hf.versions). "": <run directory>/weights (/adapters), written by the driver, which servers
    # on other hosts read through a shared file system. A node-local directory such as /dev/shm/tbjax/{run}
    # ({run}: the run's name) with publish_replicas: every process (one per host) writes that path on its own
    # host from the replica it holds, and each host's servers read their host's copy.
    publish_dir: str = ""
    publish_replicas: bool = False
    publish_keep: PositiveInt = 2  # published versions kept (the newest; the one before for a server's rollback)
    # between whole versions (every publish_full_every), publish only what changed since the version before
    # (tbjax.models.hf.delta): `tensors` (the changed tensors, which SGLang's stock loader applies) or `elements`
    # (the changed elements: tbjax.serve; with bfloat16 weights over float32 masters most elements keep their
    # value from one step to the next). The trainer holds the last published weights in host memory to compare.
    publish_delta: Literal["off", "tensors", "elements"] = "off"
    publish_full_every: PositiveInt = 10

    @model_validator(mode="after")
    def _publishing_needs_servers(self) -> RolloutSection:
        defaults = RolloutSection.model_fields
        set_here = [name for name in PUBLISH_SETTINGS if getattr(self, name) != defaults[name].default]
        if not self.traits.servers and set_here:
            raise ValueError(f"rollout.{set_here[0]}: the {self.engine} engine publishes no files (it takes the "
                             "trainer's parameters in process, or serves none); drop it, or use "
                             "rollout.engine=sglang")
        try:
            self.publish_dir.format(run="run")
        except (KeyError, IndexError, ValueError) as error:
            raise ValueError(f"rollout.publish_dir={self.publish_dir!r}: {{run}} (the run's name) is the only "
                             f"placeholder it may hold ({type(error).__name__}: {error}); double other braces") \
                from error
        if self.publish_replicas and not self.publish_dir:
            raise ValueError("rollout.publish_replicas writes a copy on every host, which needs a node-local "
                             "directory: set rollout.publish_dir (e.g. /dev/shm/tbjax/{run})")
        return self

    @property
    def traits(self) -> EngineTraits:
        return ENGINES[self.engine]

    def publish_root(self, run_name: str, run_directory: Path) -> Path:
        """The directory weights are published under: publish_dir with {run} filled in, or the run's own."""
        return Path(self.publish_dir.format(run=run_name)) if self.publish_dir else run_directory

    @model_validator(mode="after")
    def _cache_setting_needs_servers(self) -> RolloutSection:
        if not self.traits.servers and self.swap_prefix_cache != "flush":
            raise ValueError(f"rollout.swap_prefix_cache=keep: the {self.engine} engine keeps no prefix cache across "
                             "a swap (the embedded one forgets keys and values the old weights computed); drop it, "
                             "or use rollout.engine=sglang")
        return self

    @model_validator(mode="after")
    def _async_mode_needs_overlap(self) -> RolloutSection:
        if self.async_mode != "exact" and not self.max_staleness:
            raise ValueError(f"rollout.async_mode={self.async_mode} says when publishes reach batches produced "
                             "ahead, and rollout.max_staleness=0 produces none: set rollout.max_staleness >= 1, "
                             "or drop rollout.async_mode")
        if self.max_staleness and self.async_mode == "exact" and self.traits.servers \
                and self.publish_keep <= self.max_staleness:
            raise ValueError(f"rollout.publish_keep={self.publish_keep}: with rollout.async_mode=exact the servers "
                             f"load a version up to max_staleness={self.max_staleness} steps after it was "
                             f"published, so it must still be there; set rollout.publish_keep >= "
                             f"{self.max_staleness + 1}")
        return self

    @model_validator(mode="after")
    def _overlap_needs_devices_of_its_own(self) -> RolloutSection:
        if self.max_staleness and self.placement == "colocated":
            raise ValueError(f"rollout.max_staleness={self.max_staleness}: colocated servers hand the GPUs to the "
                             "trainer for every update, so rollouts cannot run beside it; set "
                             "rollout.placement=disaggregated (servers on GPUs of their own) or "
                             "rollout.max_staleness=0")
        return self

    @model_validator(mode="after")
    def _sglang_needs_servers(self) -> RolloutSection:
        if self.traits.servers and not self.sglang_urls:
            raise ValueError("rollout.engine=sglang needs rollout.sglang_urls, the servers' base URLs (e.g. "
                             "'rollout.sglang_urls=[http://127.0.0.1:30000]'); or set rollout.engine=embedded")
        return self

    @model_validator(mode="after")
    def _colocation_needs_servers(self) -> RolloutSection:
        if self.placement == "colocated" and not self.traits.servers:
            raise ValueError(f"placement=colocated hands the GPUs between the trainer and SGLang servers; the "
                             f"{self.engine} engine has none to hand over (the embedded one already shares the "
                             "trainer's parameters): use placement=disaggregated")
        return self


class UserSection(Section):
    # scripted: replies from the task's script, no model needed; llm: an LLM plays the user (the 27B configs)
    kind: Literal["scripted", "llm"] = "scripted"
    endpoint: ChatEndpointConfig | None = None  # OpenAI-compatible; the API key comes from endpoint.api_key_env
    temperature: float = 0.3

    @model_validator(mode="after")
    def _llm_needs_an_endpoint(self) -> UserSection:
        if self.kind == "llm" and self.endpoint is None:
            raise ValueError("user.kind=llm needs user.endpoint (base_url, model, api_key_env), e.g. "
                             "user.endpoint.base_url=http://127.0.0.1:8000/v1 user.endpoint.model=NAME; "
                             "or set user.kind=scripted")
        return self


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class EpisodeSection(EpisodeConfig):
    """`episode`: what rollout.episode runs every episode under (turns, tokens, deadline, sampling)."""


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class GroupsSection(GroupConfig):
    """`groups`: how rollout.groups fills a step's batch (groups, their size, concurrency, refills)."""
