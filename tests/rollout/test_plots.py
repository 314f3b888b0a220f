"""rollout.plots: learning curves from a trainer's metrics.jsonl and per-domain pass@1 from a compare.json,
on synthetic inputs (what is drawn is read back from the figure; the file must be a PNG)."""

import json
import math

import pytest
from matplotlib.colors import to_hex

from rollout import compare, plots
from rollout.evaluation.figures import bands_figure
from tests.rollout.campaign_support import records, write_records
from tests.rollout.chart_support import drawn, png_size

METRICS = [
    {"step": 1, "reward_mean": 0.25, "pass_rate": 0.3, "skipped": False},
    {"step": 2, "reward_mean": None, "pass_rate": 0.0, "skipped": True},  # no informative group
    {"step": 3, "reward_mean": 0.5, "pass_rate": None, "skipped": False},
    {"step": 3, "reward_mean": 0.75, "pass_rate": 0.6, "skipped": False},  # the resumed run's step 3
    {"event": "resumed"},  # a line without a step is not a point
]


def test_learning_curves_from_metrics_lines(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in METRICS))
    out = plots.learning_curves_png(path, tmp_path / "curves.png")
    assert out == tmp_path / "curves.png" and min(png_size(out)) >= 400
    figure = plots.learning_curves_figure(plots.read_steps(path))
    reward, passing = figure.axes
    (reward_line,), (pass_line,) = reward.get_lines(), passing.get_lines()
    assert list(reward_line.get_xdata()) == [1, 2, 3]
    values = list(reward_line.get_ydata())
    assert values[0] == 0.25 and math.isnan(values[1]) and values[2] == 0.75  # null is a gap; last line wins
    assert list(pass_line.get_ydata())[1:] == [0.0, 0.6]
    for axes in (reward, passing):  # the skipped step 2 is a full-height band, not a mark at 0 (a 0% score)
        (band,) = axes.patches
        x0, y0, width, height = band.get_bbox().bounds
        assert (x0, width) == (1.5, 1.0) and band.get_transform().contains_branch(axes.get_xaxis_transform())
        assert (y0, height) == (0.0, 1.0)
        assert [t.get_text() for t in axes.get_legend().get_texts()] == [axes.get_ylabel(), plots.SKIPPED]
    assert (reward.get_ylabel(), passing.get_ylabel(), passing.get_xlabel()) == ("reward_mean", "pass_rate",
                                                                                  "training step")
    assert "3 steps" in figure.get_suptitle()


def test_a_run_logged_before_the_weight_probe_was_renamed_reads_under_the_new_names(tmp_path):
    """A metrics.jsonl whose early steps carry refit_probe_* (logged before the rename, then resumed) reads as
    weight_probe_* on every step."""
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in [
        {"step": 1, "refit_probe_max_diff": 2e-6, "refit_probe_base_gap": 0.5},
        {"step": 2, "weight_probe_max_diff": 3e-6, "weight_probe_base_gap": 0.7},
    ]))
    assert plots.read_steps(path) == [
        {"step": 1, "weight_probe_max_diff": 2e-6, "weight_probe_base_gap": 0.5},
        {"step": 2, "weight_probe_max_diff": 3e-6, "weight_probe_base_gap": 0.7},
    ]


@pytest.mark.parametrize("text, message", [('{"event": "started"}\n', "no training steps"),
                                           ("", "no training steps"), ('{"step": 1}\nnot json\n', ":2 is not")])
def test_learning_curves_reject_a_file_without_steps(tmp_path, text, message):
    path = tmp_path / "metrics.jsonl"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        plots.learning_curves_png(path, tmp_path / "curves.png")
    assert not (tmp_path / "curves.png").exists()


def test_warm_start_loss_curve_shades_the_copy_drills(tmp_path):
    path = tmp_path / "warm_start" / "metrics.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps({"step": step, "nll": 8.0 / step, "grad_norm": 1.0}) + "\n"
                            for step in range(1, 7)))
    out = plots.warm_start_png(path, tmp_path / "warm_start_loss.png", copy_drills=2)
    assert min(png_size(out)) >= 400
    (axes,) = plots.warm_start_figure(plots.read_steps(path), copy_drills=2).axes
    (line,) = axes.get_lines()
    assert list(line.get_xdata()) == [1, 2, 3, 4, 5, 6] and line.get_ydata()[-1] == 8.0 / 6
    (drills,) = axes.patches
    assert drills.get_bbox().bounds[0::2] == (0.5, 2.0)  # updates 1 and 2
    assert axes.get_yscale() == "log" and "nll" in axes.get_ylabel() and "6 updates" in axes.get_title()
    assert [t.get_text() for t in axes.get_legend().get_texts()] == ["nll", "copy drills (updates 1-2)"]


def test_bands_chart_draws_candidates_not_judged_in_grey():
    # they were drawn in green (the third colour of the cycle), which reads as good
    figure = bands_figure({"hard": 3, "mid": 5, "easy": 2, "too_few_clean_runs": 4}, ["hard", "mid", "easy"],
                          [0.0, 0.2, 0.8, 1.0], keep=["mid"])
    (axes,) = figure.axes
    colours = {text.get_text(): to_hex(handle.get_facecolor())
               for text, handle in zip(axes.get_legend().get_texts(), axes.get_legend().legend_handles, strict=True)}
    assert colours == {"dropped": to_hex("C0"), "kept": to_hex("C1"), "too few clean runs": to_hex("0.6")}


def test_compare_domains_before_and_after(tmp_path):
    base = write_records(tmp_path / "base.jsonl", records([4, 0, 2, 1, 3, 0, 4, 2, 1, 0], 4))
    trained = write_records(tmp_path / "trained.jsonl", records([4, 2, 4, 1, 3, 1, 4, 4, 2, 0], 4))
    out = tmp_path / "cmp"
    assert compare.main([str(base), str(trained), "--out", str(out), "--resamples", "50"]) == 0
    result = json.loads((out / "compare.json").read_text())
    assert min(png_size(out / "domains.png")) >= 400  # written by rollout.compare itself
    png = plots.compare_domains_png(out / "compare.json", tmp_path / "again.png")
    assert png.read_bytes() == plots.compare_domains_png(out / "compare.json", tmp_path / "twice.png").read_bytes()
    heights, annotations, ticks, legend = drawn(plots.compare_domains_figure(result["a"], result["b"],
                                                                             ("base", "trained")).axes[0])
    domains = sorted(result["a"]["domains"])
    assert ticks == ["all", *domains] and legend == ["base", "trained"]
    before = [result["a"]["pass@1"], *(result["a"]["domains"][d]["pass@1"] for d in domains)]
    after = [result["b"]["pass@1"], *(result["b"]["domains"][d]["pass@1"] for d in domains)]
    assert heights == before + after and annotations == [f"{v:.1%}" for v in before + after]


def test_compare_domains_rejects_other_json(tmp_path):
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({"pass@1": 0.5, "domains": {}}))
    with pytest.raises(ValueError, match="not rollout.compare's compare.json"):
        plots.compare_domains_png(path, tmp_path / "x.png")
