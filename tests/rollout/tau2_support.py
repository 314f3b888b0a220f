"""What the τ²-bench command tests share: τ²'s venv (TBJAX_TAU2_PYTHON, which CI sets; a clean skip naming it
when unset), the flags that point `rollout.evaluate` and `rollout.select` at it with the directed user as the
user simulator, and episode limits short enough for the tiny random policy on CPU."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from envs.tau2.directed_user import DirectedUser
from tbjax.assets.tiny import make_flax_checkpoint
from tests.tau2_support import tau2_python

__all__ = ["EPISODE_FLAGS", "run_on_tiny_policy", "tau2_flags", "tau2_python"]

# τ²'s retail prompt (agent instruction, domain policy, tool schemas, greeting, the user's opening) is about 6.3k
# tokens of the tiny tokenizer; two 16-token turns fit 7000. The tiny policy babbles: its first turn is a cut
# text reply, which the directed user answers with a stop, so the episode ends user_done and is graded.
EPISODE_FLAGS = ["--max-turns", "2", "--max-tokens-per-turn", "16", "--token-budget", "7000", "--timeout-s", "600",
                 "--server-args", "--slots 2 --max-len 7168"]


def tau2_flags(python: str, user_base_url: str) -> list[str]:
    """--suite tau2 with one worker and the user endpoint at `user_base_url` (the directed user's)."""
    return ["--suite", "tau2", "--tau2-python", python, "--tau2-workers", "1", "--user-base-url", user_base_url,
            "--user-model", "directed-user"]


def run_on_tiny_policy(main: Callable[[Sequence[str]], int], tmp: Path, out: Path, *flags: str) -> int:
    """`main` (rollout.evaluate's or rollout.select's) with a tiny random qwen3 on the embedded engine, τ²'s venv
    and the directed user as the simulated user, and `flags`; its exit code."""
    policy = make_flax_checkpoint(tmp / "policy", "qwen3")
    with DirectedUser() as user:
        return main(["--engine", "embedded", "--model", str(policy), *tau2_flags(tau2_python(), user.base_url),
                     "--out", str(out), *EPISODE_FLAGS, *flags])
