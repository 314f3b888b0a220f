"""Difficulty selection: Jeffreys band masses against Beta CDF values computed here without scipy, the tie
rule, minimum clean runs, system errors, the solvability gate, benchmark refusal, and byte-identical outputs."""

import hashlib
import json
import math

import pytest
import yaml

from envs import load_tasks, write_jsonl
from rollout import select as select_cli
from rollout.evaluation.selection import BAND_EDGES, BAND_NAMES, SelectionConfig, assess
from rollout.metrics import TaskCounts
from rollout.records import TrialRecord
from rollout.task_choice import BenchmarkExclusion, benchmark_exclusion
from tests.envs.fake_openai_support import Canned


def jeffreys_cdf(x: float, n: int, k: int, steps: int = 4000) -> float:
    """CDF of Beta(k + 1/2, n - k + 1/2) by hand: with x = sin^2(t) the density becomes proportional to
    sin^2k(t) cos^2(n-k)(t) dt, smooth on [0, pi/2], integrated with Simpson's rule."""

    def integral(upper: float) -> float:
        h = upper / steps
        f = [math.sin(i * h) ** (2 * k) * math.cos(i * h) ** (2 * (n - k)) for i in range(steps + 1)]
        return h / 3 * (f[0] + f[-1] + 4 * sum(f[1:-1:2]) + 2 * sum(f[2:-1:2]))

    return integral(math.asin(math.sqrt(x))) / integral(math.pi / 2)


def hand_masses(n: int, k: int, edges=BAND_EDGES) -> list[float]:
    cdf = [jeffreys_cdf(e, n, k) for e in edges]
    return [b - a for a, b in zip(cdf, cdf[1:], strict=False)]


def test_arcsine_closed_form_validates_the_hand_reference():
    for x in (0.08, 0.4, 0.6, 0.9):
        assert jeffreys_cdf(x, 0, 0) == pytest.approx(2 / math.pi * math.asin(math.sqrt(x)), abs=1e-10)


@pytest.mark.parametrize("n,k", [(4, 0), (4, 1), (4, 2), (4, 4), (8, 1), (8, 3), (8, 5), (8, 7), (20, 2),
                                 (20, 10), (20, 16), (20, 19), (6, 3)])
def test_band_is_the_one_with_most_hand_computed_mass(n, k):
    row = assess(TaskCounts("t", "d", n, k), SelectionConfig())
    expected = hand_masses(n, k)
    assert list(row["masses"].values()) == pytest.approx(expected, abs=1e-9)
    assert row["band"] == BAND_NAMES[max(range(5), key=lambda i: (expected[i], -i))]
    assert row["selected"] == (row["band"] in ("hard", "medium", "easy"))


def test_extreme_outcomes_fall_outside_the_kept_bands():
    assert assess(TaskCounts("t", "d", 8, 0), SelectionConfig())["band"] == "too_hard"
    assert assess(TaskCounts("t", "d", 8, 8), SelectionConfig())["band"] == "too_easy"
    assert assess(TaskCounts("t", "d", 8, 4), SelectionConfig())["band"] == "medium"


def test_ties_go_to_the_harder_band():
    halves = SelectionConfig(band_names=("low", "high"), band_edges=(0.0, 0.5, 1.0), keep=("low",), min_clean_runs=1)
    row = assess(TaskCounts("t", "d", 4, 2), halves)  # symmetric posterior: exactly half the mass each side
    assert row["masses"]["low"] == pytest.approx(row["masses"]["high"])
    assert row["band"] == "low" and row["selected"]
    assert assess(TaskCounts("t", "d", 4, 3), halves)["band"] == "high"


def test_too_few_clean_runs_are_not_judged():
    row = assess(TaskCounts("t", "d", 3, 2), SelectionConfig(min_clean_runs=4))
    assert row["band"] is None and not row["selected"] and row["reason"] == "too_few_clean_runs"
    assert row["masses"] is not None  # still reported, for the record
    assert assess(TaskCounts("t", "d", 3, 2), SelectionConfig(min_clean_runs=3))["band"] is not None


def test_gate_and_benchmark_refusals():
    gated = SelectionConfig(gate=True)
    medium = TaskCounts("t", "d", 8, 4)
    assert assess(medium, gated, reference=TaskCounts("t", "d", 4, 1))["selected"]
    assert assess(medium, gated, reference=TaskCounts("t", "d", 4, 0))["reason"] == "failed_solvability_gate"
    assert assess(medium, gated, reference=TaskCounts("t", "d", 3, 3))["reason"] == "failed_solvability_gate"
    assert assess(medium, gated, reference=None)["gate"] == {"reference_n": 0, "reference_k": 0, "passed": False}
    assert assess(medium, SelectionConfig(), benchmark=True)["reason"] == "benchmark_task"
    exclusion = BenchmarkExclusion(frozenset({"x/1"}), ("thinkingbox/",))
    assert "thinkingbox/retail/3" in exclusion and "x/1" in exclusion and "telecom/a/000" not in exclusion


def test_the_benchmark_ids_are_the_registered_suites_claims():
    exclusion = benchmark_exclusion()
    assert exclusion.describe() == {"ids": [], "prefixes": [], "predicates": [
        "envs.thinkingbox.loading.is_benchmark_task", "envs.tau2.tasks.is_heldout_task"]}  # as manifests record them
    assert "tau2/retail/test/5" in exclusion and "tau2/retail/train/5" not in exclusion
    assert "other!" in exclusion.merged(prefixes=["other"]) and "other!" not in exclusion


def test_thinkingbox_tasks_are_refused_by_default():
    assert "thinkingbox/retail/001" in benchmark_exclusion()  # envs.thinkingbox.is_benchmark_task


def write_trials(path, outcomes):
    """outcomes: {task_id: "PF.E"} one letter per trial: P pass, F fail, E system error."""
    lines = []
    for task_id, letters in outcomes.items():
        for trial, letter in enumerate(letters):
            lines.append(TrialRecord(task_id=task_id, domain=task_id.split("/")[0], trial=trial,
                                     passed=None if letter == "E" else letter == "P",
                                     system_error="engine" if letter == "E" else None, termination="user_done",
                                     model="base").model_dump_json())
    path.write_text("\n".join(lines) + "\n")
    return path


OUTCOMES = {"telecom/easy/000": "PPPPPPFP", "telecom/hard/000": "FFPFFFFF", "telecom/never/000": "FFFFFFFF",
            "clinic/medium/000": "PFPFEEPF", "clinic/short/000": "PPEEEEEE", "thinkingbox/retail/001": "PFPFPFPF",
            "bench/x/001": "PFPFPFPF"}


def test_cli_writes_reproducible_outputs_and_excludes_system_errors(tmp_path):
    trials = write_trials(tmp_path / "base.jsonl", OUTCOMES)
    reference = write_trials(tmp_path / "ref.jsonl", {"telecom/hard/000": "PFFF", "clinic/medium/000": "PFF"})
    outs = []
    for name in ("one", "two"):
        out = tmp_path / name
        args = ["--from-trials", str(trials), "--out", str(out), "--exclude-prefix", "bench/"]
        assert select_cli.main(args) == 0
        outs.append(out)
    files = ["selected.yaml", "aggregates.jsonl", "manifest.json", "bands.png"]
    for name in files:
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes(), name
    rows = {r["task_id"]: r for r in map(json.loads, (outs[0] / "aggregates.jsonl").read_text().splitlines())}
    assert (rows["clinic/medium/000"]["n"], rows["clinic/medium/000"]["k"]) == (6, 3)
    assert rows["clinic/medium/000"]["system_errors"] == 2
    assert rows["clinic/short/000"]["reason"] == "too_few_clean_runs"
    assert rows["thinkingbox/retail/001"]["reason"] == "benchmark_task"  # refused without being asked
    assert rows["bench/x/001"]["reason"] == "benchmark_task"
    selected = yaml.safe_load((outs[0] / "selected.yaml").read_text())["tasks"]
    assert selected == sorted(r["task_id"] for r in rows.values() if r["selected"]) and selected
    manifest = json.loads((outs[0] / "manifest.json").read_text())
    for name in ("selected.yaml", "aggregates.jsonl", "bands.png"):
        assert manifest["outputs"][name] == hashlib.sha256((outs[0] / name).read_bytes()).hexdigest()
    assert manifest["inputs"][0]["sha256"] == hashlib.sha256(trials.read_bytes()).hexdigest()
    assert sum(manifest["counts"]["per_band"].values()) == len(OUTCOMES)
    assert manifest["counts"]["system_error_trials"] == 8
    assert (outs[0] / "bands.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")

    gated = tmp_path / "gated"
    assert select_cli.main(["--from-trials", str(trials), "--out", str(gated), "--reference", str(reference)]) == 0
    gated_rows = {r["task_id"]: r for r in map(json.loads, (gated / "aggregates.jsonl").read_text().splitlines())}
    assert gated_rows["telecom/hard/000"]["gate"]["passed"]
    assert gated_rows["clinic/medium/000"]["reason"] == "failed_solvability_gate"  # 3 reference runs < 4


def test_cli_refuses_to_judge_candidates_with_too_few_trials(tmp_path, caplog):
    trials = write_trials(tmp_path / "base.jsonl", {"telecom/a/000": "PFP", "telecom/b/000": "PP"})
    assert select_cli.main(["--from-trials", str(trials), "--out", str(tmp_path / "o")]) == 2
    assert "no candidate has min_clean_runs=4 clean trials (the most any has: 3)" in caplog.text
    assert not (tmp_path / "o" / "selected.yaml").exists()


def test_cli_names_an_unknown_domain(tmp_path, caplog):
    assert select_cli.main(["--engine", "openai", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                            "--domain", "airline", "--out", str(tmp_path / "o")]) == 2
    assert "--domain names ['airline'], which have no train-split tasks in the known domains" in caplog.text
    assert "telecom" in caplog.text  # among the domains to choose from


def test_cli_rejects_unknown_keep_band(tmp_path):
    trials = write_trials(tmp_path / "base.jsonl", OUTCOMES)
    assert select_cli.main(["--from-trials", str(trials), "--out", str(tmp_path / "o"), "--keep", "medium,tough"]) == 2


def test_cli_runs_the_policy_when_given_an_engine(fake_openai, tmp_path):
    tasks_file = tmp_path / "tasks.jsonl"
    write_jsonl(load_tasks("telecom", "train")[:2], tasks_file)
    fake_openai.queue(*[Canned(text="Sorry, I cannot help with that.") for _ in range(6)])
    out = tmp_path / "sel"
    # every candidate too hard: the outputs say so, and the exit code says nothing was selected
    assert select_cli.main(["--engine", "openai", "--base-url", fake_openai.base_url, "--model", "m", "--tasks",
                            str(tasks_file), "--n", "3", "--min-clean-runs", "3", "--concurrency", "1",
                            "--out", str(out)]) == 1
    rows = [json.loads(line) for line in (out / "aggregates.jsonl").read_text().splitlines()]
    assert [(r["n"], r["k"], r["band"]) for r in rows] == [(3, 0, "too_hard")] * 2
    assert len((out / "trials.jsonl").read_text().splitlines()) == 6 and len(fake_openai.requests) == 6
