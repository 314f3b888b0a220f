"""The run configuration: typed sections whose defaults are the reference setup's values, loaded from
YAML, overridden by `key=value` on the command line. One object flows down; nothing deeper reads files
or environment variables for settings.
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
from pydantic import BaseModel, ConfigDict, NonNegativeInt, PositiveInt, ValidationError, model_validator

from envs.chat_endpoint import ChatEndpointConfig
from envs.http_retry import RetryPolicy
from envs.oracle import Slip
from envs.session import PromptStyle
from rollout.episode import EpisodeConfig
from rollout.groups import GroupConfig
from rollout.task_choice import TaskSource

# configs/ of the checkout, shipped inside the package (tbjax/configs links to it), so an installed wheel has them
CONFIG_DIR = Path(__file__).parent / "configs"
DEFAULT_CONFIG = CONFIG_DIR / "tiny-cpu.yaml"


class ConfigError(ValueError):
    """A config file or override that cannot be used; the message names the key and the fix."""


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


AttentionImpl = Literal["xla", "cudnn", "splash", "triton"]
RematPolicy = Literal["none", "full", "dots", "dots_no_batch"]
Aggregation = Literal["token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"]
KLEstimator = Literal["k1", "k3"]
MismatchMetric = Literal["logprob_gap", "logprob_gap_max", "mismatch_kl"]
MismatchAction = Literal["warn", "fail"]


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
    # often as any other, in turn, tasks shuffled within their kind, so a kind with few tasks (the direct
    # writes beside many refusals) still weighs as much in the updates
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


class LossConfig(Section):
    """The GRPO objective (tbjax.trainer.objective): clip ranges, aggregation, advantages, TIS and KL."""

    clip_low: float = 0.2
    clip_high: float = 0.28
    dual_clip: float | None = None  # e.g. 3.0: bounds the loss of negative-advantage tokens at dual_clip * |A|
    aggregation: Aggregation = "token_mean"
    normalize_std: bool = True  # False: Dr. GRPO advantages (no std division)
    advantage_eps: float = 1e-6
    tis_cap: float | None = 2.0  # truncated importance sampling against rollout log-probs; None: off
    kl_coef: float = 0.0  # KL to a frozen reference (the policy at the start of training); 0: off (the seed run)
    kl_estimator: KLEstimator | None = None  # with kl_coef > 0; None: k3
    norm_length: int = 8192  # seq-mean-token-sum-norm's constant

    @model_validator(mode="after")
    def _kl_can_act(self) -> LossConfig:
        if self.kl_coef < 0:
            raise ValueError(f"grpo.kl_coef={self.kl_coef} is negative: a KL penalty's weight is >= 0 (0: no KL)")
        if self.kl_estimator is not None and not self.kl_coef:
            raise ValueError(f"grpo.kl_estimator={self.kl_estimator} has no effect with grpo.kl_coef=0: set "
                             "grpo.kl_coef > 0 to penalise KL to the reference, or leave kl_estimator unset")
        return self

    @property
    def uses_reference(self) -> bool:
        """Whether the loss needs reference log-probs (the KL term acts)."""
        return self.kl_coef > 0


class OptimConfig(Section):
    """The seed run's AdamW: lr 1e-6, no weight decay, global-norm clipping at 1.0."""

    learning_rate: float = 1e-6
    weight_decay: float = 0.0
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    warmup_steps: int = 0
    grad_clip: float = 1.0


class WarmStartConfig(Section):
    """The warm start (tbjax.warmstart): steps 0 disables it. Few steps on purpose: GRPO needs a policy that
    passes sometimes."""

    steps: int = 0
    episodes_per_step: int = 16
    learning_rate: float = 1e-3
    warmup_steps: int = 10
    grad_clip: float = 1.0
    seed: int = 0
    checkpoint_every: int = 20
    fresh_values: float = 0.0  # chance a drawn demonstration gets new random long numbers (warmstart.fresh_values)
    copy_drills: int = 0  # updates on synthetic copy drills before the demonstrations (warmstart.copy_drills)
    # slip kind (envs.oracle.Slip) -> chance a drawn demonstration of a task that admits it shows that mistake
    slips: dict[str, float] = {}

    @model_validator(mode="after")
    def _slips_are_known_rates(self) -> WarmStartConfig:
        unknown = sorted(set(self.slips) - {s.value for s in Slip})
        if unknown:
            raise ValueError(f"warm_start.slips names unknown slips {unknown}; known: {[s.value for s in Slip]}")
        if any(not 0.0 <= rate <= 1.0 for rate in self.slips.values()):
            raise ValueError(f"warm_start.slips rates must lie in [0, 1], got {self.slips}")
        worst = sum(self.slips.get(s, 0.0) for s in (Slip.SKIP_VERIFICATION, Slip.STOP_EARLY, Slip.BYPASS_APPROVAL))
        if worst > 1.0:
            raise ValueError(f"warm_start.slips: an approval task admits skip_verification, stop_early and "
                             f"bypass_approval, whose rates add up to {worst:.2f} > 1; lower them")
        return self

    def slip_rate(self, slip: Slip) -> float:
        return self.slips.get(slip.value, 0.0)


# train.* settings that watch a run without changing its trajectory (left out of the fingerprint)
WATCH_SETTINGS = ("mismatch_stats", "mismatch_alarm", "mismatch_alarm_metric", "mismatch_action", "refit_probe",
                  "refit_probe_tolerance")
# train.* settings of how often a run is saved and how many saves it keeps (left out of the fingerprint: a resume
# restores the state exactly whichever step it was saved at)
SAVE_SETTINGS = ("checkpoint_every", "keep_checkpoints")


class TrainSection(Section):
    steps: int = 50
    row_len: int = 32_768  # packed row width: at least the episode token budget
    micro_batch_rows: int = 1  # packed rows per device per micro-batch: bounds activation memory
    logprob_chunk: int = 8192
    checkpoint_every: int = 5
    keep_checkpoints: int = 3
    resume: Literal["auto", "never"] = "auto"
    allow_config_change: bool = False  # resume even if the config's fingerprint changed
    # engine-vs-trainer log-prob mismatch of every step's trained tokens (tbjax.trainer.mismatch): the max gap and the
    # mismatch KL cost one forward pass without gradient over the batch (the mean gap comes with the update)
    mismatch_stats: bool = True
    mismatch_alarm: float | None = None  # warn (or fail the step) when the metric exceeds this
    mismatch_alarm_metric: MismatchMetric = "mismatch_kl"
    mismatch_action: MismatchAction = "warn"
    # after each publish every engine replica scores a fixed probe sequence, which must match the trainer's
    # log-probs within the tolerance or the step fails (None: 1e-4 with float32 compute, 0.1 with bfloat16;
    # tbjax.trainer.refit_check)
    refit_probe: bool = True
    refit_probe_tolerance: float | None = None
    # AdamW's moments wait in pinned host memory while gradients accumulate and come to the device only for the
    # optimizer's apply: frees twice the float32 parameters during the backward pass for a host round trip
    # per step. Always so with rollout.placement=colocated, which keeps the trainer's state in host memory.
    offload_optimizer: bool = False
    # micro-batches scanned by one call of the update's accumulate program (0: all of the step's in one call,
    # fastest on CPU); 1 compiles once whatever a step's count and is what large sharded models want
    # (tbjax.trainer.update says why)
    micro_batches_per_call: NonNegativeInt = 0
    # optimizer steps per rollout batch: ppo_epochs passes over its episodes, dealt into mini_batches batches
    # of their own; 1 and 1 is one step per batch, KL-free and with ratio 1 (tbjax.trainer.update says what acts)
    ppo_epochs: PositiveInt = 1
    mini_batches: PositiveInt = 1
    # where the KL reference (the policy at the start of training; grpo.kl_coef > 0) waits between batches:
    # sharded like the policy on the device, or in pinned host memory (a copy to the device once per batch)
    reference_placement: Literal["device", "host"] = "device"

    @model_validator(mode="after")
    def _watch_can_act(self) -> TrainSection:
        """An alarm on something never measured, or a threshold that means nothing, is an error."""
        if self.mismatch_alarm is not None and self.mismatch_alarm_metric != "logprob_gap" and not self.mismatch_stats:
            raise ValueError(f"train.mismatch_alarm on {self.mismatch_alarm_metric} needs train.mismatch_stats=true "
                             "(only logprob_gap comes without it)")
        if self.mismatch_alarm is not None and self.mismatch_alarm < 0:
            raise ValueError("train.mismatch_alarm must be >= 0 (every mismatch metric is)")
        if self.refit_probe_tolerance is not None and self.refit_probe_tolerance <= 0:
            raise ValueError("train.refit_probe_tolerance must be > 0 (None: the compute dtype's default)")
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
        return self

    def fingerprint(self) -> str:
        """A short hash of what determines the training trajectory (resume checks compare it): everything
        but the run's bookkeeping (steps to run, resume mode, how often it is saved and how many saves it keeps,
        the warm start's save interval, the run's name and directory, the coordinator's address and this
        process's id, how the user simulator's requests are timed out and retried), where things are kept
        (rollout placement, the optimizer state's memory), what watches it and how the result is evaluated
        afterwards."""
        relevant = self.model_dump(exclude={"train": {"steps", "resume", "allow_config_change", "offload_optimizer",
                                                      "micro_batches_per_call", "reference_placement",
                                                      *WATCH_SETTINGS, *SAVE_SETTINGS},
                                            "warm_start": {"checkpoint_every"},
                                            "user": {"endpoint": set(RetryPolicy.model_fields)},
                                            "mesh": {"coordinator_address", "process_id"},
                                            "rollout": {"placement"}, "run": True, "evaluate": True})
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
    node[leaf] = yaml.safe_load(raw)


def load_config(path: str | Path | None = None, overrides: list[str] = ()) -> TrainConfig:
    """YAML file (default configs/tiny-cpu.yaml) + overrides -> a validated TrainConfig. `path` may also name
    a shipped config ("smoke", "qwen3-8b-1x8"), which works from an installed wheel too."""
    file = config_file(path)
    tree = yaml.safe_load(file.read_text()) or {}
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
