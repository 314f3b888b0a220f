"""The pipeline's closing report: base vs trained on held-out tasks (pass@1, pass@k, observed k/k, per domain,
with paired bootstrap intervals), tokens, wall time per stage and the GRPO learning curve; as a rich table
for the console and as Markdown for results.md (which the README quotes verbatim)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.table import Table

from tbjax.config import TrainConfig

Row = tuple[str, str, str, str, str]


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _points(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:+.1f} pts"


def _interval(ci: list[float] | None) -> str:
    return "n/a" if ci is None else f"[{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]"


def score_rows(result: dict[str, Any]) -> list[Row]:
    """(score, base, trained, delta, 95% interval of the delta) for the headline scores."""
    a, b, d, ci = result["a"], result["b"], result["delta"], result["ci"]
    k = a["k"]
    rows = [("pass@1", _pct(a["pass@1"]), _pct(b["pass@1"]), _points(d["pass@1"]), _interval(ci["pass@1"]))]
    for key in sorted(ci["pass@k"], key=int):
        if key != "1":
            rows.append((f"pass@{key}", _pct(a["pass@k"].get(key)), _pct(b["pass@k"].get(key)),
                         _points(d["pass@k"].get(key)), _interval(ci["pass@k"][key])))
    oa, ob = a["observed_k_of_k"], b["observed_k_of_k"]
    rows.append((f"observed {k}/{k}", f"{oa['count']} ({_pct(oa['share'])})", f"{ob['count']} ({_pct(ob['share'])})",
                 _points(d["observed_k_of_k"]["share"]), _interval(ci["observed_k_of_k"]["share"])))
    rows.append(("system errors (excluded)", str(a["system_errors"]["total"]), str(b["system_errors"]["total"]),
                 "", ""))
    return rows


def domain_rows(result: dict[str, Any]) -> list[Row]:
    """Per domain: pass@1 and observed k/k count, base and trained."""
    rows = []
    for name in sorted(result["b"]["domains"]):
        a, b = result["a"]["domains"].get(name), result["b"]["domains"][name]
        if a is None:
            continue
        ci = result["ci"]["domains"].get(name, {}).get("pass@1")
        rows.append((name, f"{_pct(a['pass@1'])}  ({a['observed_k_of_k']['count']} k/k)",
                     f"{_pct(b['pass@1'])}  ({b['observed_k_of_k']['count']} k/k)",
                     _points(result["delta"]["domains"][name]["pass@1"]), _interval(ci)))
    return rows


def _tokens(summary: dict[str, Any]) -> str:
    tokens = summary.get("tokens", {})
    return f"{tokens.get('prompt_tokens', 0):,} in / {tokens.get('completion_tokens', 0):,} out"


HELDOUT_KINDS = {"templates": "held-out templates (requests and tools never trained on)",
                 "instances": "held-out instances of the trained templates (new customers, ids and values)"}


def results_table(result: dict[str, Any], seconds: dict[str, float], heldout: str) -> Table:
    a = result["a"]
    table = Table(title=f"{HELDOUT_KINDS[heldout]}: {a['tasks']} tasks x {a['k']} trials, base vs trained")
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


def curve_rows(steps: Sequence[dict[str, Any]]) -> list[Row]:
    """The learning curve as table rows, from rollout.plots.read_steps' rows: per GRPO step the groups with
    a learning signal, reward mean and pass rate, and the update (its loss and grad norm, or skipped)."""
    rows = []
    for row in steps:
        groups = row.get("groups_informative", 0) + row.get("groups_dropped", 0)
        update = "skipped (no informative group)" if row.get("skipped") else \
            f"loss {row['loss']:+.4f}, grad norm {row['grad_norm']:.3f}"
        rows.append((str(row["step"]), f"{row.get('groups_informative', 0)} of {groups}",
                     _pct(row.get("reward_mean")), _pct(row.get("pass_rate")), update))
    return rows


def slips_line(config: TrainConfig, slipped: dict[str, dict[str, int]] | None) -> str:
    """The warm start's demonstrator: its slip rates and how many slipped demonstrations the verifier failed."""
    if not config.warm_start.slips:
        return "Warm start: the oracle's demonstrations only (a demonstrator that never slips)."
    parts = []
    for name, rate in config.warm_start.slips.items():
        counts = (slipped or {}).get(name, {"tasks": 0, "failed": 0})
        parts.append(f"{name} {rate:.2f} ({counts['failed']} of {counts['tasks']} recorded slips fail)")
    return ("Warm start: a demonstrator that slips (chance per drawn demonstration of a task that admits the slip): "
            + "; ".join(parts) + ".")


def results_markdown(result: dict[str, Any], seconds: dict[str, float], config: TrainConfig,
                     steps: Sequence[dict[str, Any]] = (), decisions: Sequence[Sequence[str]] = (),
                     slipped: dict[str, dict[str, int]] | None = None,
                     on_templates: dict[str, Any] | None = None) -> str:
    a = result["a"]
    lines = [f"{HELDOUT_KINDS[config.evaluate.heldout].capitalize()}: {a['tasks']} tasks x {a['k']} trials each, "
             "the same sampling seeds for both policies; "
             f"intervals are paired bootstrap 95% over tasks ({config.evaluate.bootstrap_resamples} resamples).",
             "", slips_line(config, slipped),
             "", "| score | base | trained | delta | 95% bootstrap |", "|---|---|---|---|---|"]
    lines += [f"| {' | '.join(row)} |" for row in score_rows(result)]
    if decisions:
        lines += ["", "| task kind | decision | base | trained | change |", "|---|---|---|---|---|"]
        lines += [f"| {' | '.join(row)} |" for row in decisions]
    lines += ["", "| domain (pass@1, tasks at k/k) | base | trained | delta | 95% bootstrap |", "|---|---|---|---|---|"]
    lines += [f"| {' | '.join(row)} |" for row in domain_rows(result)]
    if on_templates:
        t = on_templates["a"]
        lines += ["", f"{HELDOUT_KINDS['templates'].capitalize()}, beside them (no target): {t['tasks']} tasks x "
                  f"{t['k']} trials each.", "", "| score | base | trained | delta | 95% bootstrap |",
                  "|---|---|---|---|---|"]
        lines += [f"| {' | '.join(row)} |" for row in score_rows(on_templates)]
    lines += ["", f"Tokens: base {_tokens(a)}; trained {_tokens(result['b'])}.", "",
              "| stage | wall time |", "|---|---|"]
    lines += [f"| {name} | {s:.0f} s |" for name, s in seconds.items()]
    lines += [f"| total | {sum(seconds.values()) / 60:.1f} min |", ""]
    if steps:
        lines += ["Learning curve (GRPO, `grpo/metrics.jsonl`; plotted in `learning_curves.png`):", "",
                  "| step | informative groups | reward mean | pass rate | update |", "|---|---|---|---|---|"]
        lines += [f"| {' | '.join(row)} |" for row in curve_rows(steps)] + [""]
    return "\n".join(lines)
