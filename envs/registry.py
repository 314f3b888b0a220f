"""Discovery of built-in domains: each sub-package of `envs.domains` exporting `DOMAIN` is one domain."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

import envs.domains
from envs.domain import Domain


@cache
def builtin_domains() -> dict[str, Domain]:
    """All built-in domains by name, in name order."""
    found: dict[str, Domain] = {}
    for module in pkgutil.iter_modules(envs.domains.__path__):
        if not module.ispkg:
            continue
        package = importlib.import_module(f"envs.domains.{module.name}")
        domain = getattr(package, "DOMAIN", None)
        if not isinstance(domain, Domain):
            raise TypeError(f"envs/domains/{module.name}/__init__.py must define DOMAIN = Domain(...)")
        if domain.name != module.name:
            raise ValueError(f"envs/domains/{module.name} declares Domain(name={domain.name!r}); use the folder name")
        found[domain.name] = domain
    return dict(sorted(found.items()))


def get_domain(name: str) -> Domain:
    known = builtin_domains()
    if name not in known:
        raise KeyError(f"unknown domain {name!r}; built-in domains: {sorted(known)}")
    return known[name]
