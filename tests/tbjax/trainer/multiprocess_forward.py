"""One process of the multi-process forward test: joins jax.distributed on 127.0.0.1, loads the tiny model over
the global 3x8 mesh and writes the gathered logits. Usage: PORT PROCESS_ID MODEL_DIR IDS.npy OUT.npy"""

import sys

import jax
import numpy as np
from jax.experimental import multihost_utils

from tbjax.models import from_pretrained
from tbjax.parallel.distributed import DistributedConfig, initialize_distributed
from tbjax.parallel.mesh import make_mesh, parse_mesh_spec
from tbjax.parallel.sharding import ShardingRules
from tests.tbjax.global_arrays_support import put_global


def main(port: str, process_id: str, model_dir: str, ids_file: str, out_file: str) -> None:
    how = initialize_distributed(DistributedConfig(f"127.0.0.1:{port}", 3, int(process_id)))
    assert jax.process_count() == 3 and jax.device_count() == 24, how
    mesh = make_mesh(parse_mesh_spec("3x8"))
    assert {d.process_index for d in mesh.devices[int(process_id)].flat} == {int(process_id)}  # a host per row
    model = from_pretrained(model_dir, mesh=mesh)
    kernel = model.layers[0].mlp.gate_proj.kernel[...]
    assert not kernel.is_fully_addressable and len(kernel.addressable_shards) == 8
    ids = put_global(np.load(ids_file).astype(np.int32), mesh, ("batch", "seq"), ShardingRules())
    logits = jax.jit(lambda i: model(i))(ids)
    np.save(out_file, multihost_utils.process_allgather(logits, tiled=True))
    jax.distributed.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:])
