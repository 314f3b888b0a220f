"""`python -m rollout.select`: choose training tasks by the base policy's difficulty (Jeffreys bands).

    python -m rollout.select --from-trials base/trials.jsonl --out runs/select [--reference ref/trials.jsonl]
    python -m rollout.select --engine embedded --model DIR --n 8 --split train --out runs/select
    python -m rollout.select --engine ... --suite tau2 --tau2-python PY --user-base-url URL --user-model NAME
        [--domain retail] [--split train] --out runs/select

With an engine it first runs the policy n times per candidate into out/trials.jsonl (resumable, like
`rollout.evaluate`), then selects from those records. Rules and defaults: rollout/evaluation/selection.py.
With --suite tau2 the candidates are τ²-bench's train split, played through the suite's own sessions and
graded fast (τ²'s reward read from the live environment, as training grades; --tau2-grading); its test split
is held out, so a test task among the candidates (--split test or base) stops the command, named.
Writes atomically, reproducible byte for byte from the same inputs and settings (no clocks, no absolute paths):
- selected.yaml    `tasks:` the selected task ids, sorted (what the trainer reads)
- aggregates.jsonl per task: n, k, system_errors, posterior band masses, band, 95% interval, gate, reason
- manifest.json    inputs' and outputs' sha256, settings, tasks per band, reasons
- bands.png        tasks per band (hardest first; kept bands coloured apart), labelled
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import hashlib
import json
import logging
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from envs import Task
from envs.errors import ConfigError
from envs.suite_registry import get_suite
from rollout.episode import SessionOpener
from rollout.evaluate import TRIALS_FILE
from rollout.evaluation import suites
from rollout.evaluation.charts import png_bytes
from rollout.evaluation.engine_flags import add_engine_flags, trial_runner_from_flags
from rollout.evaluation.figures import bands_figure
from rollout.evaluation.runner import run_trials
from rollout.evaluation.selection import (
    BAND_EDGES,
    BAND_NAMES,
    KEEP,
    SelectionConfig,
    band_counts,
    select,
)
from rollout.launch_sglang import LaunchError
from rollout.log_routing import LOG_FILE, OWN_PACKAGES, add_verbose_flag, route_logs
from rollout.records import TrialLog, atomic_write, canonical_json, read_records, task_counts
from rollout.task_choice import (
    COMMAND_FLAGS,
    BenchmarkExclusion,
    TaskChoiceError,
    TaskSource,
    benchmark_exclusion,
    command_tasks,
    split_tasks,
)

log = logging.getLogger("rollout.select")
OUTPUTS = ("selected.yaml", "aggregates.jsonl", "bands.png")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _input_entry(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    return {"name": path.name, "sha256": _sha256(data), "lines": data.count(b"\n")}


def run_selection(trials: Path, out: Path, config: SelectionConfig, *, reference: Path | None = None,
                  exclusion: BenchmarkExclusion | None = None) -> dict[str, Any]:
    """Selects from the records in `trials` (and the reference model's in `reference`), writes the four
    outputs under `out` and returns the manifest."""
    exclusion = benchmark_exclusion() if exclusion is None else exclusion
    records = read_records(trials)
    errors = Counter(r.task_id for r in records if r.system_error is not None)
    refs = {t.task_id: t for t in task_counts(read_records(reference))} if reference else None
    rows = select(task_counts(records), config, system_errors=errors, reference=refs, exclusion=exclusion)
    judged = [row for row in rows if row["reason"] not in ("benchmark_task", "too_few_clean_runs")]
    if rows and not judged and any(row["reason"] == "too_few_clean_runs" for row in rows):
        most = max(row["n"] for row in rows)
        raise ValueError(f"no candidate has min_clean_runs={config.min_clean_runs} clean trials (the most any has: "
                         f"{most}), so none can be judged: run more trials per candidate (--n) or lower "
                         "--min-clean-runs; nothing was written")
    chosen = [row["task_id"] for row in rows if row["selected"]]
    per_band = band_counts(rows, config)
    files = {
        "selected.yaml": yaml.safe_dump({"tasks": chosen}, sort_keys=True, default_flow_style=False).encode(),
        "aggregates.jsonl": "".join(json.dumps(row, sort_keys=True) + "\n" for row in rows).encode(),
        "bands.png": png_bytes(bands_figure(per_band, config.band_names, config.band_edges, config.keep)),
    }
    inputs = [_input_entry(trials)] + ([_input_entry(reference)] if reference else [])
    manifest = {
        "inputs": inputs, "outputs": {name: _sha256(data) for name, data in files.items()},
        "settings": {**dataclasses.asdict(config), "benchmark_exclusion": exclusion.describe()},
        "counts": {"candidates": len(rows), "selected": len(chosen), "per_band": per_band,
                   "reasons": dict(sorted(Counter(row["reason"] for row in rows).items())),
                   "system_error_trials": sum(errors.values())},
    }
    for name in OUTPUTS:
        atomic_write(out / name, files[name])
    atomic_write(out / "manifest.json", canonical_json(manifest))
    return manifest


def _read_ids(path: Path) -> list[str]:
    """Task ids from a YAML list, a YAML `tasks:` mapping (selected.yaml) or one id per line."""
    loaded = yaml.safe_load(path.read_text())
    if isinstance(loaded, dict):
        loaded = loaded.get("tasks", [])
    if not isinstance(loaded, list):
        raise ValueError(f"{path}: expected a list of task ids (YAML list or `tasks:`)")
    return [str(item) for item in loaded]


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m rollout.select", description=(__doc__ or "").split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--from-trials", type=Path, help="the base policy's trial records (else run them: --engine)")
    p.add_argument("--n", type=int, default=8, help="trials per candidate when running the policy")
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--resume", action="store_true", help="continue out/trials.jsonl")
    p.add_argument("--domain", action="append", help="a candidate domain: a built-in or installed one by name, "
                   "or module:attr; with --suite tau2 a bare τ² domain (repeatable; default: all)")
    p.add_argument("--split", default="train", choices=suites.SPLITS,
                   help="the candidates' split (default train; τ²-bench's test split is never selected from)")
    p.add_argument("--tasks", type=Path, help="a JSONL file of candidate tasks")
    p.add_argument("--limit", type=int, help="only the first N candidates")
    p.add_argument("--band-edges", default=",".join(map(str, BAND_EDGES)), help="edges from 0 to 1")
    p.add_argument("--band-names", default=",".join(BAND_NAMES), help="band names, hardest first")
    p.add_argument("--keep", default=",".join(KEEP), help="bands to select")
    p.add_argument("--min-clean-runs", type=int, default=SelectionConfig.min_clean_runs)
    p.add_argument("--reference", type=Path, help="a reference model's trial records: enables the solvability gate")
    p.add_argument("--gate-min-runs", type=int, default=SelectionConfig.gate_min_runs)
    p.add_argument("--exclude-ids", type=Path, action="append", default=[], help="more benchmark task ids (file)")
    p.add_argument("--exclude-prefix", action="append", default=[], help="more benchmark task id prefixes")
    add_engine_flags(p)
    suites.add_suite_flags(p, evaluation=False)
    add_verbose_flag(p)
    args = p.parse_args(argv)
    suites.check_suite_flags(p, args, evaluation=False)
    return args


def config_from_args(args: argparse.Namespace) -> SelectionConfig:
    return SelectionConfig(
        band_names=tuple(args.band_names.split(",")), band_edges=tuple(float(e) for e in args.band_edges.split(",")),
        keep=tuple(k for k in args.keep.split(",") if k), min_clean_runs=args.min_clean_runs,
        gate=args.reference is not None, gate_min_runs=args.gate_min_runs)


async def _collect(args: argparse.Namespace) -> Path:
    """The base policy's records: --from-trials, or run n trials per candidate into out/trials.jsonl."""
    if args.from_trials:
        return args.from_trials
    if suites.brings_own_tasks(args):
        candidates = suite_candidates(args)
        async with suites.suite_sessions(args) as opener:
            await _run_candidates(args, candidates, opener)
    else:
        await _run_candidates(args, command_tasks(args.tasks, args.domain, args.split, args.limit, for_training=True))
    return args.out / TRIALS_FILE


def suite_candidates(args: argparse.Namespace) -> list[Task]:
    """The chosen suite's tasks of --split as candidates, refused (naming one) when any is a benchmark task (τ²'s
    test split): those are evaluation-only, so τ²'s --split test and base stop here, before any engine starts."""
    try:
        return split_tasks(TaskSource(pool=suites.suite_tasks(args), names=COMMAND_FLAGS), None, for_training=True)
    except TaskChoiceError as error:
        raise TaskChoiceError(f"{args.suite_flag} --split {args.split}: {error}; select from --split "
                              f"{get_suite(args.suite).splits[0]}") from error


async def _run_candidates(args: argparse.Namespace, tasks: list[Task], opener: SessionOpener | None = None) -> None:
    """n trials of every candidate into out/trials.jsonl, episodes opened by `opener` (None: the built-in
    domains')."""
    async with trial_runner_from_flags(args, opener=opener) as runner:
        with TrialLog(args.out / TRIALS_FILE, resume=args.resume) as trial_log:
            await run_trials(tasks, args.n, runner, trial_log, concurrency=args.concurrency)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    route_logs(args.out / LOG_FILE, verbose=args.verbose, own=OWN_PACKAGES)
    try:
        config = config_from_args(args)
        exclusion = benchmark_exclusion().merged(
            [i for path in args.exclude_ids for i in _read_ids(path)], args.exclude_prefix)
        manifest = run_selection(asyncio.run(_collect(args)), args.out, config, reference=args.reference,
                                 exclusion=exclusion)
    except (FileExistsError, ValueError, LaunchError, ConfigError) as error:
        log.error("%s", error)
        return 2
    counts = manifest["counts"]
    log.info("selected %d of %d candidates; per band %s; written to %s", counts["selected"], counts["candidates"],
             counts["per_band"], args.out)
    if not counts["selected"]:
        log.error("nothing selected (%s): selected.yaml is empty; keep other bands (--keep) or other candidates",
                  counts["reasons"])
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
