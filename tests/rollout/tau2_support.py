"""What the τ²-bench command tests share: τ²'s venv (TBJAX_TAU2_PYTHON, which CI sets; a clean skip naming it
when unset), the flags that point `rollout.evaluate` and `rollout.select` at it with the directed user as the
user simulator, and episode limits short enough for the tiny random policy on CPU."""

from __future__ import annotations

from tests.tau2_support import tau2_python

__all__ = ["EPISODE_FLAGS", "tau2_flags", "tau2_python"]

# τ²'s retail prompt (agent instruction, domain policy, tool schemas, greeting, the user's opening) is about 6.3k
# tokens of the tiny tokenizer; two 16-token turns fit 7000. The tiny policy babbles: its first turn is a cut
# text reply, which the directed user answers with a stop, so the episode ends user_done and is graded.
EPISODE_FLAGS = ["--max-turns", "2", "--max-tokens-per-turn", "16", "--token-budget", "7000", "--timeout-s", "600",
                 "--server-args", "--slots 2 --max-len 7168"]


def tau2_flags(python: str, user_base_url: str) -> list[str]:
    """--suite tau2 with one worker and the user endpoint at `user_base_url` (the directed user's)."""
    return ["--suite", "tau2", "--tau2-python", python, "--tau2-workers", "1", "--user-base-url", user_base_url,
            "--user-model", "directed-user"]
