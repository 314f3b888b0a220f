"""Environments: sandboxed business backends, MCP tools, simulated users and final-state verifiers.

No JAX and no import of `rollout` or `tbjax` (enforced by import-linter).
"""
