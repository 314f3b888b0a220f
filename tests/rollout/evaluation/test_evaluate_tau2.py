"""`python -m rollout.evaluate --suite tau2`: flags that mix the built-in domains' settings with τ²-bench's are
refused naming the fix, the flags become the suite's config (τ²'s user temperature unless given), and, with
τ²'s venv (TBJAX_TAU2_PYTHON; skipped otherwise), one real episode of the tiny policy on an embedded server
against the directed user is graded by τ²'s own evaluator and reported."""

from __future__ import annotations

import json

import pytest

from envs.suite_registry import SUITES
from envs.tau2 import Tau2Config
from rollout import evaluate
from rollout.evaluation import suites
from rollout.records import read_records
from tests.rollout.tau2_support import run_on_tiny_policy

TAU2 = ["--suite", "tau2", "--tau2-python", "/venv/bin/python", "--user-base-url", "http://127.0.0.1:9/v1",
        "--user-model", "user-sim"]


@pytest.mark.parametrize("flags,message", [
    (["--split", "test"], "--split test is τ²-bench's; the built-in domains' splits are train and heldout (or "
                          "choose --suite tau2)"),
    (["--split", "base"], "--split base is τ²-bench's; the built-in domains' splits are train and heldout"),
    ([*TAU2, "--split", "heldout"], "--split heldout is the built-in domains'; τ²-bench's splits are train, test"),
    ([*TAU2, "--tasks", "mine.jsonl"], "--suite tau2 brings its own tasks; drop --tasks"),
    ([*TAU2, "--thinkingbox-data", "clone"], "--suite tau2 brings its own tasks; drop --thinkingbox-data"),
    ([*TAU2, "--domain", "tau2/retail"], "--domain tau2/retail: Input should be 'retail', 'airline' or 'telecom'"),
    ([*TAU2, "--tau2-workers", "0"], "--tau2-workers 0: Input should be greater than 0"),
    ([*TAU2, "--suite", "builtin"], "--tau2-python is another suite's flag, and --suite builtin runs the built-in"),
    (["--suite", "tau2"], "--suite tau2 needs --tau2-python"),
    (["--suite", "tau2", "--tau2-python", "py", "--user-base-url", "http://u/v1"],
     "--suite tau2 needs --user-base-url and --user-model"),
])
def test_mixed_or_missing_flags_are_refused_naming_the_fix(flags, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:
        evaluate.parse_args(["--out", str(tmp_path), *flags])
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err


def test_defaults_per_suite(tmp_path):
    builtin = evaluate.parse_args(["--out", str(tmp_path)])
    assert (builtin.suite, builtin.split) == ("builtin", None)  # the built-in default (heldout) is task_choice's
    tau2 = evaluate.parse_args(["--out", str(tmp_path), *TAU2])
    assert (tau2.split, tau2.tau2_grading, tau2.tau2_workers) == ("test", "tau2", 2)
    # a suite's flags choose it; each of its settings is a flag
    chosen = evaluate.parse_args(["--out", str(tmp_path), *TAU2[2:], "--tau2-max-errors", "3"])
    assert (chosen.suite, chosen.suite_flag, chosen.suite_settings.max_errors) == ("tau2", "--tau2-python", 3)
    # reading records needs neither τ²'s venv nor a user
    assert evaluate.parse_args(["--out", str(tmp_path), "--suite", "tau2", "--from-trials", "t.jsonl"]).split == "test"


@pytest.mark.parametrize("flags,temperature", [([], 0.0), (["--user-temperature", "0.7"], 0.7)])
def test_flags_become_the_suites_config(flags, temperature, tmp_path, monkeypatch):
    args = evaluate.parse_args(["--out", str(tmp_path), *TAU2, "--domain", "retail", "--domain", "airline",
                                "--limit", "3", "--tau2-grading", "both", "--tau2-workers", "4", *flags])
    config = args.suite_settings
    assert isinstance(config, Tau2Config)  # the suite's own settings, validated by their type
    assert (config.python, config.grading, config.workers, config.user_temperature) == (
        "/venv/bin/python", "both", 4, temperature)
    assert (config.user.base_url, config.user.model) == ("http://127.0.0.1:9/v1", "user-sim")
    assert config.domains == ("retail", "airline")
    listed = {}
    monkeypatch.setattr(SUITES["tau2"], "tasks", lambda settings, split: listed.update(split=split) or list(range(9)))
    assert suites.suite_tasks(args) == [0, 1, 2] and listed == {"split": "test"}  # the first --limit of --split


def test_one_retail_test_episode_end_to_end(tmp_path):
    out = tmp_path / "eval"
    code = run_on_tiny_policy(evaluate.main, tmp_path, out, "--domain", "retail", "--split", "test", "--limit", "1",
                              "--k", "1")
    assert code == 0
    [record] = read_records(out / "trials.jsonl")
    assert record.task_id.startswith("tau2/retail/test/") and record.system_error is None, record
    assert record.passed is not None and record.termination in ("user_done", "agent_done")
    assert set(record.reward_breakdown or {}) == {"DB", "COMMUNICATE"}  # τ² evaluator's checks for retail
    summary = json.loads((out / "summary.json").read_text())
    assert summary["tasks"] == 1 and summary["trials"] == 1
