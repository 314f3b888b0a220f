"""`python scripts/draws_table.py LABEL=RUN_DIR ...`: one markdown row per finished `python -m tbjax.train` run,
the table of runs across draws in tbjax/pipeline/README.md, read from the runs' own files instead of copied.

Per run: held-out pass@1 of the base and trained policies with the paired bootstrap interval of the change
(compare/compare.json), observed k/k and its ratio, direct writes made with their interval (the decision table
of results.md, recomputed from the two campaigns' trials), GRPO's malformed tool calls in its first and last
five steps (grpo/metrics.jsonl), the exported step (grpo/summary.json) and the wall time (stages.json).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rollout.decisions import decision_rows
from rollout.records import read_records
from tbjax.config import load_config
from tbjax.pipeline.stages import heldout_split

HEADER = ("run", "base pass@1", "trained pass@1", "delta [95% paired bootstrap]", "observed k/k",
          "direct writes made", "malformed calls", "exported step", "wall time")
EDGE = 5  # GRPO steps at each end whose malformed calls are compared


def row(label: str, run: Path) -> list[str]:
    compare = json.loads((run / "compare" / "compare.json").read_text())
    a, b, ci = compare["a"], compare["b"], compare["ci"]
    low, high = ci["pass@1"]
    ka, kb = a["observed_k_of_k"]["count"], b["observed_k_of_k"]["count"]
    config = load_config(run / "grpo" / "config.yaml", saved_by_run=True)
    _, heldout = heldout_split(config)
    kinds = {task.id: task.kind.value for task in heldout}
    decisions = decision_rows(read_records(run / "eval" / "base" / "trials.jsonl"),
                              read_records(run / "eval" / "trained" / "trials.jsonl"), kinds,
                              resamples=config.evaluate.bootstrap_resamples, seed=config.evaluate.seed)
    direct = next((d for d in decisions if d[:2] == ("direct", "made the change")), None)
    steps = [json.loads(line) for line in (run / "grpo" / "metrics.jsonl").read_text().splitlines()]
    malformed = [step.get("malformed_tool_calls", 0) for step in steps]
    grpo = json.loads((run / "grpo" / "summary.json").read_text())
    minutes = sum(json.loads((run / "stages.json").read_text()).values()) / 60
    return [label, f"{100 * a['pass@1']:.1f}%", f"{100 * b['pass@1']:.1f}%",
            f"{100 * (b['pass@1'] - a['pass@1']):+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]",
            f"{ka} -> {kb} ({kb / ka:.2f}x)" if ka else f"{ka} -> {kb}",
            "none held out" if direct is None else f"{direct[2].split()[0]} -> {direct[3].split()[0]}, {direct[4]}",
            f"{sum(malformed[:EDGE])} / {sum(malformed[-EDGE:])}",
            f"{grpo.get('best_step', grpo['steps'])} of {grpo['steps']}", f"{minutes:.0f} min"]


def main(argv: list[str]) -> int:
    if not argv or any("=" not in arg for arg in argv):
        print(__doc__.splitlines()[0], file=sys.stderr)
        return 2
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for arg in argv:
        label, path = arg.split("=", 1)
        lines.append("| " + " | ".join(row(label, Path(path))) + " |")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
