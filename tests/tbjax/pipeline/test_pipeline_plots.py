"""The pipeline's compare stage plots the training it ran: GRPO's learning curves and, after a warm start,
the warm start's loss beside them (the warm start had no plot). The pipeline end to end is
tests/tbjax/pipeline/test_pipeline.py."""

import json

from tbjax.config import load_config
from tbjax.pipeline.stages import plot_training
from tests.rollout.chart_support import png_size


def write_metrics(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_the_warm_start_loss_is_plotted_beside_the_learning_curves(tmp_path):
    write_metrics(tmp_path / "grpo" / "metrics.jsonl", [{"step": 1, "reward_mean": 0.5, "pass_rate": 0.25}])
    plot_training(tmp_path, load_config())
    assert min(png_size(tmp_path / "learning_curves.png")) >= 400
    assert not (tmp_path / "warm_start_loss.png").exists()  # no warm start, no plot of one
    write_metrics(tmp_path / "warm_start" / "metrics.jsonl",
                  [{"step": step, "nll": 8.0 / step, "grad_norm": 1.0, "trained_tokens": 500} for step in (1, 2, 3)])
    plot_training(tmp_path, load_config())
    assert min(png_size(tmp_path / "warm_start_loss.png")) >= 400
