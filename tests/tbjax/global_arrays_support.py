"""Global arrays for tests that feed a sharded model by hand: the trainer builds its own from packed batches."""

from collections.abc import Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding

from tbjax.parallel.sharding import ShardingRules


def put_global(host: np.ndarray, mesh: Mesh, logical: Sequence[str | None], rules: ShardingRules) -> jax.Array:
    """A host array that every process holds in full -> a global array sharded by its logical axes."""
    sharding = NamedSharding(mesh, rules.activation_spec(host.shape, logical, mesh))
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])
