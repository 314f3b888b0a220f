"""tbjax: GRPO post-training of Qwen policies in JAX (Flax NNX), for reliable tool-using agents.

On CPU, XLA's XNNPACK dot kernels run this model's forward+backward faster than the default ones
(scripts/bench/model_forward_backward.py measures by how much), so tbjax turns them on when imported before
JAX starts, on the jaxlib versions where the flag is verified to exist (an unknown XLA flag aborts the
process). Opt out with XLA_FLAGS=--xla_cpu_use_xnnpack=false.
"""

import importlib.metadata as _metadata
import os as _os

_VERIFIED_XNNPACK_JAXLIB = ("0.10.",)


def _prefer_xnnpack_on_cpu() -> None:
    flags = _os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_use_xnnpack" in flags or not _metadata.version("jaxlib").startswith(_VERIFIED_XNNPACK_JAXLIB):
        return
    _os.environ["XLA_FLAGS"] = f"{flags} --xla_cpu_use_xnnpack=true".strip()


_prefer_xnnpack_on_cpu()
