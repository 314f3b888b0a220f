"""Host offload: a round trip keeps every value bitwise and every sharding, the source buffers are freed,
and a backend without pinned host memory leaves arrays where they are (with one log line)."""

import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec

from tbjax.parallel.mesh import make_mesh, parse_mesh_spec
from tbjax.parallel.offload import HOST_MEMORY, HostOffload, host_memory_kind


def sharded_state():
    """A TrainState-like tree on the 3x8 mesh: fp32 moments sharded over fsdp, bf16 params, a replicated
    int32 counter, a leaf shared by two paths (tied weights) and a plain Python value."""
    mesh = make_mesh(parse_mesh_spec("3x8"))
    rng = np.random.default_rng(0)
    by_fsdp = NamedSharding(mesh, PartitionSpec("fsdp", None))
    shared = jax.device_put(jnp.asarray(rng.standard_normal((16, 4)), jnp.bfloat16), by_fsdp)
    return {
        "params": {"embed": shared, "lm_head": shared},
        "mu": jax.device_put(jnp.asarray(rng.standard_normal((24, 8)), jnp.float32),
                             NamedSharding(mesh, PartitionSpec(("data", "fsdp"), None))),
        "count": jax.device_put(jnp.int32(7), NamedSharding(mesh, PartitionSpec())),
        "note": "not an array",
    }


def test_round_trip_is_bitwise_keeps_shardings_and_frees_the_sources():
    offload = HostOffload()
    state = sharded_state()
    values = jax.tree.map(lambda x: np.asarray(x) if isinstance(x, jax.Array) else x, state)
    shardings = {k: state[k].sharding for k in ("mu", "count")} | {"embed": state["params"]["embed"].sharding}
    originals = [x for x in jax.tree.leaves(state) if isinstance(x, jax.Array)]

    host = offload.to_host(state)
    assert all(x.is_deleted() for x in originals)  # the device copies are gone, not just unreferenced
    arrays = [x for x in jax.tree.leaves(host) if isinstance(x, jax.Array)]
    assert {x.sharding.memory_kind for x in arrays} == {HOST_MEMORY}
    assert host["mu"].sharding == shardings["mu"].with_memory_kind(HOST_MEMORY)
    assert host["params"]["embed"] is host["params"]["lm_head"]  # a shared buffer stays shared, moved once
    assert host["note"] == "not an array"

    back = offload.to_device(host)
    assert all(x.is_deleted() for x in arrays)
    assert back["mu"].sharding == shardings["mu"] and back["count"].sharding == shardings["count"]
    assert back["params"]["embed"].sharding == shardings["embed"]
    for got, want in zip(jax.tree.leaves(back), jax.tree.leaves(values), strict=True):
        if isinstance(want, np.ndarray):
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(np.asarray(got), want)
    assert offload.to_device(back) is back  # already there: nothing moves


def test_cpu_backend_has_pinned_host_memory():
    """jax 0.10.2's CPU client exposes pinned_host (as GPU and TPU do), so tests here move real buffers."""
    assert host_memory_kind(jax.devices()) == HOST_MEMORY and HostOffload().supported


class DeviceWithoutHostMemory:
    """A device of a backend that addresses only its own memory (what `addressable_memories` reports)."""

    platform = "accelerator"

    class Memory:
        def __init__(self, kind: str) -> None:
            self.kind = kind

    def addressable_memories(self):
        return [self.Memory("device")]

    def default_memory(self):
        return self.Memory("device")


def test_without_pinned_host_offload_is_a_logged_no_op(caplog: pytest.LogCaptureFixture):
    with caplog.at_level(logging.INFO, logger="tbjax.parallel.offload"):
        offload = HostOffload([DeviceWithoutHostMemory(), DeviceWithoutHostMemory()])
    assert not offload.supported
    assert [r.getMessage() for r in caplog.records] == [
        "accelerator devices have no pinned_host memory: offload is a no-op, arrays stay in device memory"]
    state = {"w": jnp.arange(4.0)}
    assert offload.to_host(state) is state and not state["w"].is_deleted()


def test_a_shared_tree_is_copied_without_deleting_the_sources():
    """What an engine does with parameters the trainer may also hold: copy, drop its references, never delete."""
    shared = {"w": jnp.arange(6.0).reshape(2, 3)}
    host = HostOffload().to_host(shared, free=False)
    assert not shared["w"].is_deleted() and host["w"].sharding.memory_kind == HOST_MEMORY
    np.testing.assert_array_equal(np.asarray(host["w"]), np.asarray(shared["w"]))
