"""Mesh specs, sharded forwards on 24 forced CPU devices, and the errors for meshes that cannot work."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import PartitionSpec as P

from tbjax.models import RuntimeConfig, from_pretrained
from tbjax.parallel.mesh import MeshError, make_mesh, parse_mesh_spec
from tbjax.parallel.sharding import ShardingError, ShardingRules, memory_summary
from tests.tbjax.global_arrays_support import put_global


def test_mesh_specs_fill_named_axes():
    assert parse_mesh_spec("3x8").sizes == {"data": 3, "fsdp": 8, "tensor": 1}
    assert parse_mesh_spec("8").sizes == {"data": 1, "fsdp": 8, "tensor": 1}
    assert parse_mesh_spec("2x4x3").sizes == {"data": 2, "fsdp": 4, "tensor": 3}
    assert parse_mesh_spec("3x8", layout=["fsdp", "tensor"]).sizes == {"data": 1, "fsdp": 3, "tensor": 8}
    for bad in ("3x", "axb", "0x8", "3x-1"):
        with pytest.raises(MeshError, match="mesh spec"):
            parse_mesh_spec(bad)
    with pytest.raises(MeshError, match="layout"):
        parse_mesh_spec("3x8", layout=["data", "pipeline"])


def test_mesh_that_does_not_match_the_devices():
    with pytest.raises(MeshError, match=r"needs 16 devices but 24 are available.*Fix"):
        make_mesh(parse_mesh_spec("2x8"))


def forward(model, ids: np.ndarray, mesh) -> np.ndarray:
    global_ids = put_global(ids.astype(np.int32), mesh, ("batch", "seq"), ShardingRules())
    return np.asarray(jax.jit(lambda i: model(i))(global_ids))


@pytest.mark.parametrize("scan", [False, True])
def test_3x8_mesh_forward_equals_single_device(tiny_dir, scan):
    path = tiny_dir("qwen3")
    mesh = make_mesh(parse_mesh_spec("3x8"))
    ids = np.random.default_rng(0).integers(0, 518, size=(24, 16))
    reference = np.asarray(from_pretrained(path)(jnp.asarray(ids, jnp.int32)))
    sharded = from_pretrained(path, mesh=mesh, runtime=RuntimeConfig(scan_layers=scan))
    q_kernel = sharded.layers.self_attn.q_proj.kernel if scan else sharded.layers[0].self_attn.q_proj.kernel
    assert q_kernel.sharding.spec == (P(None, "fsdp", None, None) if scan else P("fsdp", None, None))
    assert sharded.embed_tokens.sharding.spec == P(None, "fsdp")
    assert sharded.lm_head.sharding.spec == P(None, "fsdp")
    assert len(sharded.embed_tokens[...].addressable_shards) == 24
    assert sharded.embed_tokens[...].addressable_shards[0].data.shape == (sharded.config.vocab_size, 64 // 8)
    np.testing.assert_allclose(forward(sharded, ids, mesh), reference, atol=1e-5, rtol=0)


@pytest.mark.parametrize("arch", ["qwen3-moe", "qwen2"])
def test_tensor_parallel_layout_equals_single_device(tiny_dir, arch):
    path = tiny_dir(arch)
    mesh = make_mesh(parse_mesh_spec("1x4x2"), jax.devices()[:8])
    ids = np.random.default_rng(1).integers(0, 518, size=(4, 12))
    reference = np.asarray(from_pretrained(path)(jnp.asarray(ids, jnp.int32)))
    sharded = from_pretrained(path, mesh=mesh)
    assert sharded.layers[0].self_attn.q_proj.kernel.sharding.spec == P("fsdp", "tensor", None)
    assert sharded.layers[0].self_attn.o_proj.kernel.sharding.spec == P("tensor", None, "fsdp")
    assert sharded.embed_tokens.sharding.spec == P("tensor", "fsdp")
    np.testing.assert_allclose(forward(sharded, ids, mesh), reference, atol=1e-5, rtol=0)
    summary = memory_summary(nnx.state(sharded, nnx.Param))
    assert summary.per_device_bytes < summary.total_bytes / 4


def test_non_divisible_dimension_is_an_error_naming_the_parameter(tiny_dir):
    mesh = make_mesh(parse_mesh_spec("1x1x8"), jax.devices()[:8])  # 2 kv heads cannot split 8 ways
    with pytest.raises(ShardingError, match=r"layers.0.self_attn.k_proj.kernel .*'kv_heads' = 2 .*size 8. Fix"):
        from_pretrained(tiny_dir("qwen3"), mesh=mesh)
