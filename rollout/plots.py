"""Plots of a training run and of a before/after comparison, from the files those steps already write.

- `learning_curves_png(run/metrics.jsonl, out)`: reward_mean and pass_rate per training step, with the steps
  whose optimizer update was skipped (no informative group) shaded across the panel, since a flat stretch of
  the curve means something else there; the shading spans the whole height, so it reads as no value
  (a marker at 0 read as a 0% pass rate).
- `warm_start_png(warm_start/metrics.jsonl, out, copy_drills)`: the warm start's loss (mean negative
  log-likelihood of the trained tokens) per update, the copy drills shaded apart from the demonstrations.
- `compare_domains_png(compare/compare.json, out)`: pass@1 per domain before (campaign a) and after (b),
  all domains pooled first, from `python -m rollout.compare`'s output.

All read only the files (no tbjax import: the trainer calls them after it wrote its metrics) and write the
PNG atomically; charts are rollout.evaluation.charts'.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from rollout.evaluation.charts import default_style, grouped_bars, label_axes, new_figure, outside_legend, write_png

SKIPPED = "step skipped: no informative group, no update"
CURVES = (("reward_mean", "reward mean (informative groups)"), ("pass_rate", "pass rate (scored episodes)"))
SCORINGS = ("validation_pass_at_1", "heldout_pass_at_1")  # pass@1 of the scorings during training, where run
# metrics renamed since runs logged them, old -> new: a metrics.jsonl written before the rename (or by a run resumed
# across it) reads under the new names
RENAMED_METRICS = {"refit_probe_max_diff": "weight_probe_max_diff", "refit_probe_base_gap": "weight_probe_base_gap"}


def read_steps(metrics_jsonl: Path) -> list[dict[str, Any]]:
    """The metrics lines that carry a step, one per step in step order, renamed metrics under their new names
    (RENAMED_METRICS); when a resumed run logged a step again (the file is appended to), its last line wins.
    Raises ValueError naming the file when a line is not JSON or no line has a step."""
    steps: dict[int, dict[str, Any]] = {}
    for number, line in enumerate(Path(metrics_jsonl).read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{metrics_jsonl}:{number} is not a JSON line ({error})") from error
        if isinstance(row, dict) and isinstance(row.get("step"), int):
            steps[row["step"]] = {RENAMED_METRICS.get(str(key), str(key)): value for key, value in row.items()}
    if not steps:
        raise ValueError(f"{metrics_jsonl} has no training steps (no JSON line with an integer \"step\"); "
                         "expected the trainer's metrics.jsonl")
    return [steps[step] for step in sorted(steps)]


def _value(row: dict[str, Any], key: str) -> float:
    """A metric as a float; NaN (a gap in the line) where it is missing or null."""
    value = row.get(key)
    return math.nan if value is None else float(value)


def learning_curves_png(metrics_jsonl: Path, out: Path) -> Path:
    """The trainer's metrics.jsonl as learning curves (learning_curves_figure) in the PNG `out`; returns `out`."""
    return write_png(out, learning_curves_figure(read_steps(metrics_jsonl)))


def _curve(axes: Axes, rows: Sequence[dict[str, Any]], key: str) -> None:
    """The metric `key` of `rows` over their steps, one line labelled `key` (dots on the points while they
    are few enough to tell apart); null values are gaps."""
    axes.plot([row["step"] for row in rows], [_value(row, key) for row in rows], label=key,
              marker="o" if len(rows) <= 100 else None, markersize=3)


@default_style()
def learning_curves_figure(rows: Sequence[dict[str, Any]]) -> Figure:
    """Two panels over training steps: reward_mean and pass_rate (fractions in [0, 1]); null values are gaps,
    steps whose optimizer update was skipped are shaded on both. `rows`: read_steps' result."""
    skipped = [row["step"] for row in rows if row.get("skipped")]
    figure = new_figure(8.0, 6.0)
    panels = figure.subplots(2, 1, sharex=True)
    for axes, (key, label) in zip(panels, CURVES, strict=True):
        _curve(axes, rows, key)
        if key == "pass_rate":  # the scorings during training, on tasks that are not trained on
            for scored in SCORINGS:
                points = [row for row in rows if row.get(scored) is not None]
                if points:
                    axes.plot([row["step"] for row in points], [row[scored] for row in points], label=scored,
                              marker="s", linestyle="--", markersize=4)
        for n, step in enumerate(skipped):  # one step wide, the panel's full height, one legend entry
            axes.axvspan(step - 0.5, step + 0.5, color="0.85", linewidth=0, label=SKIPPED if n == 0 else None)
        axes.set_ylim(-0.05, 1.05)
        label_axes(axes, label, "training step" if axes is panels[-1] else "", key)
        outside_legend(axes)
    figure.suptitle(f"Learning curves ({len(rows)} steps)")
    return figure


def warm_start_png(metrics_jsonl: Path, out: Path, copy_drills: int = 0) -> Path:
    """The warm start's metrics.jsonl (tbjax.warmstart) as its loss curve (warm_start_figure) in the PNG `out`;
    returns `out`."""
    return write_png(out, warm_start_figure(read_steps(metrics_jsonl), copy_drills))


@default_style()
def warm_start_figure(rows: Sequence[dict[str, Any]], copy_drills: int = 0) -> Figure:
    """The loss per warm-start update (`nll`: mean negative log-likelihood of the trained tokens, log scale);
    the first `copy_drills` updates, on copy drills rather than demonstrations, shaded. `rows`: read_steps'
    result."""
    figure = new_figure(8.0, 4.5)
    axes = figure.add_subplot()
    _curve(axes, rows, "nll")
    if copy_drills:
        axes.axvspan(0.5, copy_drills + 0.5, color="0.9", linewidth=0, label=f"copy drills (updates 1-{copy_drills})")
    axes.set_yscale("log")
    label_axes(axes, f"Warm start loss ({len(rows)} updates)", "update", "nll (nats per trained token)")
    outside_legend(axes)
    return figure


def _domain_scores(summary: dict[str, Any], domains: Sequence[str]) -> list[float | None]:
    return [summary["pass@1"], *(summary["domains"].get(name, {}).get("pass@1") for name in domains)]


def compare_domains_png(compare_json: Path, out: Path, names: tuple[str, str] = ("a (before)", "b (after)")
                        ) -> Path:
    """compare.json's per-domain pass@1 (compare_domains_figure) in the PNG `out`; returns `out`. Raises
    ValueError naming the file when it lacks the a and b summaries."""
    result = json.loads(Path(compare_json).read_text())
    try:
        figure = compare_domains_figure(result["a"], result["b"], names)
    except (KeyError, TypeError) as error:
        raise ValueError(f"{compare_json} is not rollout.compare's compare.json (it needs `a` and `b` "
                         f"summaries with pass@1 and domains): missing {error}") from error
    return write_png(out, figure)


@default_style()
def compare_domains_figure(a: dict[str, Any], b: dict[str, Any], names: tuple[str, str]) -> Figure:
    """Grouped bars of pass@1, all domains pooled then each domain, campaign a beside campaign b (summaries
    as in summary.json); a domain only one campaign ran shows "n/a" for the other."""
    domains = sorted(set(a["domains"]) | set(b["domains"]))
    figure = new_figure(max(6.0, 1.2 * len(domains) + 3), 4.5)
    axes = figure.add_subplot()
    grouped_bars(axes, ["all", *domains], {names[0]: _domain_scores(a, domains), names[1]: _domain_scores(b, domains)},
                 value_format=".1%", top=1.0)
    label_axes(axes, f"pass@1 per domain: {names[1]} vs {names[0]}", "domain", "pass@1 (share of scored trials)")
    return figure
