"""How deep a decoded argument value nests: both call layouts refuse values past `MAX_NESTING`, so nothing
downstream (schema validation, rendering, the tool server) recurses through a value a model wrote."""

from __future__ import annotations

from typing import Any

MAX_NESTING = 32  # levels of arrays and objects; far past any tool's schema, far below the interpreter's stack


def nesting(value: Any) -> int:
    """How many levels of arrays and objects `value` has (0 for a scalar), counted without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is not None:
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in children)
    return deepest
