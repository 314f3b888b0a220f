"""The pipeline of `python -m tbjax.train`, shortened (the smoke config; the default config shortened for the run
without a selection): every stage writes its files, the comparison report parses, a second call resumes instead
of redoing, the same seed reproduces the selection and the first GRPO step, and `rollout.evaluate --from-run`
repeats the trained evaluation."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import transformers
import yaml

from rollout.plots import read_steps
from rollout.task_choice import TaskChoiceError
from tbjax.config import load_config
from tbjax.pipeline.stages import STAGES, heldout_split
from tests.subprocess_support import clean_env
from tests.tbjax.pipeline.support import SHORT

TIME_KEYS = ("time_", "tokens_per_s")

pytestmark = pytest.mark.slow


def start(*args: str, cwd: Path) -> subprocess.Popen:
    """`tbjax.train` with these arguments in `cwd`, its output in cwd/pipeline.log (a pipe could fill and stall a
    run while another is awaited)."""
    with (cwd / "pipeline.log").open("w") as log:
        return subprocess.Popen([sys.executable, "-m", "tbjax.train", *args], cwd=cwd, stdout=log,
                                stderr=subprocess.STDOUT,
                                env=clean_env())


def finish(process: subprocess.Popen, cwd: Path) -> str:
    """The run's output, once it has exited cleanly."""
    process.wait(timeout=600)
    output = (cwd / "pipeline.log").read_text()
    assert process.returncode == 0, output[-6000:]
    return output


# The module's pipelines, started side by side (each is mostly one busy thread on CPU), each in a directory of its
# own: the first, on the smoke config (the laptop default's every stage, shortened: CI's proof of the README's
# first command), the same again, and the default config shortened, without a selection.
PIPELINES = {"first": ["--config", "smoke"], "again": ["--config", "smoke"],
             "no_selection": [*SHORT, "evaluate.tasks=4", "select.candidates=0", "warm_start.steps=0",
                              "groups.groups=3", "groups.max_extra_rounds=2", "tasks.draw=by_kind"]}


@pytest.fixture(scope="module")
def pipelines(tmp_path_factory) -> dict[str, Path]:
    cwds = {name: tmp_path_factory.mktemp(name) for name in PIPELINES}
    processes = {name: start(*PIPELINES[name], cwd=cwd) for name, cwd in cwds.items()}
    for name, process in processes.items():
        finish(process, cwds[name])
    return {name: next((cwd / "runs").iterdir()) for name, cwd in cwds.items()}  # runs/smoke or runs/default


@pytest.fixture(scope="module")
def first(pipelines: dict[str, Path]) -> Path:
    return pipelines["first"]


def trial_lines(path: Path) -> list[str]:
    """A campaign's records, sorted (trials are appended as they end), less their wall-clock seconds."""
    return sorted(json.dumps({k: v for k, v in json.loads(line).items() if k != "seconds"}, sort_keys=True)
                  for line in path.read_text().splitlines())


def first_step(run_dir: Path) -> dict:
    record = json.loads((run_dir / "grpo" / "metrics.jsonl").read_text().splitlines()[0])
    return {k: v for k, v in record.items() if not k.startswith(TIME_KEYS)}


def test_every_stage_writes_its_files_and_the_report_parses(first: Path) -> None:
    for path in ("assets/tiny-qwen3-demo/config.json", "warm_start/demos.jsonl", "warm_start/export/v4/config.json",
                 "select/trials.jsonl", "select/selected.yaml", "select/manifest.json", "select/bands.png",
                 "eval/base/summary.json", "eval/trained/summary.json", "eval/trained/report.md",
                 "grpo/metrics.jsonl", "grpo/checkpoints/1", "compare/compare.json", "compare/domains.png",
                 "learning_curves.png", "results.md"):
        assert (first / path).exists(), path
    compare = json.loads((first / "compare/compare.json").read_text())
    assert {"a", "b", "delta", "ci", "gained", "lost"} <= set(compare)
    assert compare["a"]["tasks"] == compare["b"]["tasks"] == 4 and compare["a"]["k"] == 2
    assert 0.0 <= compare["b"]["pass@1"] <= 1.0
    assert json.loads((first / "stages.json").read_text()).keys() == set(STAGES)
    report = (first / "results.md").read_text()
    assert "| pass@1 |" in report and "| change [95% bootstrap] |" in report
    curve = [line for line in report.splitlines() if line.startswith("| 1 |") or line.startswith("| 2 |")]
    assert len(curve) == len(read_steps(first / "grpo" / "metrics.jsonl"))  # one row per GRPO step
    grpo = json.loads((first / "grpo/summary.json").read_text())
    trained = first.parents[1] / grpo["export"]  # cwd-relative
    assert transformers.AutoModelForCausalLM.from_pretrained(trained).config.hidden_size == 128
    # validated at the start and after the last step; the export is the best-scored step's (the latest of equals)
    scores = {int(step): score for step, score in grpo["validation"].items()}
    assert sorted(scores) == [0, 1] and grpo["best_step"] == max(sorted(scores, reverse=True), key=scores.get)
    assert trained.name == f"v{grpo['best_step']}" and trained.parent.name == "validated"
    assert f"Trained policy: GRPO step {grpo['best_step']} of 1" in report
    validation = set(yaml.safe_load((first / "grpo/tasks.yaml").read_text())["validation"])
    trained_on = {json.loads(line)["task_id"] for name in ("warm_start/demos.jsonl", "select/trials.jsonl",
                                                           "eval/base/trials.jsonl")
                  for line in (first / name).read_text().splitlines()}
    assert len(validation) == 2 and not validation & trained_on  # in no demonstration, selection or evaluation


def test_the_terminal_shows_no_librarys_info_and_the_log_file_keeps_it(first: Path) -> None:
    """What the first call printed (stdout and stderr): banners and step lines, no INFO or DEBUG record; the
    run's log.txt holds the libraries' (Orbax's, through absl) and the project's own."""
    terminal = (first.parents[1] / "pipeline.log").read_text()
    assert "stage 7/7: compare" in terminal and "step    1 |" in terminal
    assert not [line for line in terminal.splitlines() if line.startswith(("INFO ", "DEBUG "))]
    written = (first / "log.txt").read_text()
    assert " INFO absl: " in written and " INFO rollout.evaluation.runner: " in written


def test_a_second_call_resumes_instead_of_redoing(first: Path) -> None:
    cached = ["warm_start/demos.jsonl", "select/trials.jsonl", "eval/base/trials.jsonl", "eval/trained/trials.jsonl",
              "grpo/metrics.jsonl"]
    before = {path: (first / path).read_bytes() for path in cached}
    cwd = first.parents[1]
    stdout = finish(start(*PIPELINES["first"], cwd=cwd), cwd)
    assert {path: (first / path).read_bytes() for path in cached} == before
    assert "stage 7/7: compare" in stdout


def test_the_same_seed_reproduces_the_selection_and_the_first_step(pipelines: dict[str, Path]) -> None:
    first, again = pipelines["first"], pipelines["again"]
    for path in ("select/selected.yaml", "select/aggregates.jsonl"):
        assert (first / path).read_text() == (again / path).read_text(), path
    assert trial_lines(first / "select/trials.jsonl") == trial_lines(again / "select/trials.jsonl")
    assert first_step(first) == first_step(again)


def test_evaluating_the_run_again_repeats_its_trained_evaluation(first: Path, tmp_path: Path) -> None:
    """`rollout.evaluate --from-run` on the smoke config's run, from another directory than the run's: its
    episode settings, prompt style, tool-call format and seeds, its trained policy, held-out tasks and k, on an
    embedded server started as `tbjax.serve --run-config`, give eval/trained/'s records trial for trial
    (wall-clock seconds aside)."""
    run = first
    result = subprocess.run([sys.executable, "-m", "rollout.evaluate", "--from-run", str(run), "--out", "again"],
                            cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    expected = trial_lines(run / "eval/trained/trials.jsonl")
    assert len(expected) == 4 * 2 and trial_lines(tmp_path / "again/trials.jsonl") == expected


@pytest.mark.parametrize("heldout", ["instances", "templates"])
def test_held_out_tasks_never_reach_training(heldout: str) -> None:
    config = load_config(None, [f"evaluate.heldout={heldout}", "evaluate.tasks=30"])
    train, held = heldout_split(config)
    assert len(held) == 30 and not {t.id for t in train} & {t.id for t in held}
    templates = {(t.domain, t.template) for t in held}
    assert len(templates) >= 10  # spread over templates, not the first few
    trained_templates = {(t.domain, t.template) for t in train}
    assert (templates <= trained_templates) == (heldout == "instances")


def test_grpo_never_draws_a_held_out_task_without_a_selection(pipelines: dict[str, Path]) -> None:
    """select.candidates=0 trains on every train-split task of the domains: the held-out instances among them
    must still stay out of GRPO's pool (the loop records the pool it draws from in grpo/tasks.yaml, and the
    groups each step drew in grpo/metrics.jsonl)."""
    run_dir = pipelines["no_selection"]
    # tasks.draw=by_kind: one task of each kind in turn, though most of the pool is refusals
    drawn = json.loads((run_dir / "grpo" / "metrics.jsonl").read_text().splitlines()[0])["groups"]
    assert [group["kind"] for group in drawn[:3]] == ["direct", "forbidden", "leak"]
    # an all-equal group is replaced by a task of its own kind: each step holds one group of every kind but
    # those dropped, whose kind comes again, so within a kind only the last group may be kept
    steps = [json.loads(line)["groups"] for line in (run_dir / "grpo" / "metrics.jsonl").read_text().splitlines()]
    assert any(len(groups) > 3 for groups in steps)  # groups were dropped and replaced
    for groups in steps:
        for kind in ("direct", "forbidden", "leak"):
            mine = [group["kept"] for group in groups if group["kind"] == kind]
            assert mine and not any(mine[:-1]), (kind, groups)
    pool = set(yaml.safe_load((run_dir / "grpo" / "tasks.yaml").read_text())["tasks"])
    held = {json.loads(line)["task_id"] for line in (run_dir / "eval/base/trials.jsonl").read_text().splitlines()}
    assert len(held) == 4 and len(pool) > 100
    assert not pool & held
    # the validation split: disjoint from the held-out tasks, never in GRPO's pool
    validation = set(yaml.safe_load((run_dir / "grpo" / "tasks.yaml").read_text())["validation"])
    assert len(validation) == 3 and not validation & (pool | held)
    # the default config's tasks.templates bounds every stage: the pool holds those templates and no other
    templates = set(load_config(None, []).tasks.templates)
    assert {task_id.split("/")[1] for task_id in pool | held} <= templates
    assert len({task_id.split("/")[1] for task_id in pool}) == len(templates)


def test_an_unknown_template_is_refused_with_the_known_ones() -> None:
    config = load_config(None, ["tasks.templates=[renew_loan,renew_lone]"])
    with pytest.raises(TaskChoiceError, match=r"\['renew_lone'\].*renew_loan"):
        heldout_split(config)
