"""One process of the multi-process training test: joins jax.distributed on 127.0.0.1, trains the tiny model
over the global 3x8 mesh with loop_support's signal tasks and brief sessions (resuming when the run directory
has a checkpoint), and writes what the test compares. Its parameters are bfloat16, so the state keeps float32
master weights; with `lora`, GRPO trains rank-4 adapters instead and the bfloat16 base stays frozen; with
`async`, the driver's next batch runs beside the update (rollout.max_staleness=1, exact mode: batch 1 is
sampled under step 0's weights, the run drains at its checkpoint every 2 steps).
Usage: PORT PROCESS_ID MODEL_DIR ROOT STEPS OUT.json [full|lora|async]"""

import asyncio
import hashlib
import json
import sys
from pathlib import Path

import jax
import numpy as np

from tbjax.models import from_pretrained
from tbjax.parallel.distributed import DistributedConfig, initialize_distributed
from tbjax.parallel.mesh import make_mesh, parse_mesh_spec
from tbjax.sections.lora import LoraSection
from tbjax.sections.model import MeshSection
from tbjax.trainer.batch_broadcast import is_driver, share_batch
from tbjax.trainer.loop import run_steps
from tbjax.trainer.run_setup import build_run
from tests.tbjax.trainer.loop_support import brief_session, config_for, signal_tasks


def local_replica_digest(params) -> str:
    """A hash of the parameters as this process holds them, assembled from its own shards only. With
    3x8 = data x fsdp every host holds a whole replica, so equal digests mean the replicas agree."""
    digest = hashlib.sha256()
    for leaf in jax.tree.leaves(params):
        full, covered = np.zeros(leaf.shape, leaf.dtype), np.zeros(leaf.shape, bool)
        for shard in leaf.addressable_shards:
            full[shard.index], covered[shard.index] = np.asarray(shard.data), True
        assert covered.all(), "a host does not hold a whole replica"
        digest.update(full.tobytes())
    return digest.hexdigest()


def main(port: str, process_id: str, model_dir: str, root: str, steps: str, out: str, mode: str = "full") -> None:
    initialize_distributed(DistributedConfig(f"127.0.0.1:{port}", 3, int(process_id)))
    # The driver's decision to skip an update (no informative group) and its draw count reach every process.
    assert share_batch(None, 7 if is_driver() else 0) == (None, 7)
    overlap = ["rollout.max_staleness=1", "train.checkpoint_every=2"] if mode == "async" else []
    config = config_for(Path(root), int(steps), *overlap)
    model_section = config.model.model_copy(update={"param_dtype": "bfloat16"})  # float32 compute, as the loop test's
    lora = LoraSection(rank=4, alpha=8.0) if mode == "lora" else LoraSection()
    config = config.model_copy(update={"mesh": MeshSection(shape="3x8"), "model": model_section, "lora": lora})
    model = from_pretrained(model_dir, mesh=make_mesh(parse_mesh_spec("3x8")), runtime=config.model.runtime())
    run = build_run(config, model, Path(model_dir), tasks=signal_tasks(model_dir))
    resumed_from, frozen_before = run.step, local_replica_digest(run.trainer.frozen)
    asyncio.run(run_steps(run, opener=brief_session))
    master = None if run.state.master is None else local_replica_digest(run.state.master)
    Path(out).write_text(json.dumps({"resumed_from": resumed_from, "step": run.step, "engine": run.engine is not None,
                                     "updates": int(run.state.step), "digest": local_replica_digest(run.state.params),
                                     "master_digest": master, "frozen_before": frozen_before,
                                     "frozen_after": local_replica_digest(run.trainer.frozen),
                                     "moments_digest": local_replica_digest(run.state.opt_state)}))
    jax.distributed.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:])
