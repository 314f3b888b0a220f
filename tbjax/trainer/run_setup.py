"""Setting up (or resuming) a GRPO run: the trainer over the model (its LoRA adapters added first), the task
pool and its validation split, the state restored from the newest intact checkpoint, the rollout backend
(tbjax.trainer.backends, chosen once by rollout.engine), and what watches the run. `Run` is everything
tbjax.trainer.loop holds between steps.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import jax
import yaml

from envs import Task
from rollout.interpret import Interpreter
from rollout.task_choice import carve, refuse_benchmark, training_tasks, without_heldout
from tbjax.config import Config
from tbjax.models import Qwen
from tbjax.models.lora import add_adapters
from tbjax.parallel.distributed import is_driver, process_hosts
from tbjax.trainer.backends import RolloutBackend, build_backend
from tbjax.trainer.backends.protocol import ServedEngine
from tbjax.trainer.checkpoint import Checkpointer
from tbjax.trainer.handover import Handover
from tbjax.trainer.metrics_log import MetricsLog
from tbjax.trainer.mismatch import MismatchAlarm, MismatchMeter
from tbjax.trainer.periodic import Periodic
from tbjax.trainer.suite_setup import task_source
from tbjax.trainer.task_stream import TaskStream, task_stream
from tbjax.trainer.train_state import TrainState
from tbjax.trainer.update import GRPOTrainer, make_trainer
from tbjax.trainer.validation import Validation
from tbjax.trainer.wandb_sink import WandbSink
from tbjax.trainer.weight_probe import TOLERANCE, WeightProbe

VALIDATED = "validated"  # <run>/validated/v<step>: each new best-validated step's weights (tbjax.trainer.validation)


@dataclasses.dataclass(kw_only=True)
class Run:
    """Everything the loop holds between steps."""

    config: Config
    trainer: GRPOTrainer
    state: TrainState
    backend: RolloutBackend  # what serves the episodes (tbjax.trainer.backends), chosen by rollout.engine
    interpreter: Interpreter
    tasks: list[Task]
    iterator: TaskStream  # indices into `tasks` (checkpointed)
    checkpointer: Checkpointer
    periodic: Periodic  # the checkpoints, validations and held-out scorings, and when each is due
    metrics: MetricsLog | None  # None on processes other than the driver
    model_dir: Path
    step: int = 0
    draws: int = 0  # tasks the group scheduler has drawn (group ids and sampling seeds derive from it)
    # the batches produced ahead that were in flight at the checkpoint resumed from: sampled again (eager mode)
    in_flight_at_resume: tuple[int, ...] = ()
    handover: Handover = dataclasses.field(default_factory=Handover)  # who holds the GPUs (tbjax.trainer.handover)
    mismatch: MismatchMeter | None = None  # train.mismatch_stats (tbjax.trainer.mismatch)
    alarm: MismatchAlarm | None = None  # train.mismatch_alarm
    weight_probe: WeightProbe | None = None  # train.weight_probe (tbjax.trainer.weight_probe)
    validation: Validation | None = None  # validation.tasks > 0 (tbjax.trainer.validation)
    heldout: Validation | None = None  # evaluate.every > 0: held-out tasks scored during training

    @property
    def directory(self) -> Path:
        return self.config.run.directory

    @property
    def engine(self) -> ServedEngine | None:
        """The driver's rollout engine; None on the other processes."""
        return self.backend.engine


def refuse_shared_replica_hosts(config: Config) -> None:
    """With rollout.publish_replicas every process writes publish_dir on its own host: two processes on one
    host would write the same directory at once."""
    if not config.rollout.publish_replicas or jax.process_count() == 1:
        return
    hosts = process_hosts()
    for host in sorted(set(hosts)):
        sharing = [i for i, h in enumerate(hosts) if h == host]
        if len(sharing) > 1:
            raise ValueError(f"rollout.publish_replicas: processes {sharing} share host {host} and would write the "
                             f"same {config.rollout.publish_dir} at once; run one process per host, or set "
                             "rollout.publish_replicas=false (the driver alone writes)")


def build_run(config: Config, model: Qwen, model_dir: Path, tasks: list[Task] | None = None,
              validation_tasks: list[Task] | None = None, heldout_tasks: list[Task] | None = None) -> Run:
    """Sets up (or resumes) a run; `tasks` overrides the configured task set (tests, custom curricula), which
    may hold no benchmark task either. With `validation.tasks`, `validation_tasks` is the validation split (the
    pipeline carves it before the warm start); None carves it out of the tasks here."""
    tasks = training_tasks(task_source(config)) if tasks is None else refuse_benchmark(tasks, "build_run's tasks")
    refuse_shared_replica_hosts(config)
    if config.lora.enabled:  # GRPO trains adapters on the model, its weights frozen (tbjax.trainer.update)
        add_adapters(model, config.lora.spec(), config.lora.seed)
    trainer = make_trainer(config, model)
    validation = None
    if config.validation.tasks:
        if validation_tasks is None:
            tasks, validation_tasks = carve(tasks, config.validation.tasks, config.validation.seed)
        tasks = without_heldout(tasks, validation_tasks)  # a validation task never trains, whoever chose the pool
        validation = Validation.split(validation_tasks, config, config.run.directory / "validation")
    heldout = None
    if config.evaluate.every:
        if heldout_tasks is None:
            raise ValueError("evaluate.every scores held-out tasks during GRPO: give build_run the heldout_tasks "
                             "(the pipeline gives a subset of its held-out split)")
        tasks = without_heldout(tasks, heldout_tasks)  # a held-out task never trains
        heldout = Validation.heldout(heldout_tasks, config, config.run.directory / "heldout")
    checkpointer = Checkpointer(config.run.directory / "checkpoints", keep=config.train.keep_checkpoints)
    # On the update's own shardings from the start: one compilation, and a restore lands there directly (with
    # several processes, moving a restored array between hosts' devices afterwards is not supported).
    state = trainer.shard_state(trainer.init_state(model))
    if config.grpo.uses_reference:  # the KL reference: the policy before any update, also when resuming
        trainer.keep_reference(state.params)
    iterator, step, draws, in_flight = task_stream(tasks, config.tasks), 0, 0, ()
    # the newest intact checkpoint (the checkpointer reports broken ones and the step resumed from)
    restored = (checkpointer.restore_latest(state, config.fingerprint(), config.train.allow_config_change)
                if config.train.resume == "auto" else None)
    if restored is not None:
        state = restored.state
        iterator.set_state(restored.data)
        step, draws = int(restored.record["step"]), int(restored.record["draws"])
        in_flight = tuple(sorted(int(index) for index in restored.record.get("in_flight", {})))
    backend = build_backend(config, trainer, state.params, step, model_dir)
    interpreter = Interpreter.from_pretrained(model_dir, tool_call_format=config.rollout.tool_call_format)
    train = config.train
    wandb = functools.partial(WandbSink, config.run.directory, project=train.wandb_project, name=config.run.name,
                              mode=train.wandb_mode, config=config.model_dump(mode="json"))
    metrics = MetricsLog(config.run.directory, resumed_step=step, loggers=train.loggers, wandb=wandb) \
        if is_driver() else None
    if validation is not None and is_driver():
        validation.forget_after(step, config.run.directory / VALIDATED)
    if heldout is not None and is_driver():
        heldout.forget_after(step, config.run.directory / VALIDATED)
    if is_driver():  # what this run draws its groups from, and validates on, for the record
        record = {"tasks": [t.id for t in tasks], **({"validation": [t.id for t in validation.tasks]}
                                                      if validation is not None else {}),
                  **({"heldout": [t.id for t in heldout.tasks]} if heldout is not None else {})}
        (config.run.directory / "tasks.yaml").write_text(yaml.safe_dump(record, sort_keys=False))
    return Run(config=config, trainer=trainer, state=state, backend=backend, interpreter=interpreter, tasks=tasks,
               iterator=iterator, checkpointer=checkpointer, periodic=Periodic.of(config), metrics=metrics,
               model_dir=model_dir, step=step, draws=draws, in_flight_at_resume=in_flight,
               handover=Handover.for_placement(config.rollout.placement, backend),
               mismatch=MismatchMeter(trainer) if config.train.mismatch_stats else None,
               alarm=_mismatch_alarm(config), weight_probe=_weight_probe(config, trainer, model),
               validation=validation, heldout=heldout)


def _mismatch_alarm(config: Config) -> MismatchAlarm | None:
    """The configured alarm on the engine-vs-trainer mismatch, if any."""
    train = config.train
    if train.mismatch_alarm is None:
        return None
    return MismatchAlarm(train.mismatch_alarm, train.mismatch_alarm_metric, train.mismatch_action)


def _weight_probe(config: Config, trainer: GRPOTrainer, model: Qwen) -> WeightProbe | None:
    """The probe that verifies each publish (tolerance: configured, else the compute dtype's default)."""
    if not config.train.weight_probe:
        return None
    tolerance = config.train.weight_probe_tolerance or TOLERANCE[config.model.compute_dtype]
    return WeightProbe(trainer, model.config.vocab_size, tolerance)
