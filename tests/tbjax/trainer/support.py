"""What the trainer's tests share: synthetic rollout groups and flattened parameter trees."""

import jax
import numpy as np

from rollout.trajectory import Trajectory


def synthetic_groups(seed: int = 0, groups: int = 3, size: int = 4) -> list[list[Trajectory]]:
    rng = np.random.default_rng(seed)
    result = []
    for g in range(groups):
        members = []
        for m in range(size):
            n, prompt = int(rng.integers(20, 50)), 12
            ids = [int(x) for x in rng.integers(3, 500, size=n)]
            mask = [0] * prompt + [1] * (n - prompt)
            logprobs = [0.0] * prompt + [float(x) for x in -rng.random(n - prompt) - 7.5]
            members.append(Trajectory(f"t{g}", f"g{g}", ids, mask, logprobs, ["0"], float((m + g) % 2),
                                      "user_done"))
        result.append(members)
    return result


def flat(tree) -> np.ndarray:
    return np.concatenate([np.ravel(np.asarray(x)) for x in jax.tree.leaves(tree)])


def graded_groups(seed: int = 0, groups: int = 3, size: int = 4):
    """synthetic_groups with rewards drawn from [0, 1): advantages of either sign and of many sizes."""
    rng = np.random.default_rng(seed + 100)
    result = synthetic_groups(seed, groups, size)
    for group in result:
        for t in group:
            t.reward = float(rng.random())
    return result
