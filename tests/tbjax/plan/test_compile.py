"""`python -m tbjax.compile` and the mesh check behind it: targets, a mesh that does not divide the model failing
before any compile (in the trainer too), the cpu:3x8 target compiling the real update and decode step of a
tiny config on 24 forced CPU devices, and the GPU estimate of the 27B reference. The TPU compile of the 27B
reference is tests/tbjax/plan/test_compile_tpu.py."""

import json
from pathlib import Path

import pytest

from tbjax import compile as compile_cli
from tbjax import train
from tbjax.config import load_config
from tbjax.models import ModelConfig
from tbjax.models.placement import check_mesh_divides
from tbjax.parallel.mesh import parse_mesh_spec
from tbjax.parallel.sharding import ShardingError, ShardingRules
from tbjax.plan.targets import TargetError, parse_target

REPO = Path(__file__).resolve().parents[3]
REFERENCE = str(REPO / "configs/qwen3-27b-3x8-h100.yaml")
TINY_ARCHITECTURE = ("model.architecture={model_type: qwen3, vocab_size: 512, hidden_size: 64, intermediate_size: 128, "
                     "num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, head_dim: 16}")


def test_targets_name_devices_topology_and_memory():
    v5p = parse_target("tpu:v5p-64")
    assert (v5p.devices, v5p.topology_name, v5p.memory_bytes) == (32, "v5p:2x4x4", int(95.74 * 2**30))
    assert parse_target("tpu:v5p:2x2x6").devices == 24
    assert parse_target("tpu:v5e-32").topology_name == "v5e:4x8"
    assert parse_target("cpu:3x8").devices == 24 and parse_target("cpu:3x8").memory_bytes is None
    gpu = parse_target("gpu-estimate")
    assert not gpu.compiles and gpu.memory_bytes == 80 * 10**9
    for bad in ("tpu:v5p-48", "tpu:v9-8", "cpu:", "gpu", "gpu-estimate:k80"):
        with pytest.raises(TargetError, match="target"):
            parse_target(bad)


def test_mesh_that_does_not_divide_the_27b_names_parameter_dimension_axis_and_a_layout_that_does():
    config = load_config(REFERENCE)
    model = ModelConfig.from_hf_dict(config.model.architecture, config.model.runtime())
    with pytest.raises(ShardingError) as error:
        check_mesh_divides(model, parse_mesh_spec("24"), ShardingRules())
    message = str(error.value)
    assert "parameter embed_tokens" in message and "'embed' = 5120" in message
    assert "mesh axes ('fsdp',) of size 24" in message
    assert "Suggested layout for these 24 devices: --mesh 3x8 mesh.layout=[data,fsdp] (data=3 x fsdp=8" in message


def test_trainer_refuses_such_a_mesh_before_loading_or_compiling(tmp_path, monkeypatch, capsys):
    """Dry run and real run alike; the real run fails before the checkpoint is loaded onto devices."""
    monkeypatch.chdir(tmp_path)
    assert train.main(["--config", REFERENCE, "--mesh", "8x3", "--dry-run"]) == 2  # layout [data, tensor]
    out = " ".join(capsys.readouterr().out.split())
    assert "'vocab' = 151936 does not divide mesh axes ('tensor',) of size 3" in out
    grpo_only = ["model.path=tiny:qwen3", "warm_start.steps=0", "select.candidates=0", "evaluate.tasks=0"]
    assert train.main([*grpo_only, "--mesh", "1x1x8"]) == 2  # 2 kv heads cannot split 8 ways
    out = " ".join(capsys.readouterr().out.split())
    assert "'kv_heads' = 2 does not divide mesh axes ('tensor',) of size 8" in out
    assert "Suggested layout for these 8 devices: --mesh 8 mesh.layout=[fsdp]" in out


def test_cpu_3x8_target_compiles_the_update_and_decode_step_of_a_tiny_config(tmp_path, capsys):
    record = tmp_path / "plan.json"
    code = compile_cli.main([
        "--config", str(REPO / "configs/tiny-cpu.yaml"), "--target", "cpu:3x8", "--mesh", "3x8", "--json",
        str(record), "model.path=/absent", TINY_ARCHITECTURE, "train.row_len=128", "episode.token_budget=128",
        "train.micro_batch_rows=1",
        "groups.groups=2", "groups.group_size=4", "rollout.slots=24", "rollout.max_len=128",
        "train.reference_placement=host"])  # the KL reference waits in host memory: not resident
    out = capsys.readouterr().out
    assert code == 0, out
    assert "mesh data=3 x fsdp=8 x tensor=1" in out and "no budget on CPU" in out and "FLOPs per step" in out
    assert "decode step (embedded engine, 24 slots x 128-token KV cache)" in out
    plan = json.loads(record.read_text())
    update, estimate = plan["update"], plan["estimate"]
    accumulate, apply = update["accumulate"], update["apply"]
    assert plan["fits"] is None and plan["peak"] == update["peak"] == max(update["accumulate_peak"],
                                                                         update["apply_peak"])
    assert update["resident"] == estimate["optimizer"]  # disaggregated, no offload: the moments stay on the device
    assert update["accumulate_peak"] == accumulate["arguments"] + accumulate["outputs"] - accumulate["aliased"] \
        + accumulate["temporaries"] + accumulate["code"] + update["resident"]
    # the state reaches the programs exactly as planned (a micro-batch and scalars aside), and is donated
    planned = estimate["params"] + estimate["accumulator"] + estimate["batch"]
    assert planned <= accumulate["arguments"] <= planned + 4096  # the sums' scalars, padded to tiles
    assert accumulate["aliased"] >= estimate["accumulator"]
    planned = estimate["params"] + estimate["optimizer"] + estimate["accumulator"]
    assert planned <= apply["arguments"] <= planned + 4096
    assert apply["aliased"] >= estimate["params"] + estimate["optimizer"]
    assert plan["decode"]["peak"] > 0


def test_gpu_estimate_of_the_27b_reference_fits_80_gb(tmp_path, capsys):
    """Colocated, so AdamW's moments wait in host memory through the backward pass; triton attention takes
    segment ids. Without the offload it does not fit, nor with cuDNN's dense mask too, and the report says why."""
    record = tmp_path / "plan.json"
    code = compile_cli.main(["--config", REFERENCE, "--target", "gpu-estimate:h100", "--json", str(record)])
    out = " ".join(capsys.readouterr().out.split())
    plan = json.loads(record.read_text())
    assert "analytic estimate: no AOT for GPUs" in out
    estimate = plan["estimate"]
    norms = 129 * 5120 + 64 * 2 * 128  # replicated: "norm" maps to no mesh axis
    assert estimate["params"] == ((27_225_641_984 - norms) // 8 + norms) * 2  # bfloat16, 8 ways on 3 replicas
    assert estimate["optimizer"] == 4 * estimate["params"] + 8  # two float32 moments and two int32 counters
    assert estimate["accumulator"] == 2 * estimate["params"]  # float32, sharded like the parameters
    assert estimate["master"] == 2 * estimate["params"]  # the float32 master weights too
    assert estimate["optimizer_on_host"] and estimate["attention"] < 1e9
    # AdamW's apply holds parameters, masters, moments and the accumulator: the peak, 61.3 GB of 80
    assert code == 0 and plan["fits"] is True and plan["peak"] == estimate["total"] == estimate["apply_peak"] < 62e9
    assert estimate["backward_peak"] < 56e9  # the masters wait in host memory with the moments

    disaggregated = ["rollout.placement=disaggregated", "train.offload_optimizer=false"]
    for overrides, culprits in ((disaggregated, ["train.offload_optimizer=true keeps"]),
                                (disaggregated + ["model.attention_impl=cudnn"],
                                 ["train.offload_optimizer=true keeps", "set model.attention_impl=triton"])):
        code = compile_cli.main(["--config", REFERENCE, "--target", "gpu-estimate:h100", "--json", str(record),
                                 *overrides])
        out = " ".join(capsys.readouterr().out.split())
        plan = json.loads(record.read_text())
        assert code == 1 and plan["fits"] is False and plan["peak"] > 80e9, overrides
        assert f"does not fit: the update needs {plan['peak'] / 1e9:.1f} GB per device, more than 80.0 GB" in out
        assert all(culprit in out for culprit in culprits), (overrides, out)
