"""`python -m tbjax.train` as a user runs it: the no-flag default, --dry-run, and clear config errors."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import safetensors
import safetensors.numpy
import transformers
from rich.console import Console

from tbjax import train
from tbjax.config import ConfigError, load_config
from tbjax.export import main as export_main
from tbjax.models import ModelConfig
from tbjax.plan.report import print_plan
from tests.subprocess_support import clean_env

REPO = Path(__file__).resolve().parents[2]


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tbjax.train", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=clean_env())


SHORT = ["train.steps=1", "groups.groups=1", "groups.max_extra_rounds=0", "episode.max_turns=1",
         "episode.max_tokens_per_turn=8"]
GRPO_ONLY = ["model.path=tiny:qwen3", "warm_start.steps=0", "select.candidates=0", "evaluate.tasks=0"]


def test_plain_grpo_run_trains_checkpoints_and_exports(tmp_path):
    """Without pipeline stages (the multi-host shape): tiny policy made, one GRPO step, checkpoint, HF export.
    The no-flag pipeline is tests/tbjax/pipeline/test_pipeline.py."""
    result = run(*SHORT, *GRPO_ONLY, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "qwen3, 2 layers, hidden 64" in result.stdout and "done: 1 steps" in result.stdout
    info = [line for line in (result.stdout + result.stderr).splitlines() if line.startswith(("INFO ", "DEBUG "))]
    assert not info and " INFO absl: " in (tmp_path / "runs/default/log.txt").read_text()  # Orbax's, kept
    assert (tmp_path / "runs/default/assets/tiny-qwen3/model.safetensors").is_file()
    assert (tmp_path / "runs/default/checkpoints/1").is_dir()
    export = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "runs/default/export/v1")
    assert export.config.hidden_size == 64
    again = run(*SHORT, *GRPO_ONLY, cwd=tmp_path)  # a second call finds the run complete and only re-exports
    assert again.returncode == 0 and "done: 1 steps" in again.stdout
    saved = tmp_path / "runs/default/config.yaml"  # every setting written out, defaults too: it loads back as it was
    assert load_config(saved).to_yaml() == saved.read_text()


def test_dry_run_prints_resolved_config_and_memory_plan_for_a_mesh_without_devices(tmp_path):
    # flags among the overrides, as Hydra and maxtext users write them
    result = run("model.remat=dots", "--mesh", "3x8", "train.steps=7", "--dry-run", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "shape: 3x8" in result.stdout and "remat: dots" in result.stdout and "steps: 7" in result.stdout
    assert "data=3 x fsdp=8 x tensor=1" in result.stdout and "per device" in result.stdout


def test_reference_config_dry_run_plans_27b_on_3x8(tmp_path):
    config = str(REPO / "configs/qwen3-27b-3x8-h100.yaml")
    result = run("--config", config, "--mesh", "3x8", "--dry-run", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    out = " ".join(result.stdout.split())
    assert "27.2B parameters" in out and "learning_rate: 1.0e-06" in out and "groups: 18" in out
    assert "data=3 x fsdp=1 x tensor=8" in out  # the config's layout: replicas across hosts, tensor inside
    assert ("backward pass: parameters 6.8 GB + optimizer state (float32 master weights 13.6 GB + AdamW moments) "
            "in host memory + gradients 20.4 GB + activations 28.2 GB = 55.4 GB; AdamW apply: parameters + "
            "optimizer state 40.8 GB + gradient accumulator = 61.3 GB; peak 61.3 GB") in out


def test_config_mistakes_that_need_no_model_fail_in_the_dry_run(monkeypatch):
    """Unknown domains, a selection file that is not there, an LLM user without an endpoint and SGLang without
    servers are reported by --dry-run, and by a real run before it loads any model."""
    for override, message in [("tasks.domains=[airline]", "tasks.domains names ['airline']"),
                              ("user.kind=llm", "user.kind=llm needs user.endpoint"),
                              ("rollout.engine=sglang", "rollout.engine=sglang needs rollout.sglang_urls")]:
        recorder = Console(record=True, width=400)
        monkeypatch.setattr(train, "console", recorder)
        assert train.main(["--dry-run", override]) == 2
        assert message in recorder.export_text(), override
    # a missing file: a dry run warns (it may plan a cluster's run on a laptop), a real run stops before loading
    for dry_run, code in ((["--dry-run"], 0), ([], 2)):
        recorder = Console(record=True, width=400)
        monkeypatch.setattr(train, "console", recorder)
        assert train.main([*dry_run, "tasks.selected=nowhere.yaml"]) == code
        assert "tasks.selected: nowhere.yaml does not exist" in recorder.export_text()


def test_one_node_8b_config_plans_within_an_h100(monkeypatch):
    """configs/qwen3-8b-1x8.yaml, planned on a laptop: its cluster paths are warnings, its plan what it says."""
    recorder = Console(record=True, width=400)
    monkeypatch.setattr(train, "console", recorder)
    assert train.main(["--config", str(REPO / "configs/qwen3-8b-1x8.yaml"), "--dry-run"]) == 0
    out = recorder.export_text()
    assert "8.2B parameters" in out and "data=1 x fsdp=1 x tensor=8" in out and "placement: colocated" in out
    assert "backward pass: parameters 2.0 GB + optimizer state (float32 master weights 4.1 GB + AdamW moments) in " \
           "host memory + gradients 6.1 GB + activations 9.5 GB = 17.7 GB" in out and "peak 18.4 GB" in out
    assert "warning: tasks.selected: runs/selection/selected.yaml does not exist" in out


@pytest.mark.parametrize(("name", "plan"), [
    ("qwen3-8b-lora-1gpu", "backward pass: frozen base 16.4 GB + LoRA adapters 174.6 MB + optimizer state in host "
                           "memory + gradients 349.2 MB + activations 24.3 GB = 41.2 GB"),
    ("qwen3-27b-lora-1x8-h100", "backward pass: frozen base 6.8 GB + LoRA adapters 467.7 MB + optimizer state in "
                                "host memory + gradients 935.3 MB + activations 28.2 GB = 36.4 GB"),
])
def test_lora_configs_plan_the_frozen_base_and_the_adapters_within_an_h100(monkeypatch, name, plan):
    """The LoRA configs' --dry-run counts the base once, frozen (no gradients, moments or masters), and the
    adapters' float32 state; what their comments say."""
    recorder = Console(record=True, width=400)
    monkeypatch.setattr(train, "console", recorder)
    assert train.main(["--config", name, "--dry-run"]) == 0
    out = recorder.export_text()
    assert plan in out, out[-600:]
    assert plan.split("= ")[-1] in (REPO / "configs" / f"{name}.yaml").read_text()


def test_mesh_that_does_not_fit_the_machine_is_a_clear_error(tmp_path):
    result = run("--mesh", "3x8", cwd=tmp_path)
    assert result.returncode == 2
    assert "needs 24 devices but 1 are available" in result.stdout


def test_lora_grpo_run_checkpoints_resumes_and_exports_the_merged_policy(tmp_path):
    """`lora.rank` through the CLI: one GRPO step on adapters, its checkpoint resumed by a second call, and an HF
    export with the adapters merged in (plain transformers weights, no adapter keys). `tbjax.export` of the
    checkpoint writes the PEFT adapter, or with --merge the same weights the run exported."""
    result = run(*SHORT, *GRPO_ONLY, "lora.rank=4", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "done: 1 steps" in result.stdout
    again = run(*SHORT, *GRPO_ONLY, "lora.rank=4", cwd=tmp_path)
    assert again.returncode == 0 and "done: 1 steps" in again.stdout, again.stdout + again.stderr
    saved = tmp_path / "runs/default/config.yaml"
    assert load_config(saved).to_yaml() == saved.read_text() and "rank: 4" in saved.read_text()
    export = tmp_path / "runs/default/export/v1"
    keys = safetensors.safe_open(export / "model.safetensors", "np").keys()
    assert keys and not [k for k in keys if "lora" in k]
    assert transformers.AutoModelForCausalLM.from_pretrained(export).config.hidden_size == 64
    run_dir, base = tmp_path / "runs/default", tmp_path / "runs/default/assets/tiny-qwen3"
    assert export_main([str(run_dir), str(tmp_path / "adapter"), "--model", str(base)]) == 0
    adapter_config = json.loads((tmp_path / "adapter/adapter_config.json").read_text())
    assert (adapter_config["r"], adapter_config["lora_alpha"]) == (4, 32.0)
    adapter_keys = safetensors.safe_open(tmp_path / "adapter/adapter_model.safetensors", "np").keys()
    assert adapter_keys and all(".lora_A." in k or ".lora_B." in k for k in adapter_keys)
    assert export_main([str(run_dir), str(tmp_path / "merged"), "--model", str(base), "--merge"]) == 0
    merged, ran = (safetensors.numpy.load_file(d / "model.safetensors") for d in (tmp_path / "merged", export))
    assert merged.keys() == ran.keys() and all(np.array_equal(merged[k], ran[k]) for k in ran)
    assert export_main([str(base), str(tmp_path / "not-lora"), "--merge"]) == 2  # no adapters to merge


def test_lora_settings_that_cannot_act_are_refused():
    with pytest.raises(ConfigError, match="lora.dropout=0.1: GRPO's ratio"):
        load_config(overrides=["lora.rank=16", "lora.dropout=0.1"])
    with pytest.raises(ConfigError, match="lora.alpha has no effect with lora.rank=0"):
        load_config(overrides=["lora.alpha=16"])
    assert not load_config(overrides=["lora.alpha=32"]).lora.enabled  # its default: what a saved config holds
    with pytest.raises(ConfigError, match="lora targets \\['qkv'\\] are neither profiles"):
        load_config(overrides=["lora.rank=16", "lora.targets=[qkv]"])
    assert load_config(overrides=["lora.rank=16"]).fingerprint() != load_config().fingerprint()


def test_a_config_or_override_that_is_not_yaml_is_a_config_error(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("model:\n  path: x\nPLAN\nmesh:\n  shape: '1'\n")
    with pytest.raises(ConfigError, match=r"broken.yaml is not valid YAML .*line 3.*fix the file"):
        load_config(broken)
    with pytest.raises(ConfigError, match=r"override 'tasks.templates=\[a, b': the value is not valid YAML"):
        load_config(overrides=["tasks.templates=[a, b"])


def test_bad_overrides_name_the_key():
    with pytest.raises(ConfigError, match="model.remat: Input should be"):
        load_config(overrides=["model.remat=sometimes"])
    with pytest.raises(ConfigError, match="model.colour: Extra inputs are not permitted"):
        load_config(overrides=["model.colour=blue"])
    # a typo names the key it was probably meant to be, in pydantic sections, dataclass sections and nested ones
    for typo, meant in [("train.stepz=3", "train.steps"), ("trian.steps=3", "train"),
                        ("grpo.kl_cof=0.1", "grpo.kl_coef"), ("user.endpoint.base_ulr=x", "user.endpoint.base_url")]:
        with pytest.raises(ConfigError, match=f"did you mean {meant}\\?"):
            load_config(overrides=[typo])
    with pytest.raises(ConfigError, match="is not key=value"):
        load_config(overrides=["model.remat"])
    with pytest.raises(ConfigError, match="does not exist"):
        load_config("configs/nowhere.yaml")


def test_overrides_are_typed_and_change_the_fingerprint():
    base = load_config()
    changed = load_config(overrides=["model.scan_layers=true", "mesh.layout=[fsdp, tensor]"])
    assert changed.model.scan_layers is True and changed.mesh.layout == ["fsdp", "tensor"]
    assert changed.fingerprint() != base.fingerprint()


def test_the_plan_gives_the_tiny_models_size_in_thousands(tiny_dir, monkeypatch):
    # it said "0.00B parameters" (and tbjax.compile "0.000492B")
    recorder = Console(record=True, width=200)
    print_plan(load_config(), ModelConfig.from_pretrained(tiny_dir("qwen3")), recorder)
    assert "model: qwen3, 492.0K parameters" in recorder.export_text()


def test_a_config_of_your_own_gets_small_defaults_and_its_episodes_must_fit(tmp_path):
    own = tmp_path / "own.yaml"
    own.write_text("model:\n  path: /checkpoints/qwen3-8b\n")
    config = load_config(str(own))
    assert (config.train.row_len, config.rollout.max_len, config.episode.token_budget) == (32_768, 32_768, 32_000)
    assert (config.rollout.engine, config.rollout.slots, config.user.kind) == ("embedded", 16, "scripted")
    with pytest.raises(ConfigError, match="train.row_len=16384 is shorter than episode.token_budget=32000"):
        load_config(str(own), ["train.row_len=16384"])
    with pytest.raises(ConfigError, match="rollout.max_len=8192 is shorter than episode.token_budget=32000"):
        load_config(str(own), ["rollout.max_len=8192"])
    assert load_config(str(own), ["rollout.max_len=8192", "rollout.engine=sglang",  # servers hold their own
                                  "rollout.sglang_urls=[http://127.0.0.1:30000]"]).rollout.max_len == 8192
