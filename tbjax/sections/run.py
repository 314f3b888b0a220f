"""The `run` section: where a run keeps its checkpoints, logs and exports."""

from __future__ import annotations

from pathlib import Path

from tbjax.sections.base import Section


class RunSection(Section):
    name: str = "default"
    root: str = "runs"

    @property
    def directory(self) -> Path:
        return Path(self.root) / self.name
