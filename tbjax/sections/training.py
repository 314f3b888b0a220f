"""The sections of training: the GRPO objective (`grpo`), AdamW (`optim`), the update's settings and what
watches it (`train`), and the warm start (`warm_start`)."""

from __future__ import annotations

import importlib.util
from typing import Literal

from pydantic import NonNegativeInt, PositiveInt, model_validator

from envs.oracle import Slip
from rollout.score_rule import OverlongMode, ScoreRule
from tbjax.sections.base import Section

Aggregation = Literal["token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"]
KLEstimator = Literal["k1", "k3"]
MismatchMetric = Literal["logprob_gap", "logprob_gap_max", "mismatch_kl"]
MismatchAction = Literal["warn", "fail"]


class GRPOSection(Section):
    """The GRPO objective (tbjax.trainer.objective): clip ranges, aggregation, advantages, TIS and KL, and the
    shaped score the advantages come from (`score_rule`)."""

    clip_low: float = 0.2
    clip_high: float = 0.28
    dual_clip: float | None = None  # e.g. 3.0: bounds the loss of negative-advantage tokens at dual_clip * |A|
    aggregation: Aggregation = "token_mean"
    normalize_std: bool = True  # False: Dr. GRPO advantages (no std division)
    advantage_eps: float = 1e-6
    tis_cap: float | None = 2.0  # truncated importance sampling against rollout log-probs; None: off
    # what a token whose importance ratio (trainer over behaviour policy) exceeds tis_cap gets: the cap
    # ("truncate": TIS) or no weight at all ("mask": MIS, masked importance sampling; the ratio below the cap)
    tis_mode: Literal["truncate", "mask"] = "truncate"
    kl_coef: float = 0.0  # KL to a frozen reference (the policy at the start of training); 0: off (the seed run)
    kl_estimator: KLEstimator | None = None  # with kl_coef > 0; None: k3
    norm_length: int = 8192  # seq-mean-token-sum-norm's constant
    # score lost per malformed tool call (0: the verdict alone, as in the seed run). The verdict ignores a call the
    # agent got wrong and then repeated correctly, so without it nothing in GRPO discourages them
    format_penalty: float = 0.0
    # what an episode cut short gets (its token budget ran out, or a turn hit max_tokens_per_turn unfinished;
    # rollout.score_rule): "none" its verdict as any episode, "mask" its tokens leave the loss (DAPO's overlong
    # filtering), "penalty" its score loses overlong_penalty, and an uncut one within overlong_buffer tokens of
    # the budget a share growing linearly to the budget (DAPO's soft overlong punishment)
    overlong: OverlongMode = "none"
    overlong_penalty: float = 1.0
    overlong_buffer: NonNegativeInt = 0

    @model_validator(mode="after")
    def _kl_can_act(self) -> GRPOSection:
        if self.kl_coef < 0:
            raise ValueError(f"grpo.kl_coef={self.kl_coef} is negative: a KL penalty's weight is >= 0 (0: no KL)")
        if self.kl_estimator is not None and not self.kl_coef:
            raise ValueError(f"grpo.kl_estimator={self.kl_estimator} has no effect with grpo.kl_coef=0: set "
                             "grpo.kl_coef > 0 to penalise KL to the reference, or leave kl_estimator unset")
        if self.tis_mode != "truncate" and self.tis_cap is None:
            raise ValueError(f"grpo.tis_mode={self.tis_mode} acts on the ratios above grpo.tis_cap, which is unset "
                             "(no importance weighting): set grpo.tis_cap, or drop grpo.tis_mode")
        return self

    @model_validator(mode="after")
    def _shaping_can_act(self) -> GRPOSection:
        if not 0.0 <= self.format_penalty <= 1.0:
            raise ValueError(f"grpo.format_penalty={self.format_penalty} is outside [0, 1]: it is the score a "
                             "malformed tool call costs an episode whose verdict is 0 or 1")
        shaping = [name for name in ("overlong_penalty", "overlong_buffer")
                   if getattr(self, name) != GRPOSection.model_fields[name].default]
        if shaping and self.overlong != "penalty":
            raise ValueError(f"grpo.{shaping[0]} shapes the score of episodes cut short under grpo.overlong=penalty "
                             f"only, and grpo.overlong={self.overlong}: set grpo.overlong=penalty, or drop it")
        if not 0 < self.overlong_penalty <= 1:
            raise ValueError(f"grpo.overlong_penalty={self.overlong_penalty}: give a share of a pass in (0, 1]")
        return self

    @property
    def uses_reference(self) -> bool:
        """Whether the loss needs reference log-probs (the KL term acts)."""
        return self.kl_coef > 0

    def score_rule(self, token_budget: int) -> ScoreRule:
        """The shaped score of episodes of `token_budget` tokens (episode.token_budget) under this objective: the
        one rule the group filter, the batch producer and the packer all compare episodes by."""
        return ScoreRule(self.format_penalty, self.overlong, token_budget, self.overlong_penalty,
                         self.overlong_buffer)


class OptimSection(Section):
    """The seed run's AdamW: lr 1e-6, no weight decay, global-norm clipping at 1.0."""

    learning_rate: float = 1e-6
    weight_decay: float = 0.0
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    warmup_steps: int = 0
    grad_clip: float = 1.0
    # what AdamW steps when the parameters are narrower than float32: float32 master weights, of which the
    # parameters are the cast (tbjax.trainer.update); "none" adds each update to the parameters in their own
    # dtype, where a step below half an ulp is rounded away (at lr 1e-6, most of a bfloat16 policy's)
    master_dtype: Literal["float32", "none"] = "float32"


class WarmStartSection(Section):
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
    def _slips_are_known_rates(self) -> WarmStartSection:
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
WATCH_SETTINGS = ("mismatch_stats", "mismatch_alarm", "mismatch_alarm_metric", "mismatch_action", "weight_probe",
                  "weight_probe_tolerance", "loggers", "wandb_project", "wandb_mode")
Logger = Literal["jsonl", "tensorboard", "wandb"]
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
    # the weight probe verifies each publish: every engine replica scores a fixed probe sequence, which must match
    # the trainer's log-probs within the tolerance or the step fails (None: 1e-4 with float32 compute, 0.1 with
    # bfloat16; tbjax.trainer.weight_probe)
    weight_probe: bool = True
    weight_probe_tolerance: float | None = None
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
    # where each step's metrics go besides the console (tbjax.trainer.metrics_log): metrics.jsonl (always: the
    # report and a resume read it), TensorBoard under <run>/tensorboard, Weights & Biases (the `wandb` extra;
    # project wandb_project, the run's name, the whole config; offline: written under <run>/wandb to sync later)
    loggers: list[Logger] = ["jsonl", "tensorboard"]
    wandb_project: str = "tbjax"
    wandb_mode: Literal["online", "offline"] = "online"

    @model_validator(mode="after")
    def _loggers_can_act(self) -> TrainSection:
        if "jsonl" not in self.loggers:
            raise ValueError(f"train.loggers={self.loggers}: metrics.jsonl is what results, plots and resumes read; "
                             "keep jsonl in the list")
        if len(set(self.loggers)) != len(self.loggers):
            raise ValueError(f"train.loggers={self.loggers} names a logger twice")
        wandb_set = [name for name in ("wandb_project", "wandb_mode")
                     if getattr(self, name) != TrainSection.model_fields[name].default]
        if wandb_set and "wandb" not in self.loggers:
            raise ValueError(f"train.{wandb_set[0]} acts only with wandb in train.loggers: add it, or drop the setting")
        if "wandb" in self.loggers and importlib.util.find_spec("wandb") is None:
            raise ValueError("train.loggers names wandb, which is not installed: pip install -e '.[wandb]' (or drop "
                             "wandb from train.loggers)")
        return self

    @model_validator(mode="after")
    def _watch_can_act(self) -> TrainSection:
        """An alarm on something never measured, or a threshold that means nothing, is an error."""
        if self.mismatch_alarm is not None and self.mismatch_alarm_metric != "logprob_gap" and not self.mismatch_stats:
            raise ValueError(f"train.mismatch_alarm on {self.mismatch_alarm_metric} needs train.mismatch_stats=true "
                             "(only logprob_gap comes without it)")
        if self.mismatch_alarm is not None and self.mismatch_alarm < 0:
            raise ValueError("train.mismatch_alarm must be >= 0 (every mismatch metric is)")
        if self.weight_probe_tolerance is not None and self.weight_probe_tolerance <= 0:
            raise ValueError("train.weight_probe_tolerance must be > 0 (None: the compute dtype's default)")
        return self
