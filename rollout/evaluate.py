"""`python -m rollout.evaluate`: k trials per task against an engine, then reliability, cost and a report.

    python -m rollout.evaluate --engine embedded --model DIR --out runs/eval [--k 20] [--resume]
    python -m rollout.evaluate --engine sglang --url http://h:30000 --tokenizer DIR --out runs/eval
    python -m rollout.evaluate --engine openai --base-url URL --model NAME --api-key-env VAR --out runs/eval
    python -m rollout.evaluate --from-trials runs/eval/trials.jsonl --out runs/eval2   # recompute only
    python -m rollout.evaluate --from-run runs/default --out runs/again   # as the run evaluated its policy
    python -m rollout.evaluate ... --thinkingbox-data CLONE --thinkingbox-python PY --user-base-url URL ...
    python -m rollout.evaluate ... --suite tau2 --tau2-python PY --user-base-url URL --user-model NAME
        [--domain retail] [--split test|train|base] [--tau2-grading tau2|fast|both]

Why k trials: one run per task measures pass@1 but not reliability; the share of tasks solved in every one of
k trials (observed k/k) and pass^k are what a deployment cares about. Output under --out: trials.jsonl (one
record per trial, appended as trials end; --resume continues it without redoing finished trials, and with
--retry-system-errors also runs again the trials lost to system errors, whose records move to
system_errors.jsonl), summary.json (public keys, see rollout/evaluation/summary.py; `coverage` says whether
every trial is there and scored: rollout/evaluation/coverage.py), tasks.jsonl (per-task counts and Jeffreys
intervals), report.md (a banner when coverage is not exact), domains.png and successes.png.

--from-run RUN_DIR evaluates as a tbjax run did (rollout/evaluation/from_run.py): its episode settings, prompt
style, tool-call format, seeds and user, and by default its trained policy on its held-out tasks, k and
concurrency, on embedded servers configured as its engine was; on the pipeline's run it repeats eval/trained/'s
trials record for record.

External suites (rollout/evaluation/suites.py) bring their own tasks and session opener: ThinkingBox-Bench
(--thinkingbox-data) and τ²-bench (--suite tau2: its test split by default, graded by τ²'s own evaluator, its
user simulator at τ²'s temperature 0.0 unless --user-temperature is given).

Library use (the trainer passes its in-process engine; this package never imports tbjax)::

    runner = token_trial_runner(engine, interpreter, model="policy-v50", config=EpisodeConfig(...))
    summary = await evaluate(tasks, runner, out=Path("runs/eval"), k=20)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import sys
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from envs import Task
from envs.errors import ConfigError
from rollout.evaluation.coverage import coverage, retried, set_aside
from rollout.evaluation.engine_flags import add_engine_flags, trial_runner_from_flags
from rollout.evaluation.from_run import apply_run, given_flags
from rollout.evaluation.prices import PriceTable, load_prices
from rollout.evaluation.report import markdown_report, write_plots
from rollout.evaluation.runner import TrialRunner, run_trials
from rollout.evaluation.suites import (
    SPLITS,
    add_suite_flags,
    brings_own_tasks,
    check_suite_flags,
    suite_sessions,
    suite_tasks,
)
from rollout.evaluation.summary import summarize, task_rows
from rollout.launch_sglang import LaunchError
from rollout.log_routing import LOG_FILE, OWN_PACKAGES, add_verbose_flag, route_logs
from rollout.records import TrialLog, TrialRecord, atomic_write, canonical_json, read_records
from rollout.task_choice import command_tasks

log = logging.getLogger("rollout.evaluate")
TRIALS_FILE = "trials.jsonl"


def write_reports(records: Sequence[TrialRecord], out: str | Path, *, prices: PriceTable | None = None,
                  k: int | None = None, title: str = "Evaluation",
                  expected: Collection[tuple[str, int]] | None = None) -> dict[str, Any]:
    """summary.json, tasks.jsonl, report.md and the plots for `records`, written atomically; returns the
    summary. `expected`: the (task, trial) pairs the campaign set out to run (default: what the records show),
    against which its coverage is measured."""
    out = Path(out)
    summary = summarize(records, prices, k)
    summary["coverage"] = coverage(records, expected, retried(out))
    rows = task_rows(records)
    atomic_write(out / "summary.json", canonical_json(summary))
    atomic_write(out / "tasks.jsonl", "".join(json.dumps(row, sort_keys=True) + "\n" for row in rows))
    atomic_write(out / "report.md", markdown_report(summary, rows, title))
    write_plots(out, summary, rows)
    return summary


async def evaluate(tasks: Sequence[Task], runner: TrialRunner, *, out: str | Path, k: int = 20, resume: bool = False,
                   concurrency: int = 32, prices: PriceTable | None = None, title: str | None = None,
                   retry_system_errors: bool = False) -> dict[str, Any]:
    """Runs trials 0..k-1 of every task (skipping those already in out/trials.jsonl when `resume`, except
    system-error ones with `retry_system_errors`, which are set aside and run again), then writes the reports
    over exactly these tasks and trials; returns summary.json's content."""
    out = Path(out)
    if len({t.id for t in tasks}) != len(tasks):
        raise ValueError("the task list holds a task id twice; each task is evaluated once with k trials")
    wanted = {(t.id, trial) for t in tasks for trial in range(k)}
    if retry_system_errors:
        if not resume:
            raise ValueError("retrying system errors resumes a campaign: add --resume")
        set_aside(out / TRIALS_FILE, wanted)
    with TrialLog(out / TRIALS_FILE, resume=resume) as trial_log:
        await run_trials(tasks, k, runner, trial_log, concurrency=concurrency, label=title or "trials")
    records = [r for r in read_records(out / TRIALS_FILE) if r.key in wanted]
    models = sorted({r.model for r in records})
    return write_reports(records, out, prices=prices, k=k, title=title or f"Evaluation of {', '.join(models)}",
                         expected=wanted)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m rollout.evaluate", description=(__doc__ or "").split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, type=Path, help="output directory")
    p.add_argument("--k", type=int, default=20, help="trials per task")
    p.add_argument("--concurrency", type=int, default=32, help="trials in flight at once")
    p.add_argument("--resume", action="store_true", help="continue out/trials.jsonl, skipping recorded trials")
    p.add_argument("--retry-system-errors", action="store_true",
                   help="with --resume: run the trials lost to system errors again too (their records move to "
                        "out/system_errors.jsonl)")
    p.add_argument("--from-trials", type=Path, help="no episodes: recompute the reports from these records")
    p.add_argument("--from-run", type=Path, metavar="RUN_DIR",
                   help="evaluate as this tbjax run did: its episode, prompt, tool-call format, seeds and user; by "
                        "default its trained policy, held-out tasks, k and concurrency")
    p.add_argument("--prices", type=Path, help="price table YAML (default configs/prices.yaml)")
    p.add_argument("--domain", action="append",
                   help="a domain: a built-in or installed one by name, or module:attr; with --suite tau2 a bare τ² "
                        "domain (retail, airline, telecom) (repeatable; default: all)")
    p.add_argument("--split", choices=SPLITS,
                   help="the domains' tasks of this split: train or heldout (default heldout; with --tasks, that "
                        "split of the file's); with --suite tau2: train, test or base (default test)")
    p.add_argument("--tasks", type=Path, help="a JSONL file of tasks instead of the domains' own")
    p.add_argument("--limit", type=int, help="only the first N tasks")
    p.add_argument("--title", help="report title")
    add_engine_flags(p)
    add_suite_flags(p, evaluation=True)
    add_verbose_flag(p)
    args = p.parse_args(argv)
    check_suite_flags(p, args, evaluation=True)
    if args.from_run is not None:
        apply_run(p, args, given_flags(p, list(argv), args))
    return args


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    prices = load_prices(args.prices)
    if args.from_trials:
        return write_reports(read_records(args.from_trials), args.out, prices=prices,
                             title=args.title or f"Evaluation from {args.from_trials.name}")
    async with contextlib.AsyncExitStack() as stack:
        if brings_own_tasks(args):  # its sessions end with this campaign
            tasks, opener = suite_tasks(args), await stack.enter_async_context(suite_sessions(args))
        else:  # the built-in domains: the tasks the flags choose, played with the user they name
            tasks, opener = command_tasks(args.tasks, args.domain, args.split, args.limit, for_training=False), None
        runner = await stack.enter_async_context(trial_runner_from_flags(args, opener=opener))
        return await evaluate(tasks, runner, out=args.out, k=args.k, resume=args.resume, concurrency=args.concurrency,
                              prices=prices, title=args.title, retry_system_errors=args.retry_system_errors)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    route_logs(args.out / LOG_FILE, verbose=args.verbose, own=OWN_PACKAGES)
    try:
        summary = asyncio.run(_run(args))
    except (FileExistsError, ValueError, LaunchError, ConfigError) as error:
        log.error("%s", error)
        return 2
    log.info("pass@1 %s over %d tasks, %d scored trials, %d system errors; reports in %s", summary["pass@1"],
             summary["tasks"], summary["trials"], summary["system_errors"]["total"], args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
