"""Per-step metrics for people and for tools: one rich line per step on the console, one JSON object per
line in metrics.jsonl (appended, so a resumed run continues the same file)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console

console = Console()


class MetricsLog:
    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, metrics: dict[str, Any]) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(metrics, sort_keys=True) + "\n")
        console.print(self.line(metrics))

    @staticmethod
    def line(m: dict[str, Any]) -> str:
        reward = "n/a" if m.get("pass_rate") is None else f"{m['pass_rate']:.3f}"
        update = "[yellow]skipped (no signal)[/yellow]" if m.get("skipped") else (
            f"loss {m['loss']:+.4f} grad {m['grad_norm']:.3f} clip {m['clip_fraction']:.3f} "
            f"ent {m['entropy']:.2f} gap {m['logprob_gap']:.2e}")
        errors = sum(m.get("system_errors", {}).values())
        return (f"step {m['step']:>4} | pass {reward} | groups {m['groups_informative']} kept "
                f"{m['groups_dropped']} dropped {m['groups_refilled']} refilled | sys-err {errors} | {update} | "
                f"{m['rollout_tokens_per_s']:.0f} tok/s | rollout {m['time_rollout_s']:.1f}s update "
                f"{m['time_update_s']:.1f}s save {m['time_save_s']:.1f}s publish {m['time_publish_s']:.1f}s")
