"""The warm start: supervised imitation of the oracle's demonstrations (with copy drills and fresh values)
that turns a base policy into one GRPO can improve."""
