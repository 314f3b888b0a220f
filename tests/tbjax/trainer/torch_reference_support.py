"""The GRPO loss as torch computes it through a transformers model, each episode run alone (no packing): the
reference the trainer's gradients are checked against (full-parameter and LoRA)."""

import numpy as np
import torch

from tbjax.sections.training import GRPOSection

TIS_CAP = 2.0


def torch_logprobs(model: torch.nn.Module, ids: list[int]) -> torch.Tensor:
    """Log-probs of tokens 1.. of one episode, run alone through the transformers model."""
    logits = model(torch.tensor([ids])).logits[0, :-1]
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(ids[1:])[:, None])[:, 0]


def torch_loss(model: torch.nn.Module, episodes, advantages: np.ndarray, grpo: GRPOSection) -> torch.Tensor:
    """The token-mean clipped objective with TIS: old log-probs = detached current ones, TIS weight =
    min(exp(old - behaviour), cap), detached."""
    total, tokens = torch.zeros(()), 0
    for t, advantage in zip(episodes, advantages, strict=True):
        logprobs = torch_logprobs(model, t.token_ids)
        mask, behaviour = torch.tensor(t.loss_mask[1:], dtype=torch.float32), torch.tensor(t.logprobs[1:])
        old = logprobs.detach()
        ratio = torch.exp(logprobs - old)
        term = torch.maximum(-advantage * ratio, -advantage * ratio.clamp(1 - grpo.clip_low, 1 + grpo.clip_high))
        tis = torch.clamp(torch.exp(old - behaviour), max=grpo.tis_cap)
        total = total + torch.sum(term * tis * mask)
        tokens += int(mask.sum())
    return total / tokens


def with_behaviour_near(model: torch.nn.Module, groups, seed: int):
    """Behaviour log-probs = the model's own plus N(0, 1) noise: TIS weights spread around 1, about a quarter
    truncated at the cap."""
    rng = np.random.default_rng(seed)
    for t in (t for group in groups for t in group):
        with torch.no_grad():
            own = torch_logprobs(model, t.token_ids).numpy()
        t.logprobs = [0.0] + [float(x) for x in own + rng.normal(0.0, 1.0, own.shape)]
    return groups


def group_advantages(groups) -> np.ndarray:
    """GRPO's advantages of every episode, group by group: (reward - mean) / (std + 1e-6), float32."""
    rewards = np.asarray([[t.reward for t in g] for g in groups], np.float64)
    advantages = (rewards - rewards.mean(1, keepdims=True)) / (rewards.std(1, keepdims=True) + 1e-6)
    return advantages.ravel().astype(np.float32)
