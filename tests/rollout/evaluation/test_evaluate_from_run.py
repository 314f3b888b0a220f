"""`rollout.evaluate --from-run`'s reading of a run: the run's settings, policy, tasks, k and engine fill the
command's flags; a flag that contradicts the run or cannot act with it is refused naming it; a directory that is
not a finished run is refused naming what is missing. On a run the pipeline wrote (moved to another directory
than it recorded, as a copied run is). Its trial-for-trial repeat of the pipeline's trained evaluation is tested
on the pipeline's own run (tests/tbjax/pipeline/test_pipeline.py)."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest
import yaml

from envs import load_tasks, write_jsonl
from rollout import evaluate
from rollout.evaluation.agent_sources import embedded_max_len
from tbjax.config import load_config

HELDOUT = 3


@pytest.fixture
def run_dir(tmp_path: Path, tiny_dir) -> Path:
    """A pipeline's run directory as `runs/smoke` recorded it (cwd-relative paths), then moved elsewhere."""
    config = load_config("smoke", ["run.root=runs/smoke", "run.name=grpo", "evaluate.seed=7"])
    run = tmp_path / "moved" / "smoke"
    grpo = run / "grpo"
    shutil.copytree(tiny_dir("qwen3"), grpo / "validated" / "v1")
    (grpo / "config.yaml").write_text(config.to_yaml())
    (grpo / "summary.json").write_text(json.dumps({"steps": 1, "export": "runs/smoke/grpo/validated/v1"}))
    (run / "eval").mkdir()
    write_jsonl(load_tasks("library", "train")[:HELDOUT], run / "eval" / "heldout.jsonl")
    return run


def parsed(run: Path, *flags: str):
    return evaluate.parse_args(["--from-run", str(run), "--out", "unused", *flags])


def refusal(capsys, run: Path, *flags: str) -> str:
    with pytest.raises(SystemExit) as exit_:
        parsed(run, *flags)
    assert exit_.value.code == 2
    return capsys.readouterr().err


def test_the_runs_settings_policy_tasks_and_engine_fill_the_flags(run_dir: Path) -> None:
    args = parsed(run_dir)
    export = run_dir / "grpo" / "validated" / "v1"
    assert (args.prompt, args.tool_call_format, args.seed) == ("compact", "hermes", 7)
    assert (args.max_turns, args.max_tokens_per_turn, args.token_budget) == (4, 24, 1100)
    assert (args.k, args.concurrency) == (2, 16)  # the smoke config's evaluate.k, the section's concurrency
    assert args.user_base_url is None and args.user_temperature is None  # the scripted user
    assert (args.engine, args.model, args.model_name) == ("embedded", str(export), "trained")
    assert shlex.split(args.server_args) == ["--run-config", str(run_dir / "grpo" / "config.yaml"),
                                             "--weight-version", "trained"]
    assert embedded_max_len(args.server_args) == 1280  # the run's rollout.max_len, what the servers hold
    assert args.tasks == run_dir / "eval" / "heldout.jsonl"


def test_what_the_run_did_not_decide_can_be_chosen(run_dir: Path, tmp_path: Path) -> None:
    other = tmp_path / "tasks.jsonl"
    write_jsonl(load_tasks("telecom", "heldout")[:1], other)
    args = parsed(run_dir, "--k", "5", "--concurrency", "3", "--tasks", str(other), "--prompt", "compact",
                  "--model-name", "again")
    assert (args.k, args.concurrency, args.tasks, args.prompt) == (5, 3, other, "compact")
    assert args.model_name == "again" and shlex.split(args.server_args)[-1] == "again"


@pytest.mark.parametrize(("flags", "named"), [
    (["--prompt", "full"], "--prompt full: the run"),
    (["--max-turns", "9"], "--max-turns 9: the run"),
    (["--seed", "0"], "--seed 0: the run"),
    (["--tool-call-format", "qwen3_xml"], "--tool-call-format qwen3_xml: the run"),
    (["--user-temperature", "0.5"], "--user-temperature 0.5: the run"),
    (["--server-args", "--slots 2"], "--server-args sets the servers as the run did"),
    (["--from-trials", "t.jsonl"], "--from-trials recomputes reports"),
    (["--engine", "openai"], "on token-level engines with the built-in domains: drop --engine openai"),
    (["--suite", "tau2", "--tau2-python", "py", "--user-base-url", "http://u/v1", "--user-model", "u"],
     "on token-level engines with the built-in domains: drop --suite tau2"),
])
def test_a_flag_contradicting_the_run_is_refused(run_dir: Path, capsys, flags: list[str], named: str) -> None:
    assert named in refusal(capsys, run_dir, *flags)


def test_a_directory_that_is_not_a_finished_run_is_refused(run_dir: Path, tmp_path: Path, capsys) -> None:
    assert "no config.yaml in" in refusal(capsys, tmp_path)
    (run_dir / "eval" / "heldout.jsonl").unlink()
    assert "choose the tasks with --tasks" in refusal(capsys, run_dir)
    assert parsed(run_dir, "--domain", "library").domain == ["library"]  # chosen tasks need no held-out file
    shutil.rmtree(run_dir / "grpo" / "validated")
    assert "is not an HF model directory" in refusal(capsys, run_dir)


def test_a_training_runs_directory_serves_too(run_dir: Path) -> None:
    """A plain training run (`tbjax.train` without stages) keeps config.yaml and summary.json at its top and
    has no held-out tasks: its settings and export apply, the tasks are chosen."""
    training = run_dir / "grpo"
    args = parsed(training, "--domain", "library", "--k", "1")
    assert args.model == str(training / "validated" / "v1") and args.prompt == "compact"
    assert shlex.split(args.server_args)[1] == str(training / "config.yaml") and args.k == 1


def test_a_tau2_run_is_refused_with_its_own_command(run_dir: Path, capsys) -> None:
    config_file = run_dir / "grpo" / "config.yaml"
    config = yaml.safe_load(config_file.read_text())
    config["tasks"]["suite"] = "tau2"
    config_file.write_text(yaml.safe_dump(config))
    assert "a τ²-bench run; evaluate it with --suite tau2" in refusal(capsys, run_dir)


def test_a_config_missing_a_setting_is_refused_naming_it(run_dir: Path, capsys) -> None:
    """The run's settings are read as tbjax wrote them, never filled with defaults of this package's own."""
    config_file = run_dir / "grpo" / "config.yaml"
    config = yaml.safe_load(config_file.read_text())
    del config["tasks"]["prompt"]
    config_file.write_text(yaml.safe_dump(config))
    assert "has no tasks.prompt; it is not a config a tbjax run wrote" in refusal(capsys, run_dir)
