"""The pipeline's closing report: base vs trained on held-out tasks (pass@1, pass@k, observed k/k, per domain,
with paired bootstrap intervals), tokens, wall time per stage and the GRPO learning curve; as a rich table
for the console and as Markdown for results.md (which the README quotes verbatim)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.table import Table

from envs.suite_registry import get_suite
from rollout.compare_table import Row, domain_rows, markdown_table, score_rows
from rollout.report_numbers import pct
from tbjax.config import Config


def _tokens(summary: dict[str, Any]) -> str:
    tokens = summary.get("tokens", {})
    return f"{tokens.get('prompt_tokens', 0):,} in / {tokens.get('completion_tokens', 0):,} out"


SCORE_HEADER = ("score", "base", "trained", "delta", "95% bootstrap")
DECISION_HEADER = ("task kind", "decision", "base", "trained", "change [95% bootstrap]")
HELDOUT_KINDS = {"templates": "held-out templates (requests and tools never trained on)",
                 "instances": "held-out instances of the trained templates (new customers, ids and values)"}


def heldout_description(config: Config) -> str:
    """What the held-out tasks are: as `evaluate.heldout` chooses them among the built-in domains' (HELDOUT_KINDS),
    or a suite's held-out split (τ²-bench's test split)."""
    suite = get_suite(config.tasks.suite)
    if suite.settings_type is None:
        return HELDOUT_KINDS[config.evaluate.heldout]
    return f"the {suite.heldout_split} split of {suite.title} (tasks never selected from or trained on)"


def results_table(result: dict[str, Any], seconds: dict[str, float], heldout: str) -> Table:
    """The comparison on the console; `heldout` says what the held-out tasks are (`heldout_description`)."""
    a = result["a"]
    table = Table(title=f"{heldout}: {a['tasks']} tasks x {a['k']} trials, base vs trained")
    for column in ("score", "base", "trained", "delta", "95% bootstrap"):
        table.add_column(column)
    for row in score_rows(result):
        table.add_row(*row)
    table.add_section()
    for row in domain_rows(result):
        table.add_row(*row)
    table.add_section()
    table.add_row("tokens", _tokens(a), _tokens(result["b"]), "", "")
    table.caption = "wall time: " + ", ".join(f"{name} {s:.0f} s" for name, s in seconds.items()) + \
        f"; total {sum(seconds.values()) / 60:.1f} min"
    return table


CURVE_HEADER = ("step", "informative groups", "reward mean", "pass rate", "malformed calls", "validation pass@1",
                "update")


def curve_rows(steps: Sequence[dict[str, Any]]) -> list[Row]:
    """The learning curve as table rows, from rollout.plots.read_steps' rows: per GRPO step the groups with
    a learning signal, reward mean and pass rate, the malformed tool calls of its episodes, the validation
    score where one was taken, and the update (its loss and grad norm, or skipped)."""
    rows = []
    for row in steps:
        groups = row.get("groups_informative", 0) + row.get("groups_dropped", 0)
        update = "skipped (no informative group)" if row.get("skipped") else \
            f"loss {row['loss']:+.4f}, grad norm {row['grad_norm']:.3f}"
        rows.append((str(row["step"]), f"{row.get('groups_informative', 0)} of {groups}",
                     pct(row.get("reward_mean")), pct(row.get("pass_rate")), str(row.get("malformed_tool_calls", "")),
                     pct(row.get("validation_pass_at_1")), update))
    return rows


def exported_line(grpo: dict[str, Any]) -> str:
    """Which GRPO step the trained policy is (grpo/summary.json): the best-validated one, or the last."""
    scores, steps = {int(step): score for step, score in grpo.get("validation", {}).items()}, grpo["steps"]
    if not scores:
        return f"Trained policy: the last GRPO step's ({steps}); no validation split was scored."
    best = grpo["best_step"]
    return (f"Trained policy: GRPO step {best} of {steps}, the best validation pass@1 ({pct(scores[best])}) of the "
            f"scorings at steps {', '.join(str(s) for s in sorted(scores))} (the last step scored "
            f"{pct(scores[max(scores)])}); the validation split is instances of the trained templates, disjoint from "
            "the held-out tasks and never trained on.")


def slips_line(config: Config, slipped: dict[str, dict[str, int]] | None) -> str:
    """The warm start's demonstrator: its slip rates and how many slipped demonstrations the verifier failed."""
    if not config.warm_start.steps:
        return "Warm start: none (the base policy is model.path's)."
    if not config.warm_start.slips:
        return "Warm start: the oracle's demonstrations only (a demonstrator that never slips)."
    parts = []
    for name, rate in config.warm_start.slips.items():
        counts = (slipped or {}).get(name, {"tasks": 0, "failed": 0})
        parts.append(f"{name} {rate:.2f} ({counts['failed']} of {counts['tasks']} recorded slips fail)")
    return ("Warm start: a demonstrator that slips (chance per drawn demonstration of a task that admits the slip): "
            + "; ".join(parts) + ".")


def results_markdown(result: dict[str, Any], seconds: dict[str, float], config: Config,
                     steps: Sequence[dict[str, Any]] = (), decisions: Sequence[Sequence[str]] = (),
                     slipped: dict[str, dict[str, int]] | None = None,
                     on_templates: dict[str, Any] | None = None, grpo: dict[str, Any] | None = None) -> str:
    a = result["a"]
    lines = [f"{heldout_description(config).capitalize()}: {a['tasks']} tasks x {a['k']} trials each, "
             "the same sampling seeds for both policies; "
             f"intervals are paired bootstrap 95% over tasks ({config.evaluate.bootstrap_resamples} resamples).",
             "", slips_line(config, slipped), ""]
    if grpo is not None:
        lines += [exported_line(grpo), ""]
    lines += markdown_table(SCORE_HEADER, score_rows(result))
    if decisions:
        lines += [""] + markdown_table(DECISION_HEADER, decisions)
    lines += [""] + markdown_table(("domain (pass@1, tasks at k/k)", *SCORE_HEADER[1:]), domain_rows(result))
    if on_templates:
        t = on_templates["a"]
        lines += ["", f"{HELDOUT_KINDS['templates'].capitalize()}, beside them (no target): {t['tasks']} tasks x "
                  f"{t['k']} trials each.", ""]
        lines += markdown_table(SCORE_HEADER, score_rows(on_templates))
    lines += ["", f"Tokens: base {_tokens(a)}; trained {_tokens(result['b'])}. Malformed tool calls: base "
              f"{a.get('malformed_tool_calls', 0)}, trained {result['b'].get('malformed_tool_calls', 0)}.", ""]
    lines += markdown_table(("stage", "wall time"), [(name, f"{s:.0f} s") for name, s in seconds.items()])
    lines += [f"| total | {sum(seconds.values()) / 60:.1f} min |", ""]
    if steps:
        lines += ["Learning curve (GRPO, `grpo/metrics.jsonl`; plotted in `learning_curves.png`):", ""]
        lines += markdown_table(CURVE_HEADER, curve_rows(steps)) + [""]
    return "\n".join(lines)
