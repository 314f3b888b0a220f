"""The hosts a server answers to, as `python -m tbjax.serve` and its HTTP server compare them. Light on
purpose: the command parses --allowed-hosts with it before JAX or the model load."""

from __future__ import annotations

import socket

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
EVERY_INTERFACE = ("0.0.0.0", "::", "")


def host_name(host: str) -> str:
    """A host as the checks compare it: lower case, an IPv6 address without brackets."""
    return host.strip().removeprefix("[").removesuffix("]").lower()


def host_patterns(text: str) -> list[str]:
    """--allowed-hosts: comma-separated names or addresses, without ports; "*.example.com" for its subdomains,
    "*" for any host (TrustedHostMiddleware's patterns)."""
    patterns = [host_name(part) for part in text.split(",") if part.strip()]
    for pattern in patterns:
        if "*" in pattern and pattern != "*" and not (pattern.startswith("*.") and "*" not in pattern[1:]):
            raise ValueError(f"{pattern!r}: a wildcard must be a leading '*.', as in *.example.com")
    return patterns


def bound_hosts(address: str) -> list[str]:
    """The name clients reach a server bound to `address` by: the address itself, or this machine's host name
    when it binds every interface (the URL rollout.launch_sglang gives its clients then)."""
    return [socket.gethostname() if address in EVERY_INTERFACE else address]
