"""`python -m tbjax.export SRC OUT`: converts dtype and re-shards; refuses bad input clearly."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
import transformers

REPO = Path(__file__).resolve().parents[2]


def export(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tbjax.export", *args], capture_output=True, text=True,
                          timeout=300, cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


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
