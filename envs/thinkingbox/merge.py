"""How a test's `init` combines with its scenario's `world_state` into the config a domain server gets.

Rules (those of ThinkingBox scenarios): mappings merge key by key, recursively; lists concatenate (scenario
items first); any other value from the test replaces the scenario's. Nothing is mutated: callers share the
scenario's dicts between hundreds of tasks.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

POLICY_SOURCES_KEY = "sources"  # documents the server indexes in Typesense for its policy-search tools


def merge(base: Any, override: Any) -> Any:
    """`override` layered on `base` by the rules above; returns new containers."""
    if isinstance(base, Mapping) and isinstance(override, Mapping):
        merged = {key: copy.deepcopy(value) for key, value in base.items()}
        for key, value in override.items():
            merged[key] = merge(merged[key], value) if key in merged else copy.deepcopy(value)
        return merged
    if isinstance(base, list) and isinstance(override, list):
        return copy.deepcopy(base) + copy.deepcopy(override)
    return copy.deepcopy(override)


def server_config(world_state: Mapping[str, Any], init: Mapping[str, Any], server: str, *,
                  drop_policy_sources: bool) -> dict[str, Any]:
    """The `__reserved__init` config of `server`: the scenario's world state for it with the test's init on top.

    Without a Typesense server the policy `sources` must go (the server would fail to index them); only the
    policy-search tools lose their content.
    """
    config = merge(world_state.get(server) or {}, init.get(server) or {})
    if drop_policy_sources:
        config.pop(POLICY_SOURCES_KEY, None)
    return config
