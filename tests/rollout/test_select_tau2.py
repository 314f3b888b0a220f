"""`python -m rollout.select --suite tau2`: its defaults (train split, fast grading), a τ²-bench split named
without --suite tau2 refused, and, with τ²'s venv (TBJAX_TAU2_PYTHON; skipped otherwise), test tasks refused
by id before any engine starts and a minimal selection on the train split with the tiny policy on an embedded
server against the directed user."""

from __future__ import annotations

import json

import pytest

from envs.tau2.directed_user import DirectedUser
from rollout import select as select_cli
from rollout.records import read_records
from tests.rollout.tau2_support import run_on_tiny_policy, tau2_flags, tau2_python

UNREACHABLE_AGENT = ["--engine", "openai", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"]


def test_defaults_and_a_tau2_split_without_the_suite(tmp_path, capsys):
    args = select_cli.parse_args(["--out", str(tmp_path), "--suite", "tau2", "--tau2-python", "py",
                                  "--user-base-url", "http://u/v1", "--user-model", "u"])
    assert (args.split, args.tau2_grading) == ("train", "fast")  # training's grading, not τ²'s replay
    with pytest.raises(SystemExit):
        select_cli.parse_args(["--out", str(tmp_path), "--split", "test"])
    assert "--split test is τ²-bench's; the built-in domains' splits are train and heldout" in capsys.readouterr().err


@pytest.mark.parametrize("split", ["test", "base"])
def test_test_tasks_are_refused_by_id(split, tmp_path, caplog):
    python = tau2_python()
    with DirectedUser() as user:
        code = select_cli.main([*UNREACHABLE_AGENT, *tau2_flags(python, user.base_url), "--domain", "retail",
                                "--split", split, "--out", str(tmp_path / "sel")])
    assert code == 2
    assert f"--suite tau2 --split {split}: benchmark task tau2/retail/test/" in caplog.text
    assert "select from --split train" in caplog.text
    assert not (tmp_path / "sel" / "trials.jsonl").exists()  # refused before any episode


def test_selects_on_the_train_split(tmp_path):
    out = tmp_path / "sel"
    code = run_on_tiny_policy(select_cli.main, tmp_path, out, "--domain", "retail", "--limit", "2", "--n", "1",
                              "--min-clean-runs", "1")
    assert code in (0, 1)  # 1: nothing selected (the random policy fails every candidate: too_hard)
    records = read_records(out / "trials.jsonl")
    assert len(records) == 2 and all(r.system_error is None and r.reward_breakdown for r in records), records
    rows = [json.loads(line) for line in (out / "aggregates.jsonl").read_text().splitlines()]
    assert [row["n"] for row in rows] == [1, 1]
    assert all(row["task_id"].startswith("tau2/retail/train/") for row in rows)
