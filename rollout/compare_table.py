"""A comparison of two campaigns (rollout.compare's result) as tables for people: the headline scores and
pass@1 per domain, one row each, shares in percent and their deltas in percentage points with the paired
bootstrap interval. compare.md is written from these rows, and so are the pipeline's results.md and console
table (tbjax.pipeline.results), so the three say the same."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rollout.evaluation.coverage import describe
from rollout.report_numbers import interval, pct, points

Row = tuple[str, str, str, str, str]


def score_rows(result: dict[str, Any]) -> list[Row]:
    """(score, a, b, delta, 95% interval of the delta) for the headline scores: pass@1, pass@k for each
    reported k above 1 (pass@1 is the first row), observed k/k and the system errors left out of them."""
    a, b, d, ci = result["a"], result["b"], result["delta"], result["ci"]
    k = a["k"]
    rows = [("pass@1", pct(a["pass@1"]), pct(b["pass@1"]), points(d["pass@1"]), interval(ci["pass@1"]))]
    for key in sorted(ci["pass@k"], key=int):
        if key != "1":
            rows.append((f"pass@{key}", pct(a["pass@k"].get(key)), pct(b["pass@k"].get(key)),
                         points(d["pass@k"].get(key)), interval(ci["pass@k"][key])))
    oa, ob = a["observed_k_of_k"], b["observed_k_of_k"]
    rows.append((f"observed {k}/{k}", f"{oa['count']} ({pct(oa['share'])})", f"{ob['count']} ({pct(ob['share'])})",
                 points(d["observed_k_of_k"]["share"]), interval(ci["observed_k_of_k"]["share"])))
    rows.append(("system errors (excluded)", str(a["system_errors"]["total"]), str(b["system_errors"]["total"]),
                 "", ""))
    return rows


def domain_rows(result: dict[str, Any]) -> list[Row]:
    """Per domain both campaigns ran: pass@1 and the observed k/k count of each, the delta and its interval."""
    rows = []
    for name in sorted(result["b"]["domains"]):
        a, b = result["a"]["domains"].get(name), result["b"]["domains"][name]
        if a is None:
            continue
        ci = result["ci"]["domains"].get(name, {}).get("pass@1")
        rows.append((name, f"{pct(a['pass@1'])}  ({a['observed_k_of_k']['count']} k/k)",
                     f"{pct(b['pass@1'])}  ({b['observed_k_of_k']['count']} k/k)",
                     points(result["delta"]["domains"][name]["pass@1"]), interval(ci)))
    return rows


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table's lines: the header, its rule, one line per row."""
    return [f"| {' | '.join(header)} |", "|" + "---|" * len(header), *(f"| {' | '.join(row)} |" for row in rows)]


def comparison_markdown(result: dict[str, Any], names: tuple[str, str]) -> str:
    """compare.md: campaign b against campaign a (named `names`), the headline scores, pass@1 per domain and
    the tasks gained and lost."""
    a, b = names
    gained, lost = result["gained"], result["lost"]
    lines = [f"# {b} vs {a}", "",
             f"Paired over the {result['ci']['tasks']} tasks scored in both ({a}: {result['a']['k']} trials per task, "
             f"{b}: {result['b']['k']}). Scores are shares of scored trials (pass@1, pass@k) or of tasks (observed "
             "k/k); deltas and their paired bootstrap 95% intervals are in percentage points.", ""]
    for side, name in (("a", a), ("b", b)):
        block = result.get("coverage", {}).get(side)
        if block is not None and not block["exact"]:
            lines += [f"> **{name}'s coverage is not exact** ({describe(block)}): compared as recorded "
                      "(--allow-inexact).", ""]
    lines += markdown_table(("score", a, b, "delta", "95% bootstrap"), score_rows(result))
    lines += [""] + markdown_table(("domain (pass@1, tasks at k/k)", a, b, "delta", "95% bootstrap"),
                                   domain_rows(result))
    lines += ["", f"Tasks gained at k/k: {len(gained['k_of_k'])}, lost: {len(lost['k_of_k'])}; gained at pass@k: "
              f"{len(gained['pass_at_k'])}, lost: {len(lost['pass_at_k'])} (listed in compare.json).", ""]
    return "\n".join(lines)
