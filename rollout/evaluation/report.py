"""The human-readable side of an evaluation: a Markdown report and its PNG plots, from the summary.

Written for a person comparing a policy's reliability with its cost: scores first (with the pooled pass@1's
Jeffreys interval), then domains, system errors (beside the scores, never inside them), tokens and cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rollout.evaluation.charts import write_png
from rollout.evaluation.coverage import describe
from rollout.evaluation.figures import domains_figure, success_histogram, successes_figure
from rollout.metrics import jeffreys_interval


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.2f}%"


def _usd(value: float | None) -> str:
    return "unknown" if value is None else f"${value:,.4f}" if value < 1 else f"${value:,.2f}"


def _score_rows(name: str, block: dict[str, Any]) -> list[str]:
    observed = block["observed_k_of_k"]
    errors = block["system_errors"]["total"]
    return [f"| {name} | {block['tasks']} | {block['trials']} | {_pct(block['pass@1'])} | "
            f"{_pct(block['pass@k'].get(str(block['k'])))} | {observed['count']} ({_pct(observed['share'])}) | "
            f"{errors} |"]


def _hidden_by_errors(summary: dict[str, Any]) -> str:
    """The tasks that passed every scored trial but lost one to a system error, when there are any: counted
    apart so that the strict observed k/k is neither inflated by lost trials nor read without them."""
    hidden = summary["all_clean_trials_passed"]["count"] - summary["observed_k_of_k"]["count"]
    return f", and {hidden} more passed every scored trial but lost a trial to a system error" if hidden else ""


def markdown_report(summary: dict[str, Any], rows: Sequence[dict[str, Any]], title: str) -> str:
    """The report text; `rows` are the per-task rows of tasks.jsonl."""
    k = summary["k"]
    clean, successes = summary["trials"], sum(r["c"] for r in rows)
    lines = [f"# {title}", ""]
    if "coverage" in summary and not summary["coverage"]["exact"]:
        lines += [f"> **Coverage is not exact**: {describe(summary['coverage'])}. The scores below are over the "
                  "trials recorded; run the campaign again with --resume --retry-system-errors.", ""]
    lines += [f"{summary['tasks']} tasks, {clean} scored trials (k = {k} per task), "
             f"{summary['system_errors']['total']} system-error trials reported beside the scores.", ""]
    if clean:
        low, high = jeffreys_interval(clean, successes)
        lines += [f"pass@1 {_pct(summary['pass@1'])} (pooled Jeffreys 95% interval {_pct(low)} - {_pct(high)}); "
                  f"observed {k}/{k}: {summary['observed_k_of_k']['count']} tasks "
                  f"({_pct(summary['observed_k_of_k']['share'])}){_hidden_by_errors(summary)}.", ""]
    lines += ["## Scores", "",
              "| k | pass@k (unbiased) | pass^k combinatorial C(c,k)/C(n,k) | pass^k plug-in (c/n)^k |",
              "|---|---|---|---|"]
    for key, value in summary["pass@k"].items():
        lines.append(f"| {key} | {_pct(value)} | {_pct(summary['pass^k']['combinatorial'][key])} | "
                     f"{_pct(summary['pass^k']['plugin'][key])} |")
    lines += ["", "pass@k and pass^k average over the tasks with at least k scored trials.", "",
              "## Domains", "", f"| domain | tasks | trials | pass@1 | pass@{k} | observed {k}/{k} | system errors |",
              "|---|---|---|---|---|---|---|"]
    lines += _score_rows("**all**", summary)
    for name, block in summary["domains"].items():
        lines += _score_rows(name, block)
    lines += ["", f"![pass@1, pass@{k} and observed {k}/{k} per domain](domains.png)", "",
              "## Tasks by successes", "", "![tasks by number of successful trials](successes.png)", "",
              "Tasks with 0, 1, ..., k successes: " + ", ".join(str(v) for v in success_histogram(rows, k))
              + ". Per-task Jeffreys intervals: tasks.jsonl.", ""]
    errors = summary["system_errors"]
    lines += ["## System errors", ""]
    lines += [f"- {kind}: {count}" for kind, count in errors["by_kind"].items()] or ["- none"]
    unscored = [r["task_id"] for r in rows if r["n"] == 0]
    if unscored:
        lines.append(f"- tasks without a scored trial (left out of every score): {', '.join(unscored)}")
    tokens, cost = summary["tokens"], summary["cost_usd"]
    lines += ["", "## Tokens and cost", "",
              f"- tokens: prompt {tokens['prompt_tokens']:,} (cached {tokens['cached_tokens']:,}), completion "
              f"{tokens['completion_tokens']:,} (reasoning {tokens['reasoning_tokens']:,})",
              f"- cost: campaign {_usd(cost['campaign'])}, per trial {_usd(cost['per_trial'])}, per successful trial "
              f"{_usd(cost['per_success'])}, per observed {k}/{k} task {_usd(cost['per_observed_k_of_k'])}", ""]
    return "\n".join(lines)


def write_plots(out: Path, summary: dict[str, Any], rows: Sequence[dict[str, Any]]) -> list[Path]:
    """domains.png (scores per domain) and successes.png (tasks per success count)."""
    return [write_png(out / "domains.png", domains_figure(summary)),
            write_png(out / "successes.png", successes_figure(rows, summary["k"]))]
