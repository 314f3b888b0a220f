"""The run configuration: `Config`, one tree of the typed sections of tbjax.sections (a section's class is
named after its key: `grpo` -> GRPOSection), loaded from YAML and overridden by `key=value` on the command
line. Defaults in code are small and safe; the 27B reference's values live in its YAML. One object flows
down; nothing deeper reads files or environment variables for settings, and parsing imports nothing heavy.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError, model_validator

from envs.http_retry import RetryPolicy
from envs.suite_protocol import Suite
from envs.suite_registry import DEFAULT_SUITE, SUITES, get_suite
from tbjax.sections.base import Section
from tbjax.sections.lora import LoraSection
from tbjax.sections.model import MeshSection, ModelSection
from tbjax.sections.rollout import PUBLISH_SETTINGS, EpisodeSection, GroupsSection, RolloutSection, UserSection
from tbjax.sections.run import RunSection
from tbjax.sections.tasks import EvaluateSection, SelectSection, TasksSection, ValidationSection
from tbjax.sections.tau2 import Tau2Section
from tbjax.sections.training import (
    SAVE_SETTINGS,
    WATCH_SETTINGS,
    GRPOSection,
    OptimSection,
    TrainSection,
    WarmStartSection,
)

# configs/ of the checkout, shipped inside the package (tbjax/configs links to it), so an installed wheel has them
CONFIG_DIR = Path(__file__).parent / "configs"
DEFAULT_CONFIG = CONFIG_DIR / "tiny-cpu.yaml"


class ConfigError(ValueError):
    """A config file or override that cannot be used; the message names the key and the fix."""


class Config(Section):
    """Everything a run is: the tree of sections one YAML file (and its `key=value` overrides) gives."""

    model: ModelSection = ModelSection()
    mesh: MeshSection = MeshSection()
    run: RunSection = RunSection()
    tasks: TasksSection = TasksSection()
    rollout: RolloutSection = RolloutSection()
    user: UserSection = UserSection()
    episode: EpisodeSection = EpisodeSection()
    groups: GroupsSection = GroupsSection()
    grpo: GRPOSection = GRPOSection()
    optim: OptimSection = OptimSection()
    train: TrainSection = TrainSection()
    warm_start: WarmStartSection = WarmStartSection()
    select: SelectSection = SelectSection()
    evaluate: EvaluateSection = EvaluateSection()
    validation: ValidationSection = ValidationSection()
    lora: LoraSection = LoraSection()
    tau2: Tau2Section = Tau2Section()  # with tasks.suite=tau2: τ²-bench's venv, domains and user simulator

    @model_validator(mode="after")
    def _episodes_fit(self) -> Config:
        """An episode may reach episode.token_budget tokens: the trainer's packed rows and the embedded
        engine's sequences must hold one, or the run would fail at its first long episode."""
        budget = self.episode.token_budget
        if self.train.row_len < budget:
            raise ValueError(f"train.row_len={self.train.row_len} is shorter than episode.token_budget={budget}: "
                             f"an episode must fit one packed row; set train.row_len >= {budget} or lower the budget")
        if self.rollout.traits.in_process and self.rollout.max_len < budget:
            raise ValueError(f"rollout.max_len={self.rollout.max_len} is shorter than episode.token_budget={budget}: "
                             f"the {self.rollout.engine} engine must hold a whole episode; set rollout.max_len >= "
                             f"{budget} or lower the budget")
        if self.train.weight_probe and not self.rollout.traits.scores:
            raise ValueError(f"train.weight_probe: the {self.rollout.engine} engine cannot score the probe, so "
                             "nothing would verify what it serves; set train.weight_probe=false")
        return self

    @model_validator(mode="after")
    def _objective_can_act(self) -> Config:
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
        if self.rollout.max_staleness and train.mismatch_alarm is not None and \
                train.mismatch_alarm_metric == "logprob_gap":
            raise ValueError("train.mismatch_alarm_metric=logprob_gap is the update's gap over every trained token, "
                             "and with rollout.max_staleness > 0 some were sampled under older weights (their gap is "
                             "the policy's change, not a failed publish): alarm on mismatch_kl or logprob_gap_max, "
                             "which leave those tokens out")
        if self.lora.enabled and self.rollout.publish_delta != "off":
            raise ValueError(f"rollout.publish_delta={self.rollout.publish_delta}: with LoRA each step publishes the "
                             "adapters alone, a small whole version; drop rollout.publish_delta")
        return self

    @model_validator(mode="after")
    def _suite_settings_can_act(self) -> Config:
        """A suite with settings of its own (tasks.suite=tau2: the `tau2` section) takes its tasks, held-out split
        and user simulator from them: the settings that choose or play built-in domains' tasks could not act, nor
        could the section of a suite not run, so they are errors."""
        suite = get_suite(self.tasks.suite)
        for name in suite_sections():
            if name != suite.name and getattr(self, name) != Config.model_fields[name].default:
                raise ValueError(f"the {name} section acts only with tasks.suite={name}: set tasks.suite={name}, or "
                                 f"drop the {name} section")
        if suite.settings_type is None:
            return self
        settings = getattr(self, suite.name)
        if any(getattr(settings, key) is None for key in suite.requirements):
            needs = " and ".join(f"{suite.name}.{key} ({what})" for key, what in suite.requirements.items())
            raise ValueError(f"tasks.suite={suite.name} needs {needs}")
        problems = _suite_conflicts(self, suite)
        if problems:
            raise ValueError(f"with tasks.suite={suite.name}, {'; '.join(problems)}")
        return self

    def fingerprint(self) -> str:
        """A short hash of what determines the training trajectory (resume checks compare it): everything
        but the run's bookkeeping (steps to run, resume mode, how often it is saved and how many saves it keeps,
        the warm start's save interval, the run's name and directory, the coordinator's address and this
        process's id, how the user simulator's requests are timed out and retried), where things are kept
        (rollout placement, where and how weights are published, the optimizer state's memory), what watches it
        and how the result is evaluated afterwards."""
        # float32 masters are what an optimizer step means; a run saved before the state kept them resumes onto
        # them (tbjax.trainer.checkpoint), so only the explicit choice of doing without them is fingerprinted
        masters = {"master_dtype"} if self.optim.master_dtype == "float32" else set()
        # a format penalty is hashed under groups, where it was set before the score rule moved to grpo, so runs
        # keep their fingerprint; none: episodes are scored by their verdict, as before the setting existed
        penalty = {"format_penalty": self.grpo.format_penalty} if self.grpo.format_penalty else {}
        # truncated importance sampling, as before masking was an option
        truncated = {"tis_mode"} if self.grpo.tis_mode == "truncate" else set()
        # every episode scored by its verdict, as before cut-short episodes could be shaped
        truncated |= {"overlong", "overlong_penalty", "overlong_buffer"} if self.grpo.overlong == "none" else set()
        # no validation split, or full-parameter training: as before the section existed
        absent = {"validation": True} if not self.validation.tasks else {}
        absent |= {"lora": True} if not self.lora.enabled else {}
        # the default suite, as before another could be chosen, and no section of a suite not run; of the suite's
        # own section, where and how it runs (its venv, workers, time limits, retries) is not what the run computes
        chosen = get_suite(self.tasks.suite)
        absent |= {name: chosen.placement(getattr(self, name)) if name == chosen.name else True
                   for name in suite_sections()}
        suite = {"suite"} if self.tasks.suite == DEFAULT_SUITE else set()
        # the synchronous loop, as before batches could be produced ahead (and servers flushing their caches at
        # every publish, as they always did)
        synchronous = {"max_staleness", "async_mode"} if not self.rollout.max_staleness else set()
        synchronous |= {"swap_prefix_cache"} if self.rollout.swap_prefix_cache == "flush" else set()
        # where exact asynchronous runs drain (at checkpoints) is what they compute
        saves = SAVE_SETTINGS if "async_mode" in synchronous or self.rollout.async_mode != "exact" else \
            tuple(s for s in SAVE_SETTINGS if s != "checkpoint_every")
        relevant = self.model_dump(exclude={"train": {"steps", "resume", "allow_config_change", "offload_optimizer",
                                                      "micro_batches_per_call", "reference_placement",
                                                      *WATCH_SETTINGS, *saves},
                                            "optim": masters, "grpo": {"format_penalty", *truncated},
                                            "warm_start": {"checkpoint_every"},
                                            "tasks": suite,
                                            "user": {"endpoint": set(RetryPolicy.model_fields)},
                                            "mesh": {"coordinator_address", "process_id"},
                                            "rollout": {"placement", *PUBLISH_SETTINGS, *synchronous}, "run": True,
                                            "evaluate": True, **absent})
        relevant["groups"] |= penalty
        return hashlib.sha256(json.dumps(relevant, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(), sort_keys=False)


def suite_sections() -> list[str]:
    """The config sections of suites' own settings: each named after its suite (envs.suite_registry)."""
    return [name for name in SUITES if name in Config.model_fields]


def _suite_conflicts(config: Config, suite: Suite) -> list[str]:
    """The settings that could not act with `suite`, which brings its own tasks, prompt and user, each with its
    fix."""
    tasks, evaluate, warm = config.tasks, config.evaluate, config.warm_start
    own, heldout = f"{suite.title}'s", f"{suite.title}'s {suite.heldout_split} split"
    problems = [
        (warm.steps, f"warm_start.steps={warm.steps}: the warm start imitates the oracle's demonstrations, which "
                     "only built-in domains have; set warm_start.steps=0"),
        (warm.slips, "warm_start.slips: the warm start's demonstrations are built-in domains'; drop it"),
        (tasks.file, f"tasks.file={tasks.file}: the tasks are {own}; drop tasks.file"),
        (tasks.domains is not None, f"tasks.domains: {own} domains are {suite.name}.domains; drop tasks.domains"),
        (tasks.templates is not None, f"tasks.templates: {own} tasks have no templates to choose; drop "
                                      "tasks.templates"),
        (tasks.prompt != "full", f"tasks.prompt={tasks.prompt}: the agent's prompt is {own} own; drop "
                                 "tasks.prompt"),
        (evaluate.heldout != "templates", f"evaluate.heldout={evaluate.heldout}: the held-out tasks are "
                                          f"{heldout}; set evaluate.heldout=templates"),
        (evaluate.templates_tasks, f"evaluate.templates_tasks: the held-out tasks are {heldout} (evaluate.tasks "
                                   "of them); drop evaluate.templates_tasks"),
        (config.user.kind == "llm" or config.user.endpoint is not None,
         f"user: {own} user simulator is {suite.name}.user ({suite.name}.user_temperature); set user.kind=scripted "
         "and drop user.endpoint"),
    ]
    return [message for acts, message in problems if acts]


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


def load_config(path: str | Path | None = None, overrides: Sequence[str] = (), *, saved_by_run: bool = False) -> Config:
    """YAML file (default configs/tiny-cpu.yaml) + overrides -> a validated Config. `path` may also name
    a shipped config ("smoke", "qwen3-8b-1x8"), which works from an installed wheel too. `saved_by_run`: the file
    is a run's own <run>/config.yaml, which holds every key as that version named it, so keys renamed since
    (RENAMED_KEYS) are read under their new names; anywhere else an old key is an error naming the new one."""
    file = config_file(path)
    try:
        tree = yaml.safe_load(file.read_text()) or {}
    except yaml.YAMLError as error:
        raise ConfigError(f"{file} is not valid YAML ({' '.join(str(error).split())}); fix the file") from None
    if not isinstance(tree, dict):
        raise ConfigError(f"{file} must hold a mapping of sections (model:, mesh:, run:)")
    if saved_by_run:
        _rename_old_keys(tree)
    for assignment in overrides:
        apply_override(tree, assignment)
    try:
        return Config.model_validate(tree)
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
# keys renamed or moved to another section, old -> new: a config (or a run's saved config.yaml) that still sets one
# fails naming the new key, which takes the same value
RENAMED_KEYS = {
    "groups.format_penalty": "grpo.format_penalty",  # with the rest of the score rule
    "train.refit_probe": "train.weight_probe",
    "train.refit_probe_tolerance": "train.weight_probe_tolerance",
}


def _rename_old_keys(tree: dict[str, Any]) -> None:
    """Moves each renamed key a saved run's config holds to its new name (RENAMED_KEYS)."""
    for old, new in RENAMED_KEYS.items():
        (old_section, old_key), (new_section, new_key) = old.split("."), new.split(".")
        section = tree.get(old_section)
        if isinstance(section, dict) and old_key in section:
            tree.setdefault(new_section, {}).setdefault(new_key, section.pop(old_key))


def _did_you_mean(error: Any) -> str:
    """' (did you mean train.steps?)' for an unknown key close to a known one of its section, or for a renamed
    key (RENAMED_KEYS) its new name; else ''."""
    if error["type"] not in _UNKNOWN_KEY:
        return ""
    *parents, leaf = map(str, error["loc"])
    old = ".".join([*parents, leaf])
    if old in RENAMED_KEYS:
        return f" (did you mean {RENAMED_KEYS[old]}? {old} is its old name)"
    section: Any = Config
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
