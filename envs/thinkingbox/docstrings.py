"""Reading ThinkingBox test modules without running them.

A ThinkingBox test case is a Python function whose docstring starts with `!` and is YAML after it; the module
may carry one such docstring too (`scenario: NAME`). The modules import the ThinkingBox framework, which we do
not have and must not execute, so they are parsed with `ast` only. A function's body is kept as the names of
the checks it calls, so the loader can refuse a case that checks something this adapter does not implement.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

MARKER = "!"
# The C loader when PyYAML has it: the release is many megabytes of YAML, which it reads far faster.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class TestFunction:
    """One `test*` function: its YAML spec and what its body checks (see `_checks`)."""

    name: str
    spec: dict[str, Any]
    checks: tuple[str, ...]


@dataclass(frozen=True)
class TestModule:
    path: Path
    header: dict[str, Any]  # the module's own `!` docstring (e.g. {"scenario": ...}), {} when absent
    functions: dict[str, TestFunction]


def parse_marked_yaml(docstring: str | None, where: str) -> dict[str, Any] | None:
    """The YAML mapping after a leading `!`, or None for a docstring without the marker."""
    if docstring is None or not docstring.startswith(MARKER):
        return None
    try:
        data = yaml.load(docstring[len(MARKER):], Loader=SAFE_LOADER)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        raise ValueError(f"{where}: the `!` docstring is not valid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"{where}: the `!` docstring must be a YAML mapping, got {type(data).__name__}")
    return data


def _checks(body: list[ast.stmt]) -> tuple[str, ...]:
    """Each statement as the name of the function it calls (`validate_database(x)` -> "validate_database"),
    or, for anything else (an assert, an assignment), as its kind in angle brackets ("<Assert>")."""
    checks: list[str] = []
    for statement in body:
        if (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)
                and isinstance(statement.value.func, ast.Name)):
            checks.append(statement.value.func.id)
        else:
            checks.append(f"<{type(statement).__name__}>")
    return tuple(checks)


def _module_header(tree: ast.Module, where: str) -> dict[str, Any]:
    # The header is a bare string expression anywhere at module level (it follows the imports).
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            header = parse_marked_yaml(node.value.value.strip("\n"), where)
            if header is not None:
                return header
    return {}


def read_test_module(path: Path) -> TestModule:
    """Parse `path` (never import it): its header and every `test*` function with a `!` docstring."""
    where = str(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=where)
    functions: dict[str, TestFunction] = {}
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or not node.name.startswith("test"):
            continue
        spec = parse_marked_yaml(ast.get_docstring(node), f"{where}:{node.name}")
        if spec is None:
            continue
        body = node.body[1:]  # the docstring is the first statement
        functions[node.name] = TestFunction(node.name, spec, _checks(body))
    return TestModule(path, _module_header(tree, where), functions)
