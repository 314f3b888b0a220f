"""The seed paper's experiment as one command: warm start -> select by difficulty -> GRPO -> evaluate base and
trained policies on held-out tasks -> compare. `python -m tbjax.train` runs it when the config enables the
warm-start, selection or evaluation stages (the laptop default does); otherwise it is plain GRPO. With
tasks.suite=tau2 (τ²-bench) there is no warm start (its demonstrations are built-in domains'), selection draws
from τ²'s train split and the held-out tasks are its test split.

Every stage caches its outputs under the run directory and is skipped (or resumed) when they exist, so a
second call after an interruption continues instead of redoing:

    assets/                the tiny policy and its tokenizer
    warm_start/            demos.jsonl, metrics.jsonl, checkpoints/, export/v{updates}   (the base policy)
    select/                trials.jsonl, summary.json, selected.yaml, aggregates.jsonl, manifest.json, bands.png
    eval/base/, eval/trained/   trials.jsonl, summary.json, report.md, plots (same tasks, same seeds)
    eval/heldout.jsonl     the held-out tasks (`rollout.evaluate --from-run` evaluates them again)
    grpo/                  metrics.jsonl, checkpoints/, export/v{steps}, validation/step{N}/ and
                           validated/v{N} (the trained policy: the best-validated step's, else the last)
    compare/               compare.json, compare.md, domains.png
    learning_curves.png, warm_start_loss.png   the GRPO curves and the warm start's loss
    stages.json (wall time per stage), results.md (the table printed at the end)
    log.txt                every log record (rollout.log_routing; the terminal keeps warnings and errors)
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import jax
import yaml
from rich.console import Console

from envs import Task, write_jsonl
from envs.suite_registry import get_suite
from rollout.compare import write_comparison
from rollout.decisions import decision_rows
from rollout.evaluate import evaluate
from rollout.evaluation.from_run import HELDOUT_TASKS
from rollout.evaluation.runner import token_trial_runner
from rollout.evaluation.selection import SelectionConfig
from rollout.interpret import Interpreter
from rollout.plots import learning_curves_png, read_steps, warm_start_png
from rollout.records import atomic_write, read_records
from rollout.select import run_selection
from rollout.task_choice import (
    carve,
    heldout_split_tasks,
    split_heldout,
    spread_over_templates,
    training_tasks,
    without_heldout,
)
from tbjax.assets.model_source import resolve_model_dir
from tbjax.config import Config, ConfigError
from tbjax.engine.configured import embedded_engine
from tbjax.engine.jax_engine import JaxEngine
from tbjax.models.placement import load_policy
from tbjax.pipeline.results import heldout_description, results_markdown, results_table
from tbjax.sections.run import RunSection
from tbjax.trainer.loop import run_training
from tbjax.trainer.suite_setup import configured_opener, session_opener, task_source
from tbjax.warmstart.warm_start import load_or_record_demos, load_or_record_slips, slip_summary, warm_start

console = Console()
STAGES = ("assets", "warm start", "select", "evaluate base", "grpo", "evaluate trained", "compare")
SYSTEM_ERROR_ROUNDS = 2  # further runs of a campaign's trials lost to system errors, before its comparison refuses


def has_stages(config: Config) -> bool:
    return bool(config.warm_start.steps or config.select.candidates or config.evaluate.tasks)


class StageClock:
    """Wall time per stage, kept in stages.json across resumed calls (a cached stage keeps its time)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seconds: dict[str, float] = json.loads(path.read_text()) if path.is_file() else {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        number = STAGES.index(name) + 1
        console.rule(f"[bold]stage {number}/{len(STAGES)}: {name}")
        start = time.perf_counter()
        yield
        elapsed = time.perf_counter() - start
        self.seconds[name] = round(self.seconds.get(name, 0.0) + elapsed, 1)
        atomic_write(self.path, json.dumps(self.seconds, indent=2))


def heldout_split(config: Config) -> tuple[list[Task], list[Task]]:
    """(tasks to train on, held-out tasks to evaluate on), as `evaluate.heldout`, `.tasks` and `.seed` say
    (with tasks.suite=tau2: τ²-bench's train split, and tasks of its test split)."""
    e = config.evaluate
    return split_heldout(task_source(config), e.heldout, e.tasks, e.seed)


def heldout_templates(config: Config) -> list[Task]:
    """The heldout split's tasks evaluated beside held-out instances (`evaluate.templates_tasks`), or none."""
    e = config.evaluate
    if e.heldout != "instances" or not e.templates_tasks:
        return []
    return spread_over_templates(heldout_split_tasks(task_source(config)), e.templates_tasks, e.seed)


def grpo_tasks(config: Config, heldout: list[Task]) -> list[Task]:
    """What GRPO draws from (`tasks.selected` as the selection stage left it), less the held-out (and
    validation) tasks."""
    tasks = training_tasks(task_source(config))
    kept = without_heldout(tasks, heldout)
    if len(kept) < len(tasks):
        console.print(f"[yellow]{len(tasks) - len(kept)} held-out or validation tasks left out of GRPO's "
                      "pool[/yellow]")
    return kept


class Campaigns:
    """Trials of one policy on an in-process engine (selection and evaluation share it)."""

    def __init__(self, policy_dir: Path, name: str, config: Config, interpreter: Interpreter) -> None:
        self.config, self.name, self.interpreter = config, name, interpreter
        self.policy_dir = policy_dir
        self._engine: JaxEngine | None = None

    def engine(self) -> JaxEngine:
        if self._engine is None:
            console.print(f"loading the {self.name} policy from {self.policy_dir}; its engine compiles during the "
                          "first trials, so they take longest")
            self._engine = embedded_engine(load_policy(self.policy_dir, self.config), self.config.rollout,
                                           self.name)
        return self._engine

    def run(self, tasks: list[Task], k: int, seed: int, out: Path, evaluation: bool = False) -> dict[str, Any]:
        """`k` trials of each task, recorded under `out`, graded as training grades them, or for `evaluation` as the
        suite grades its evaluation (τ²-bench: its own evaluator, which replays each trajectory, as rollout.evaluate
        reports it; selection and GRPO grade as tau2.grading says). Trials lost to system errors run again, up to
        SYSTEM_ERROR_ROUNDS more times (a campaign left inexact is refused by the comparison)."""
        if _complete(out, tasks, k):
            return json.loads((out / "summary.json").read_text())
        summary = asyncio.run(self._campaign(self.engine(), tasks, k, seed, out, evaluation))
        for _ in range(SYSTEM_ERROR_ROUNDS):
            if summary["coverage"]["exact"]:
                break
            summary = asyncio.run(self._campaign(self.engine(), tasks, k, seed, out, evaluation))
        return summary

    async def _campaign(self, engine: JaxEngine, tasks: list[Task], k: int, seed: int, out: Path,
                        evaluation: bool) -> dict[str, Any]:
        """The trials, their sessions opened by the configured suite (a τ² suite lives as long as this loop)."""
        async with configured_opener(self.config, evaluation) as opener:
            runner = token_trial_runner(engine, self.interpreter, model=self.name, config=self.config.episode,
                                        opener=opener, seed=seed)
            return await evaluate(tasks, runner, out=out, k=k, resume=True, retry_system_errors=True,
                                  concurrency=self.config.evaluate.concurrency,
                                  title=f"{self.name} policy, {len(tasks)} tasks x {k} trials")

    def close(self) -> None:
        if self._engine is not None:
            asyncio.run(self._engine.close())
            self._engine = None


def _complete(out: Path, tasks: list[Task], k: int) -> bool:
    """A campaign whose summary covers exactly these tasks and k, every trial scored (a resumed call skips it;
    one with system errors left runs them again)."""
    summary = out / "summary.json"
    if not summary.is_file():
        return False
    data = json.loads(summary.read_text())
    return data.get("tasks") == len(tasks) and data.get("k") == k and data.get("coverage", {}).get("exact", True)


def _compare(root: Path, split: str, config: Config) -> dict[str, Any]:
    """Base vs trained on the campaigns eval/base{split} and eval/trained{split}, written to compare{split}/."""
    return write_comparison(root / "eval" / f"base{split}" / "trials.jsonl",
                            root / "eval" / f"trained{split}" / "trials.jsonl", root / f"compare{split}",
                            names=("base", "trained"), resamples=config.evaluate.bootstrap_resamples,
                            seed=config.evaluate.seed)


def plot_training(root: Path, config: Config) -> None:
    """learning_curves.png from GRPO's metrics and, where the run warm-started, warm_start_loss.png beside it
    (the warm start's loss per update, its copy drills shaded)."""
    learning_curves_png(root / "grpo" / "metrics.jsonl", root / "learning_curves.png")
    warm_start_metrics = root / "warm_start" / "metrics.jsonl"
    if warm_start_metrics.is_file():
        warm_start_png(warm_start_metrics, root / "warm_start_loss.png", config.warm_start.copy_drills)


def _decision_kinds(config: Config, heldout: list[Task]) -> dict[str, str]:
    """Task id -> kind, for the table of which way the held-out trials decided; none for a suite whose verdicts
    name no outcome (golden, careless, unchanged) to read a decision from (τ²-bench's)."""
    return {t.id: t.kind.value for t in heldout} if get_suite(config.tasks.suite).outcome_verdicts else {}


def _write_ids(path: Path, ids: list[str]) -> str:
    atomic_write(path, yaml.safe_dump({"tasks": ids}, sort_keys=False))
    return str(path)


def run_pipeline(config: Config) -> dict[str, Any]:
    """Runs (or resumes) every stage; returns the comparison (compare.json's content)."""
    if jax.process_count() > 1:
        raise ConfigError("the warm-start / select / evaluate stages run in one process (the embedded engine); "
                          "for multi-host training set warm_start.steps=0, select.candidates=0, evaluate.tasks=0 "
                          "and give tasks.selected")
    root = config.run.directory
    root.mkdir(parents=True, exist_ok=True)
    clock = StageClock(root / "stages.json")
    stage = clock.stage

    with stage("assets"):
        model_dir = resolve_model_dir(config.model.path, root)
        interpreter = Interpreter.from_pretrained(model_dir, tool_call_format=config.rollout.tool_call_format)
    train_pool, heldout = heldout_split(config)
    # the validation split leaves the pool before the warm start, like the held-out tasks
    train_pool, validation = carve(train_pool, config.validation.tasks, config.validation.seed)
    slipped = None
    with stage("warm start"):
        base_dir = model_dir
        if config.warm_start.steps:
            demos = load_or_record_demos(root / "warm_start" / "demos.jsonl", train_pool, interpreter,
                                         session_opener(config), config.episode)
            slipped = load_or_record_slips(root / "warm_start" / "slips.jsonl", train_pool, interpreter,
                                           session_opener(config), config.episode) if config.warm_start.slips else None
            base_dir = warm_start(load_policy(model_dir, config), model_dir, demos, config.warm_start,
                                  root / "warm_start", row_len=config.train.row_len,
                                  micro_batch_rows=config.train.micro_batch_rows,
                                  logprob_chunk=config.train.logprob_chunk, slipped=slipped)
    base = Campaigns(base_dir, "base", config, interpreter)
    with stage("select"):
        selected = config.tasks.selected
        if config.select.candidates:
            s = config.select
            candidates = spread_over_templates(train_pool, s.candidates, s.seed)
            base.run(candidates, s.trials, s.seed, root / "select")
            manifest = run_selection(root / "select" / "trials.jsonl", root / "select", SelectionConfig(
                keep=tuple(s.keep), min_clean_runs=s.min_clean_runs))
            selected = str(root / "select" / "selected.yaml")
            if not manifest["counts"]["selected"]:
                console.print(f"[yellow]selection kept no task of {s.candidates} candidates (per band: "
                              f"{manifest['counts']['per_band']}): every group will have equal rewards and GRPO "
                              "will skip its steps. Train on all candidates to show it; to fix, change "
                              "warm_start.steps or select.keep[/yellow]")
                selected = _write_ids(root / "select" / "candidates.yaml", [t.id for t in candidates])
    templates = heldout_templates(config)
    with stage("evaluate base"):
        if heldout:
            (root / HELDOUT_TASKS).parent.mkdir(parents=True, exist_ok=True)
            write_jsonl(heldout, root / HELDOUT_TASKS)  # what `rollout.evaluate --from-run` evaluates again
            base.run(heldout, config.evaluate.k, config.evaluate.seed, root / "eval" / "base", evaluation=True)
        if templates:
            base.run(templates, config.evaluate.k, config.evaluate.seed, root / "eval" / "base_templates")
    base.close()
    with stage("grpo"):
        grpo_config = config.model_copy(update={
            "run": RunSection(name="grpo", root=str(root)),
            "tasks": config.tasks.model_copy(update={"selected": selected})})
        summary = root / "grpo" / "summary.json"
        if summary.is_file():
            trained_dir = Path(json.loads(summary.read_text())["export"])
        else:
            scored = spread_over_templates(heldout, config.evaluate.every_tasks, config.evaluate.seed) \
                if config.evaluate.every else None  # held-out tasks scored during GRPO
            trained_dir = run_training(grpo_config, load_policy(base_dir, config), base_dir,
                                       grpo_tasks(grpo_config, heldout + validation), validation, scored)
    with stage("evaluate trained"):
        if heldout:
            trained = Campaigns(trained_dir, "trained", config, interpreter)
            trained.run(heldout, config.evaluate.k, config.evaluate.seed, root / "eval" / "trained",
                        evaluation=True)
            if templates:
                trained.run(templates, config.evaluate.k, config.evaluate.seed, root / "eval" / "trained_templates")
            trained.close()
    with stage("compare"):
        plot_training(root, config)
        steps = read_steps(root / "grpo" / "metrics.jsonl")
        if not heldout:
            return {}
        result = _compare(root, "", config)
        on_templates = _compare(root, "_templates", config) if templates else None
    console.print(results_table(result, clock.seconds, heldout_description(config)))
    decisions = decision_rows(read_records(root / "eval" / "base" / "trials.jsonl"),
                              read_records(root / "eval" / "trained" / "trials.jsonl"),
                              _decision_kinds(config, heldout), resamples=config.evaluate.bootstrap_resamples,
                              seed=config.evaluate.seed)
    atomic_write(root / "results.md", results_markdown(result, clock.seconds, config, steps, decisions,
                                                       None if slipped is None else slip_summary(slipped),
                                                       on_templates, json.loads(summary.read_text())))
    return result
