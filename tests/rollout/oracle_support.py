"""The episode limits the oracle's demonstrations run under in the tests that play them (the oracle, its
slips, the decision notes): room for every template's golden path and the user's turns."""

from rollout.episode import EpisodeConfig

LIMITS = EpisodeConfig(max_turns=12, max_tokens_per_turn=256, token_budget=8000)
