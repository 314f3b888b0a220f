"""Per-step metrics for people and for tools: one rich line per step on the console, one JSON object per
line in <run>/metrics.jsonl (appended, so a resumed run continues the same file, from which it first drops the
lines of the steps it does again) and, as train.loggers says, TensorBoard scalars under <run>/tensorboard and
Weights & Biases (tbjax.trainer.wandb_sink), named like the JSON keys. Only the driver process (process 0)
keeps one."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from tensorboardX import SummaryWriter

from rollout.records import atomic_write
from tbjax.trainer.wandb_sink import WandbSink

console = Console()


class MetricsLog:
    def __init__(self, directory: Path, resumed_step: int = 0, loggers: Sequence[str] = ("jsonl", "tensorboard"),
                 wandb: Callable[[], WandbSink] | None = None):
        """`wandb` opens the W&B run where train.loggers names it."""
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / "metrics.jsonl"
        if self.path.is_file():  # the steps a resumed run does again are no longer what it logged for them
            kept = [line for line in self.path.read_text(errors="replace").splitlines(keepends=True)
                    if _logged_step(line) <= resumed_step]
            atomic_write(self.path, "".join(kept))
        # A resumed run logs from resumed_step + 1 on: TensorBoard drops what a killed run logged from there.
        # Event files are named by the second they were opened in; the suffix keeps a quick restart from
        # overwriting its predecessor's file, in order.
        self.tensorboard = SummaryWriter(str(directory / "tensorboard"), filename_suffix=f".{time.time_ns()}",
                                         purge_step=resumed_step + 1 if resumed_step else None) \
            if "tensorboard" in loggers else None
        if "wandb" in loggers and wandb is None:
            raise ValueError("the wandb logger needs its run's settings: give MetricsLog `wandb`")
        self.wandb = wandb() if "wandb" in loggers and wandb is not None else None

    def write(self, metrics: dict[str, Any]) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(metrics, sort_keys=True) + "\n")
        if self.tensorboard is not None:
            for tag, value in scalars(metrics):
                self.tensorboard.add_scalar(tag, value, metrics["step"])
            self.tensorboard.flush()
        if self.wandb is not None:
            self.wandb.log(metrics["step"], scalars(metrics))
        console.print(self.line(metrics))

    def close(self) -> None:
        if self.tensorboard is not None:
            self.tensorboard.close()
        if self.wandb is not None:
            self.wandb.close()

    @staticmethod
    def line(m: dict[str, Any]) -> str:
        reward = "n/a" if m.get("pass_rate") is None else f"{m['pass_rate']:.3f}"
        update = "[yellow]skipped (no signal)[/yellow]" if m.get("skipped") else (
            f"loss {m['loss']:+.4f} grad {m['grad_norm']:.3f} clip {m['clip_fraction']:.3f} "
            f"ent {m['entropy']:.2f} gap {m['logprob_gap']:.2e}{mismatch_line(m)}")
        errors = sum(m.get("system_errors", {}).values())
        validated = (f" | validation {m['validation_pass_at_1']:.3f} (best: step {m['validation_best_step']})"
                     if "validation_pass_at_1" in m else "")
        validated += f" | held-out {m['heldout_pass_at_1']:.3f}" if "heldout_pass_at_1" in m else ""
        return (f"step {m['step']:>4} | pass {reward}{validated} | groups {m['groups_informative']} kept "
                f"{m['groups_dropped']} dropped {m['groups_refilled']} refilled | sys-err {errors} | {update} | "
                f"{m['rollout_tokens_per_s']:.0f} tok/s | rollout {m['time_rollout_s']:.1f}s update "
                f"{m['time_update_s']:.1f}s save {m['time_save_s']:.1f}s publish {m['time_publish_s']:.1f}s")


def mismatch_line(m: dict[str, Any]) -> str:
    """The gap's max and the mismatch KL (tbjax.trainer.mismatch) where measured, and a flag when the alarm fired."""
    stats = f" max {m['logprob_gap_max']:.2e} kl {m['mismatch_kl']:.1e}" if "mismatch_kl" in m else ""
    return stats + (" [red]MISMATCH ALARM[/red]" if m.get("mismatch_alarm") else "")


def scalars(metrics: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, float]]:
    """A step's metrics as TensorBoard scalars: nested records as `name/key` (system_errors/timeout), booleans
    as 0/1; the step (the x axis) and values that are missing (None) or not numbers are left out."""
    for key, value in metrics.items():
        tag = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from scalars(value, f"{tag}/")
        elif isinstance(value, bool | int | float) and tag != "step":
            yield tag, float(value)


def _logged_step(line: str) -> float:
    """The step a metrics line logged; infinity for a line that is none (a partial last line a kill or a full
    disk left, NUL bytes, not an object, no integer step), which a resumed run drops with what it redoes."""
    try:
        step = json.loads(line).get("step")
    except (ValueError, AttributeError):
        return float("inf")
    return step if isinstance(step, int) and not isinstance(step, bool) else float("inf")

