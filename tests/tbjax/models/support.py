"""What the model tests share: every tiny architecture, one jitted forward and transformers' logits as the
reference."""

import numpy as np
import torch
import transformers
from flax import nnx

from tbjax.assets.tiny import TINY_ARCHITECTURES

ALL_ARCHS = sorted(TINY_ARCHITECTURES)


@nnx.jit
def forward(model, ids, positions=None, segments=None):
    """One compile per architecture and shape: several times cheaper than dispatching every op eagerly."""
    return model(ids, positions, segments)


def torch_logits(path, ids: np.ndarray, positions: np.ndarray | None = None) -> np.ndarray:
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    kwargs = {} if positions is None else {"position_ids": torch.tensor(positions)}
    with torch.no_grad():
        return model(torch.tensor(ids), **kwargs).logits.numpy()
