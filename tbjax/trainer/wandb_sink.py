"""Each step's metrics to Weights & Biases (train.loggers: [..., wandb]), as TensorBoard gets them: the scalars
of the step's record, nested keys as `name/key`, at the step's number; the project, the run's name and the
whole config at the start. One W&B run per tbjax run: its id is kept in <run>/wandb_id, so a resumed run
continues it (W&B keeps the first value it was given for a step a killed run had logged). Offline, everything
is written under <run>/wandb for `wandb sync` later. wandb is imported only here, when asked for."""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

ID_FILE = "wandb_id"


class WandbSink:
    def __init__(self, directory: Path, *, project: str, name: str, mode: Literal["online", "offline"],
                 config: dict[str, Any]) -> None:
        import wandb  # the optional extra: train.loggers refuses wandb where it is not installed

        id_file = directory / ID_FILE
        if not id_file.is_file():
            id_file.write_text(secrets.token_hex(6))  # W&B run ids: lowercase letters and digits
        self.run = wandb.init(project=project, name=name, id=id_file.read_text().strip(), resume="allow", mode=mode,
                              dir=str(directory), config=config,
                              settings=wandb.Settings(console="off", silent=True, x_disable_stats=True))

    def log(self, step: int, values: Iterable[tuple[str, float]]) -> None:
        self.run.log(dict(values), step=step)

    def close(self) -> None:
        self.run.finish()
