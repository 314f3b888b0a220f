"""Rollouts: chat interpretation, episodes, engine clients, group scheduling, evaluation. No JAX."""
