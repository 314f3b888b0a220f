"""`python -m tbjax.export SRC OUT`: converts dtype and re-shards, exports a run's own Orbax checkpoints;
refuses bad input clearly."""

import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
import torch
import transformers

from tbjax.export import main
from tbjax.models import from_pretrained
from tbjax.sections.model import RuntimeConfig
from tbjax.trainer.checkpoint import Checkpointer
from tbjax.trainer.update import GRPOTrainer
from tests.subprocess_support import clean_env

REPO = Path(__file__).resolve().parents[3]


def export(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tbjax.export", *args], capture_output=True, text=True,
                          timeout=300, cwd=REPO, env=clean_env())


def test_export_to_bfloat16_loads_in_transformers(tiny_dir, tmp_path):
    source = tiny_dir("qwen3-moe")
    result = export(str(source), str(tmp_path / "bf16"), "--dtype", "bfloat16", "--max-shard-gb", "0.0001")
    assert result.returncode == 0, result.stderr
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "bf16")
    assert model.dtype == torch.bfloat16
    assert (tmp_path / "bf16/model.safetensors.index.json").is_file()
    reference = transformers.AutoModelForCausalLM.from_pretrained(source)
    ids = torch.tensor(np.random.default_rng(0).integers(0, 518, size=(1, 12)))
    with torch.no_grad():
        diff = (model(ids).logits.float() - reference(ids).logits).abs().max().item()
    assert 0 < diff < 0.1  # bf16 rounding, nothing worse


def test_export_errors_are_clear(tmp_path):
    result = export(str(tmp_path / "missing"), str(tmp_path / "out"))
    assert result.returncode == 2 and "config.json" in result.stderr
    result = export(str(tmp_path), str(tmp_path))
    assert result.returncode == 2 and "OUT must differ from SRC" in result.stderr


@pytest.fixture(scope="module")
def run_dir(tiny_dir, tmp_path_factory) -> Path:
    """A run directory with two checkpoints of a tiny Qwen3's real train state, saved by the trainer's
    Checkpointer: step 1 the base parameters, step 2 the base parameters x 1.5."""
    model = from_pretrained(tiny_dir("qwen3"))
    first = GRPOTrainer(model).init_state(model)
    second = dataclasses.replace(first, params=jax.tree.map(lambda x: x * 1.5, first.params), step=first.step + 1)
    run = tmp_path_factory.mktemp("run")
    for step, state in ((1, first), (2, second)):
        checkpointer = Checkpointer(run / "checkpoints", keep=2)
        checkpointer.save(step, state, {}, {"fingerprint": "tiny"})
        checkpointer.close()
    return run


def weights(directory: Path) -> dict[str, torch.Tensor]:
    return transformers.AutoModelForCausalLM.from_pretrained(directory).state_dict()


def test_export_reads_the_trainers_own_checkpoints(run_dir, tiny_dir, tmp_path, capsys):
    # tbjax.export read HF directories only: a run's Orbax checkpoints could not be exported
    base = weights(tiny_dir("qwen3"))
    assert main([str(run_dir), str(tmp_path / "newest"), "--model", str(tiny_dir("qwen3"))]) == 0
    assert f"exporting step 2 ({run_dir / 'checkpoints' / '2'})" in capsys.readouterr().out
    newest = weights(tmp_path / "newest")
    assert all(torch.allclose(newest[name], 1.5 * base[name]) for name in base)
    assert (tmp_path / "newest" / "tokenizer_config.json").is_file()
    assert main([str(run_dir / "checkpoints" / "1"), str(tmp_path / "first"), "--model", str(tiny_dir("qwen3"))]) == 0
    first = weights(tmp_path / "first")
    assert all(torch.equal(first[name], base[name]) for name in base)
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["1", "2"]  # nothing moved or pruned


def test_export_names_what_a_checkpoint_source_needs(run_dir, tiny_dir, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main([str(tmp_path / "empty"), str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert "neither an HF model directory (config.json) nor a training run's checkpoint" in error
    assert main([str(run_dir), str(tmp_path / "out")]) == 2
    assert "pass --model DIR" in capsys.readouterr().err
    assert main([str(run_dir), str(tmp_path / "out"), "--model", str(tiny_dir("qwen3-moe"))]) == 2
    assert "does not fit" in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_a_damaged_step_is_refused_and_a_run_exports_its_newest_intact_step(run_dir, tiny_dir, tmp_path, capsys):
    run = shutil.copytree(run_dir, tmp_path / "run")
    files = [p for p in (run / "checkpoints" / "2" / "state").rglob("*") if p.is_file()]
    data = max(files, key=lambda p: p.stat().st_size)  # the parameters' data file
    data.write_bytes(data.read_bytes()[:-64])
    model = ["--model", str(tiny_dir("qwen3"))]
    assert main([str(run / "checkpoints" / "2"), str(tmp_path / "out"), *model]) == 2
    assert f"checkpoint {run / 'checkpoints' / '2'} is broken" in capsys.readouterr().err
    assert main([str(run), str(tmp_path / "out"), *model]) == 0
    assert f"exporting step 1 ({run / 'checkpoints' / '1'})" in capsys.readouterr().out


def test_a_relative_run_directory_exports(run_dir, tiny_dir, tmp_path, monkeypatch):
    # Orbax refused the relative checkpoint path the README's own export command gives
    monkeypatch.chdir(run_dir.parent)
    assert main([run_dir.name, str(tmp_path / "out"), "--model", str(tiny_dir("qwen3"))]) == 0
    base = weights(tiny_dir("qwen3"))
    assert all(torch.allclose(weights(tmp_path / "out")[name], 1.5 * base[name]) for name in base)


def test_float32_export_of_a_bfloat16_run_writes_its_master_weights(tiny_dir, tmp_path, capsys):
    model = from_pretrained(tiny_dir("qwen3"), runtime=RuntimeConfig(param_dtype="bfloat16"))
    state = GRPOTrainer(model).init_state(model)
    # masters a bfloat16 cast cannot tell from the parameters: steps below half its ulp
    state = dataclasses.replace(state, master=jax.tree.map(lambda m: m * (1 + 2**-12), state.master))
    checkpointer = Checkpointer(tmp_path / "run" / "checkpoints", keep=1)
    checkpointer.save(1, state, {}, {"fingerprint": "tiny"})
    checkpointer.close()
    model_dir = ["--model", str(tiny_dir("qwen3"))]
    assert main([str(tmp_path / "run"), str(tmp_path / "masters"), "--dtype", "float32", *model_dir]) == 0
    assert "its float32 master weights" in capsys.readouterr().out
    assert main([str(tmp_path / "run"), str(tmp_path / "cast"), *model_dir]) == 0
    masters, cast = weights(tmp_path / "masters"), weights(tmp_path / "cast")
    base = weights(tiny_dir("qwen3"))
    for name in base:
        rounded = base[name].to(torch.bfloat16).float()
        assert torch.equal(masters[name], rounded * (1 + 2**-12)), name  # transformers reads both as float32
        assert torch.equal(cast[name], rounded), name
