"""Where XLA's device allocator keeps memory, set before JAX starts its backend (the variables are read then)."""

from __future__ import annotations

import logging
import os
from collections.abc import MutableMapping

log = logging.getLogger(__name__)


def configure_xla_memory(placement: str, environ: MutableMapping[str, str] = os.environ) -> None:
    """Colocated mode: JAX must neither preallocate device memory nor keep what it frees in its own pool, or
    the servers could never take it back; only the "platform" allocator returns freed memory to the driver
    (slower allocations, JAX's GPU memory docs). Call before JAX initialises its backend (the env vars are
    read then). An allocator chosen explicitly is respected, with a warning."""
    if placement != "colocated":
        return
    environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    allocator = environ.setdefault("XLA_PYTHON_CLIENT_ALLOCATOR", "platform")
    if allocator != "platform":
        log.warning("XLA_PYTHON_CLIENT_ALLOCATOR=%s keeps freed device memory in JAX's pool: the SGLang servers "
                    "may not get it back (colocated mode wants 'platform')", allocator)
