"""The run configuration: one tree of typed sections (those of training in tbjax.sections.training), loaded
from YAML and overridden by `key=value` on the command line. Defaults in code are small and safe; the 27B
reference's values live in its YAML. One object flows down; nothing deeper reads files or environment
variables for settings, and parsing imports nothing heavy.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import types
import typing
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, PositiveInt, ValidationError, model_validator

from envs.chat_endpoint import ChatEndpointConfig
from envs.http_retry import RetryPolicy
from envs.session import PromptStyle
from rollout.episode import EpisodeConfig
from rollout.groups import GroupConfig
from rollout.task_choice import TaskSource
from tbjax.sections.base import Section
from tbjax.sections.lora import LoraSection
from tbjax.sections.training import (
    SAVE_SETTINGS,
    WATCH_SETTINGS,
    LossConfig,
    OptimConfig,
    TrainSection,
    WarmStartConfig,
)

# configs/ of the checkout, shipped inside the package (tbjax/configs links to it), so an installed wheel has them
CONFIG_DIR = Path(__file__).parent / "configs"
DEFAULT_CONFIG = CONFIG_DIR / "tiny-cpu.yaml"


class ConfigError(ValueError):
    """A config file or override that cannot be used; the message names the key and the fix."""


AttentionImpl = Literal["xla", "cudnn", "splash", "triton"]
RematPolicy = Literal["none", "full", "dots", "dots_no_batch"]


@dataclasses.dataclass(frozen=True)
class RuntimeConfig:
    """How to run an architecture (our choices, not the checkpoint's); `ModelSection.runtime()` gives a run's.
    Its own defaults are the plainest (float32, no remat, no scan), which parity tests compare against."""

    param_dtype: str = "float32"
    compute_dtype: str = "float32"
    attention_impl: AttentionImpl = "xla"
    remat: RematPolicy = "none"
    scan_layers: bool = False
    # Gated DeltaNet: tokens solved in parallel per chunk (a power of two; the recurrence runs across chunks),
    # and chunks whose parallel part is done at once (None: all; a few keep a CPU's working set in cache)
    linear_chunk_size: int = 64
    linear_chunks_per_step: int | None = 4


class ModelSection(Section):
    # An HF directory, or "tiny:<arch>" for a tiny random Qwen made on the spot (tbjax.assets.tiny).
    path: str = "tiny:qwen3"
    # The HF config.json contents, for planning (--dry-run) on a machine without the checkpoint.
    architecture: dict[str, Any] | None = None
    param_dtype: Literal["float32", "bfloat16"] = "bfloat16"
    compute_dtype: Literal["float32", "bfloat16"] = "bfloat16"
    attention_impl: AttentionImpl = "xla"
    remat: RematPolicy = "full"
    scan_layers: bool = True

    def runtime(self) -> RuntimeConfig:
        return RuntimeConfig(self.param_dtype, self.compute_dtype, self.attention_impl, self.remat, self.scan_layers)


class MeshSection(Section):
    shape: str = "1"  # "3x8" = hosts x local devices
    layout: list[str] | None = None  # which axes the shape's numbers fill; default data, fsdp[, tensor]
    coordinator_address: str | None = None
    num_processes: int | None = None
    process_id: int | None = None


class RunSection(Section):
    name: str = "default"
    root: str = "runs"

    @property
    def directory(self) -> Path:
        return Path(self.root) / self.name


class TasksSection(Section):
    # Where the tasks come from: `file` if set, else the tasks the known domains generate. Either way the same
    # filters apply, in this order: `domains`, then (train split only) `templates`, then `selected`; the
    # train split trains, the heldout split is evaluation's (evaluate.heldout: templates). A benchmark task
    # (envs.thinkingbox.is_benchmark_task) is refused wherever it comes from.
    # file: a JSONL of your own tasks, one envs.Task per line (envs.write_jsonl writes it), sealed on load
    # against the domains their `domain` field names; None: the domains' own tasks
    file: str | None = None
    selected: str | None = None  # selected.yaml from `python -m rollout.select`; None: every train-split task
    # domains to draw from (None: all): built-in or installed (entry points of the group tbjax.domains) by
    # name, or "module:attr" naming a Domain object of your own (loaded first: a tasks file may then hold
    # its tasks); with `file`, the file's tasks of these domains
    domains: list[str] | None = None
    # train-split templates to draw from (None: all of the domains'); warm start, selection, GRPO and the
    # held-out instances see only these; the heldout split's templates are not filtered
    templates: list[str] | None = None
    seed: int = 0  # shuffling of the task stream
    # uniform: every task as often as any other; by_kind: each task kind (direct, forbidden, approval, ...) as
    # often as any other, in turn, tasks shuffled within their kind, and an all-equal group replaced by a task
    # of its own kind, so a kind with few tasks (the direct writes beside many refusals) still weighs as much
    # in the updates (tbjax.trainer.task_stream)
    draw: Literal["uniform", "by_kind"] = "uniform"
    prompt: PromptStyle = "full"  # how built-in domains instruct the agent (envs.session.PromptStyle)

    def source(self) -> TaskSource:
        """Where the tasks come from and which to keep, as rollout.task_choice reads it."""
        return TaskSource(self.file, self.domains, self.templates, self.selected)


class SelectSection(Section):
    """The selection stage of the default pipeline (tbjax.pipeline.stages): the warm-started policy tries
    `candidates` train-split tasks `trials` times each; rollout.select keeps the bands in `keep`."""

    candidates: int = 0  # 0: no selection stage (train on tasks.selected or every train-split task)
    trials: int = 8
    keep: list[str] = ["hard", "medium", "easy"]
    min_clean_runs: int = 4
    seed: int = 0  # which candidates, and the trials' sampling seeds


class EvaluateSection(Section):
    """The evaluation stage: base and trained policies on the same `tasks` held-out tasks, `k` trials each,
    with the same sampling seeds (a paired comparison)."""

    tasks: int = 0  # 0: no evaluation stage
    # templates: tasks of the heldout split (templates, tools and requests never trained on); instances:
    # train-split tasks kept out of warm start, selection and GRPO (new customers, ids and values)
    heldout: Literal["templates", "instances"] = "templates"
    # with heldout "instances": also this many tasks of the heldout split, evaluated and compared beside them
    templates_tasks: int = 0
    k: int = 8
    seed: int = 0
    concurrency: int = 16
    bootstrap_resamples: int = 1000


class ValidationSection(Section):
    """Scoring the policy during GRPO on a validation split, to export the best-validated step rather than
    whichever came last (tbjax.trainer.validation). `tasks` instances of the training templates are carved out
    of the training pool before anything trains on it: like held-out tasks they appear in no demonstration,
    selection or GRPO batch, and they are disjoint from the held-out tasks."""

    tasks: int = 0  # 0: no validation; the last step is exported
    k: PositiveInt = 4  # trials per task, each seeded by (seed, task, trial): every scoring faces the same draws
    every: PositiveInt = 4  # GRPO steps between scorings; the start (step 0) and the last step are scored too
    seed: int = 0  # which tasks are carved out, and the trials' sampling seeds
    # best: the export is the step with the highest validation pass@1 (the latest of equals: the split cannot tell
    # them apart, and the later one has trained on more); last: the last step
    export: Literal["best", "last"] = "best"


class RolloutSection(Section):
    engine: Literal["embedded", "sglang"] = "embedded"  # sglang: rollouts from the servers in sglang_urls
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

    @model_validator(mode="after")
    def _sglang_needs_servers(self) -> RolloutSection:
        if self.engine == "sglang" and not self.sglang_urls:
            raise ValueError("rollout.engine=sglang needs rollout.sglang_urls, the servers' base URLs (e.g. "
                             "'rollout.sglang_urls=[http://127.0.0.1:30000]'); or set rollout.engine=embedded")
        return self

    @model_validator(mode="after")
    def _colocation_needs_servers(self) -> RolloutSection:
        if self.placement == "colocated" and self.engine == "embedded":
            raise ValueError("placement=colocated hands the GPUs between the trainer and SGLang servers; the "
                             "embedded engine already shares the trainer's parameters: use placement=disaggregated")
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


class TrainConfig(Section):
    model: ModelSection = ModelSection()
    mesh: MeshSection = MeshSection()
    run: RunSection = RunSection()
    tasks: TasksSection = TasksSection()
    rollout: RolloutSection = RolloutSection()
    user: UserSection = UserSection()
    # small and safe where nothing says otherwise: 32k-token episodes (the 27B reference sets the seed's 106k)
    episode: EpisodeConfig = EpisodeConfig(max_tokens_per_turn=4096, token_budget=32_000)
    groups: GroupConfig = GroupConfig()
    grpo: LossConfig = LossConfig()
    optim: OptimConfig = OptimConfig()
    train: TrainSection = TrainSection()
    warm_start: WarmStartConfig = WarmStartConfig()
    select: SelectSection = SelectSection()
    evaluate: EvaluateSection = EvaluateSection()
    validation: ValidationSection = ValidationSection()
    lora: LoraSection = LoraSection()

    @model_validator(mode="after")
    def _episodes_fit(self) -> TrainConfig:
        """An episode may reach episode.token_budget tokens: the trainer's packed rows and the embedded
        engine's sequences must hold one, or the run would fail at its first long episode."""
        budget = self.episode.token_budget
        if self.train.row_len < budget:
            raise ValueError(f"train.row_len={self.train.row_len} is shorter than episode.token_budget={budget}: "
                             f"an episode must fit one packed row; set train.row_len >= {budget} or lower the budget")
        if self.rollout.engine == "embedded" and self.rollout.max_len < budget:
            raise ValueError(f"rollout.max_len={self.rollout.max_len} is shorter than episode.token_budget={budget}: "
                             f"the embedded engine must hold a whole episode; set rollout.max_len >= {budget} or "
                             "lower the budget")
        return self

    @model_validator(mode="after")
    def _objective_can_act(self) -> TrainConfig:
        """Settings of the update's objective that could not act are errors, not silently ignored."""
        train, kl = self.train, self.grpo.uses_reference
        if train.mini_batches > self.groups.group_size:
            raise ValueError(f"train.mini_batches={train.mini_batches} exceeds groups.group_size="
                             f"{self.groups.group_size}, the episodes of the smallest batch a step trains on (one "
                             "informative group): lower train.mini_batches")
        if train.reference_placement == "host" and not kl:
            raise ValueError("train.reference_placement=host places a KL reference, which grpo.kl_coef=0 never "
                             "builds: set grpo.kl_coef > 0, or drop train.reference_placement")
        if kl and self.rollout.placement == "colocated" and train.reference_placement == "device":
            raise ValueError("grpo.kl_coef > 0 with rollout.placement=colocated: a reference kept on the device "
                             "would hold the GPUs the servers use; set train.reference_placement=host")
        if self.validation.tasks and self.validation.export == "best" and self.rollout.placement == "colocated":
            raise ValueError("validation.export=best writes a new best step's weights while the servers hold the "
                             "GPUs, which rollout.placement=colocated does not support: set validation.export=last "
                             "(the scores are still recorded) or rollout.placement=disaggregated")
        return self

    def fingerprint(self) -> str:
        """A short hash of what determines the training trajectory (resume checks compare it): everything
        but the run's bookkeeping (steps to run, resume mode, how often it is saved and how many saves it keeps,
        the warm start's save interval, the run's name and directory, the coordinator's address and this
        process's id, how the user simulator's requests are timed out and retried), where things are kept
        (rollout placement, the optimizer state's memory), what watches it and how the result is evaluated
        afterwards."""
        # float32 masters are what an optimizer step means; a run saved before the state kept them resumes onto
        # them (tbjax.trainer.checkpoint), so only the explicit choice of doing without them is fingerprinted
        masters = {"master_dtype"} if self.optim.master_dtype == "float32" else set()
        # no format penalty: episodes are scored by their verdict, as before the setting existed
        unshaped = {"format_penalty"} if not self.groups.format_penalty else set()
        # no validation split, or full-parameter training: as before the section existed
        absent = {"validation": True} if not self.validation.tasks else {}
        absent |= {"lora": True} if not self.lora.enabled else {}
        relevant = self.model_dump(exclude={"train": {"steps", "resume", "allow_config_change", "offload_optimizer",
                                                      "micro_batches_per_call", "reference_placement",
                                                      *WATCH_SETTINGS, *SAVE_SETTINGS},
                                            "optim": masters, "groups": unshaped, "warm_start": {"checkpoint_every"},
                                            "user": {"endpoint": set(RetryPolicy.model_fields)},
                                            "mesh": {"coordinator_address", "process_id"},
                                            "rollout": {"placement"}, "run": True, "evaluate": True, **absent})
        return hashlib.sha256(json.dumps(relevant, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(), sort_keys=False)


def apply_override(tree: dict[str, Any], assignment: str) -> None:
    """'model.remat=none' -> tree['model']['remat'] = 'none' (the value parsed as YAML)."""
    key, sep, raw = assignment.partition("=")
    if not sep or not key:
        raise ConfigError(f"override {assignment!r} is not key=value (e.g. model.remat=none)")
    *parents, leaf = key.split(".")
    node = tree
    for part in parents:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"override {assignment!r}: {part!r} is a value, not a section")
    try:
        node[leaf] = yaml.safe_load(raw)
    except yaml.YAMLError as error:
        raise ConfigError(f"override {assignment!r}: the value is not valid YAML ({' '.join(str(error).split())}); "
                          "quote it, e.g. 'key=[a, b]'") from None


def load_config(path: str | Path | None = None, overrides: list[str] = ()) -> TrainConfig:
    """YAML file (default configs/tiny-cpu.yaml) + overrides -> a validated TrainConfig. `path` may also name
    a shipped config ("smoke", "qwen3-8b-1x8"), which works from an installed wheel too."""
    file = config_file(path)
    try:
        tree = yaml.safe_load(file.read_text()) or {}
    except yaml.YAMLError as error:
        raise ConfigError(f"{file} is not valid YAML ({' '.join(str(error).split())}); fix the file") from None
    if not isinstance(tree, dict):
        raise ConfigError(f"{file} must hold a mapping of sections (model:, mesh:, run:)")
    for assignment in overrides:
        apply_override(tree, assignment)
    try:
        return TrainConfig.model_validate(tree)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}{_did_you_mean(e)}" for e in error.errors())
        raise ConfigError(f"invalid config ({file}): {problems}") from None


def config_file(path: str | Path | None) -> Path:
    """The YAML file `--config` names: a path, or the name of a shipped config; a missing one is an error
    naming the shipped configs."""
    if not path:
        return DEFAULT_CONFIG
    for file in (Path(path), CONFIG_DIR / path, CONFIG_DIR / f"{path}.yaml"):
        if file.is_file():
            return file
    shipped = sorted(p.stem for p in CONFIG_DIR.glob("*.yaml") if p.stem != "prices")
    raise ConfigError(f"config file {path} does not exist; give a YAML file or a shipped config: {', '.join(shipped)}")


_UNKNOWN_KEY = ("extra_forbidden", "unexpected_keyword_argument")


def _did_you_mean(error: Any) -> str:
    """' (did you mean train.steps?)' for an unknown key close to a known one of its section, else ''."""
    if error["type"] not in _UNKNOWN_KEY:
        return ""
    *parents, leaf = map(str, error["loc"])
    section: Any = TrainConfig
    for name in parents:
        section = _field_types(section).get(name)
    close = difflib.get_close_matches(leaf, list(_field_types(section)), n=1)
    return f" (did you mean {'.'.join([*parents, close[0]])}?)" if close else ""


def _field_types(section: Any) -> dict[str, Any]:
    """A config section's field names and types (a pydantic model or a dataclass; optional ones unwrapped)."""
    if isinstance(section, type) and issubclass(section, BaseModel):
        hints = {name: field.annotation for name, field in section.model_fields.items()}
    elif dataclasses.is_dataclass(section):
        hints = typing.get_type_hints(section)
    else:
        return {}
    return {name: _unwrap_optional(t) for name, t in hints.items()}


def _unwrap_optional(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return next((a for a in typing.get_args(annotation) if a is not type(None)), annotation)
    return annotation
