"""The training loop on CPU: a resumed run is bitwise the run that never stopped, and a run writes
checkpoints, metrics and an HF export transformers loads."""

import jax
import numpy as np
import pytest
import transformers

from tests.tbjax.trainer.loop_support import metric_lines, train_for


@pytest.mark.slow
def test_resume_is_bitwise_the_uninterrupted_run(tiny_dir, tmp_path):
    model_dir = tiny_dir("qwen3")
    straight = train_for(model_dir, tmp_path / "a", 4)
    train_for(model_dir, tmp_path / "b", 2)  # "killed" after step 2 ...
    resumed = train_for(model_dir, tmp_path / "b", 4)  # ... and started again
    assert int(resumed.state.step) == int(straight.state.step)
    for a, b in zip(jax.tree.leaves(straight.state.params), jax.tree.leaves(resumed.state.params), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert metric_lines(tmp_path / "a") == metric_lines(tmp_path / "b")  # same tasks, rewards and losses
    assert any(not line["skipped"] for line in metric_lines(tmp_path / "a"))  # real updates happened
    export = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "a" / "resume" / "export" / "v4")
    assert export.config.model_type == "qwen3"
