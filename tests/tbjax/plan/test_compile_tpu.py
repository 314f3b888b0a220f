"""The 27B reference config compiled ahead of time for TPU v5p chips laid out like its 3 x 8 H100s (the nearest
TPU memory: 102.8 GB a chip), without a TPU: libtpu's own venv (scripts/tpu_aot_venv.sh) is built once, cached,
and this test is skipped, saying why, when it cannot be built. The compiled program must fit, and tbjax.compile's
analytic estimate (what GPU targets get) must come within 10% of the compiler's memory analysis."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tbjax.compile import DEFAULT_TPU_VENV

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def tpu_venv() -> Path:
    venv = Path(os.environ.get("TBJAX_TPU_AOT_VENV", DEFAULT_TPU_VENV))
    try:
        build = subprocess.run([str(REPO / "scripts/tpu_aot_venv.sh"), str(venv)], capture_output=True, text=True,
                               timeout=900)
    except subprocess.TimeoutExpired:
        pytest.skip("building the TPU AOT venv (pip install jax[tpu]) took over 15 minutes")
    if build.returncode != 0:
        pytest.skip(f"the TPU AOT venv could not be built (pip install jax[tpu]): {build.stderr.strip()[-400:]}")
    return venv


@pytest.mark.slow
def test_27b_reference_compiles_for_v5p_and_the_estimate_is_within_10_percent(tpu_venv, tmp_path):
    record = tmp_path / "plan.json"
    run = subprocess.run(
        [sys.executable, "-m", "tbjax.compile", "--config", str(REPO / "configs/qwen3-27b-3x8-h100.yaml"),
         "--target", "tpu:v5p:2x2x6", "--tpu-venv", str(tpu_venv), "--json", str(record)],
        capture_output=True, text=True, cwd=tmp_path, timeout=600, env={**os.environ, "PYTHONPATH": str(REPO)})
    out = " ".join(run.stdout.split())
    assert run.returncode == 0, run.stdout + run.stderr
    assert "attention_impl triton -> splash" in out and "mesh data=3 x fsdp=1 x tensor=8" in out
    plan = json.loads(record.read_text())
    update, estimate = plan["update"], plan["estimate"]
    assert plan["fits"] is True and plan["peak"] == update["peak"] <= plan["budget"]
    assert abs(estimate["total"] - update["peak"]) <= 0.10 * update["peak"], (estimate, update)
    for phase in ("accumulate", "apply"):  # each program's peak, not just the larger one
        assert abs(estimate[f"{phase.replace('accumulate', 'backward')}_peak"] - update[f"{phase}_peak"]) <= \
            0.10 * update[f"{phase}_peak"], (phase, estimate, update)
    # colocated: the moments are in host memory through accumulate, whose arguments are the parameters, the
    # float32 accumulator and the packed batch, exactly as planned; apply takes (and donates) the whole state
    accumulate, apply = update["accumulate"], update["apply"]
    assert update["resident"] == 0 and estimate["optimizer_on_host"]
    planned = estimate["params"] + estimate["accumulator"] + estimate["batch"]
    assert planned <= accumulate["arguments"] <= planned + 16 * 512  # the sums' scalars, padded to tiles
    assert apply["aliased"] >= estimate["params"] + estimate["optimizer"]
