"""Validation during GRPO, through the real loop: the split is carved out of the pool, scored at the start,
every `validation.every` steps and at the end with the same seeds, the export is the best-scored step's
weights, and a resumed run keeps its scores instead of redoing them. Held-out tasks scored during training
(evaluate.every) leave the pool, are scored and plotted, and choose nothing."""

import asyncio
import json

import jax
import numpy as np
import pytest
import yaml
from flax import nnx

from envs import load_tasks
from rollout.plots import learning_curves_figure, read_steps
from tbjax.config import load_config
from tbjax.export.saved_policy import checkpoint_model, restore_checkpoint
from tbjax.models import from_pretrained
from tbjax.sections.tasks import ValidationSection
from tbjax.trainer.loop import run_steps
from tbjax.trainer.run_setup import build_run
from tbjax.trainer.validation import Validation
from tests.tbjax.trainer.loop_support import brief_session, config_for, signal_tasks


def validated_run(model_dir, root, steps: int):
    config = config_for(root, steps).model_copy(update={"validation": ValidationSection(tasks=2, k=2, every=2)})
    run = build_run(config, from_pretrained(model_dir), model_dir, tasks=signal_tasks(model_dir))
    asyncio.run(run_steps(run, opener=brief_session))
    return run


def trial_lines(run_dir) -> dict[str, int]:
    return {p.parent.name: len(p.read_text().splitlines()) for p in (run_dir / "validation").glob("*/trials.jsonl")}


@pytest.mark.slow
def test_the_export_is_the_best_validated_step_and_a_resume_keeps_the_scores(tiny_dir, tmp_path):
    model_dir = tiny_dir("qwen3")
    validated_run(model_dir, tmp_path / "b", 2)  # "killed" after step 2 ...
    run_dir = tmp_path / "b" / "resume"
    before = trial_lines(run_dir)
    assert before == {"step0": 4, "step2": 4}  # 2 tasks x 2 trials at the start and at step 2
    # an abandoned timeline's scoring past the checkpoint (its run resumed from an older one) is not this run's
    abandoned = run_dir / "validation" / "step3"
    abandoned.mkdir()
    (abandoned / "summary.json").write_text(json.dumps({"tasks": 2, "k": 2, "pass@1": 2.0}))
    run = validated_run(model_dir, tmp_path / "b", 3)  # ... and started again: step 3 is the last, scored too
    after = trial_lines(run_dir)
    assert after == {**before, "step3": 4}  # nothing scored again
    pool = yaml.safe_load((run_dir / "tasks.yaml").read_text())
    assert len(pool["validation"]) == 2 and not set(pool["validation"]) & set(pool["tasks"])
    assert len(pool["tasks"]) == len(signal_tasks(model_dir)) - 2
    summary = json.loads((run_dir / "summary.json").read_text())
    scores = {int(step): score for step, score in summary["validation"].items()}
    assert sorted(scores) == [0, 2, 3] and max(scores.values()) <= 1.0
    best = max(sorted(scores, reverse=True), key=scores.get)  # the latest of equals
    assert summary["best_step"] == best and summary["export"].endswith(f"validated/v{best}")
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert {line["step"]: line.get("validation_pass_at_1") for line in lines} == {1: None, 2: scores[2], 3: scores[3]}
    # the exported weights are the best step's (its checkpoint's; step 0's are the start's)
    want = from_pretrained(model_dir) if best == 0 else checkpoint_model(
        restore_checkpoint(run_dir / "checkpoints" / str(best)).state["params"], model_dir)
    exported = jax.tree.leaves(nnx.state(from_pretrained(summary["export"]), nnx.Param))
    for a, b in zip(exported, jax.tree.leaves(nnx.state(want, nnx.Param)), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert int(run.state.step) >= 1  # the run trained: what was chosen among differed


def test_among_equal_scores_the_latest_step_is_the_best(tmp_path) -> None:
    """The split cannot tell equal scores apart and the later step has trained on more: a resumed run that
    reads steps 0, 4 and 8 tied (and 12 lower) from its campaigns' summaries exports step 8."""
    tasks = load_tasks("library")[:3]
    config = load_config(None, ["validation.tasks=3", "validation.k=2"])
    validation = Validation.split(tasks, config, tmp_path / "validation")
    for step, score in ((0, 0.5), (4, 0.75), (8, 0.75), (12, 0.25)):
        campaign = validation.campaign(step)
        campaign.mkdir(parents=True)
        (campaign / "summary.json").write_text(json.dumps({"tasks": 3, "k": 2, "pass@1": score}))
    verdicts = [asyncio.run(validation.score(step, None, None, None)) for step in (4, 8, 12)]
    assert [(v.best_step, v.new_best) for v in verdicts] == [(4, True), (8, True), (8, False)]


@pytest.mark.slow
def test_held_out_tasks_scored_during_training_never_train_and_choose_nothing(tiny_dir, tmp_path):
    """evaluate.every: two of the pool's tasks given as held-out are scored after steps 2 and 3 (not at the
    start, which the base evaluation scores), into metrics.jsonl and the learning curves; they leave the pool
    and no batch draws them; the export stays the last step's (no validation split)."""
    model_dir = tiny_dir("qwen3")
    tasks = signal_tasks(model_dir)
    config = config_for(tmp_path, 3, "evaluate.tasks=2", "evaluate.every=2", "evaluate.every_tasks=2",
                        "evaluate.k=2")
    run = build_run(config, from_pretrained(model_dir), model_dir, tasks=tasks, heldout_tasks=tasks[:2])
    asyncio.run(run_steps(run, opener=brief_session))
    run_dir = tmp_path / "resume"
    assert {p.parent.name for p in (run_dir / "heldout").glob("*/trials.jsonl")} == {"step2", "step3"}
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    scored = {line["step"]: line.get("heldout_pass_at_1") for line in lines}
    assert scored[1] is None and all(0.0 <= scored[s] <= 1.0 for s in (2, 3))
    for step in (2, 3):
        summary = json.loads((run_dir / "heldout" / f"step{step}" / "summary.json").read_text())
        assert (summary["tasks"], summary["k"], summary["pass@1"]) == (2, 2, scored[step])
    heldout = {t.id for t in tasks[:2]}
    pool = yaml.safe_load((run_dir / "tasks.yaml").read_text())
    assert set(pool["heldout"]) == heldout and not heldout & set(pool["tasks"])
    assert not heldout & {group["task"] for line in lines for group in line["groups"]}
    assert json.loads((run_dir / "summary.json").read_text())["export"].endswith("export/v3")
    rows = read_steps(run_dir / "metrics.jsonl")
    labels = [line.get_label() for line in learning_curves_figure(rows).axes[1].get_lines()]
    assert "heldout_pass_at_1" in labels


def test_held_out_scorings_need_held_out_tasks() -> None:
    with pytest.raises(ValueError, match="evaluate.tasks=0 holds none out"):
        load_config(overrides=["evaluate.tasks=0", "evaluate.every=2"])
    with pytest.raises(ValueError, match="evaluate.every=0 runs none"):
        load_config(overrides=["evaluate.every_tasks=4"])
