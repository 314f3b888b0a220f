"""One process of the shared-host test: joins jax.distributed on 127.0.0.1, gathers every process's host name,
and records what the run setup says of rollout.publish_replicas when all processes share this machine.
Usage: PORT PROCESS_ID OUT.json"""

import json
import sys

import jax

from tbjax.config import load_config
from tbjax.parallel.distributed import DistributedConfig, initialize_distributed, process_hosts
from tbjax.trainer.run_setup import refuse_shared_replica_hosts


def main(port: str, process_id: str, out: str) -> None:
    initialize_distributed(DistributedConfig(f"127.0.0.1:{port}", 3, int(process_id)))
    config = load_config(overrides=["rollout.engine=sglang", "rollout.sglang_urls=[http://127.0.0.1:1]",
                                    "rollout.publish_dir=/dev/shm/tbjax/{run}", "rollout.publish_replicas=true"])
    try:
        refuse_shared_replica_hosts(config)
        refusal = None
    except ValueError as error:
        refusal = str(error)
    with open(out, "w") as f:
        json.dump({"hosts": process_hosts(), "refusal": refusal}, f)
    jax.distributed.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:])
