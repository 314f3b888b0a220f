"""Domain discovery: the one place that turns a domain's name, or a reference to it, into its `Domain`.

A domain comes from one of three sources:

- built-in: each sub-package of `envs.domains` exporting `DOMAIN = Domain(...)`, named after its folder;
- installed: an entry point of the group `tbjax.domains` in any installed distribution, `NAME = "module:attr"`
  naming a Domain called NAME (a package of your own, no edit of this one);
- by reference: a "module:attr" string wherever a domain name is accepted (`get_domain`, `load_tasks`, the
  trainer's `tasks.domains`, `--domain` of rollout.evaluate and rollout.select). Once loaded, this process
  knows the domain by its name too, which is what its tasks record (`Task.domain`, ids "name/template/NNN"):
  sessions of those tasks open by that name like any other.

One name, one domain: two sources giving one name to different Domain objects is an error naming both.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, reduce
from importlib.metadata import EntryPoint, entry_points

import envs.domains
from envs.domain import Domain

ENTRY_POINT_GROUP = "tbjax.domains"
_HOW_TO_ADD = ("for a domain of your own, give 'module:attr' naming its Domain object (e.g. my_pkg.domain:DOMAIN) "
               "where domains are chosen (tasks.domains, --domain), which loads it, or declare that reference as an "
               f"entry point of the group {ENTRY_POINT_GROUP!r} in your package")


class DomainError(ValueError):
    """A domain that cannot be used: unknown, not a Domain, or one name given to two domains."""


class UnknownDomainError(DomainError, KeyError):
    """A name or reference that names no domain. A KeyError as well, as a failed lookup by name is."""

    def __str__(self) -> str:
        return str(self.args[0])  # KeyError would print the message quoted, as if it were the key


@dataclass(frozen=True)
class _Found:
    domain: Domain
    source: str  # where the domain comes from, for messages about it


# domains loaded by "module:attr" in this process, by name
_referenced: dict[str, _Found] = {}


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


def known_domains() -> dict[str, Domain]:
    """Every domain this process knows, by name in name order: built-in, installed, and those loaded by
    reference so far."""
    return {name: found.domain for name, found in sorted(_known().items())}


def get_domain(name: str) -> Domain:
    """The domain called `name`, or the one a "module:attr" reference names (loaded and then known by its
    name); raises UnknownDomainError naming the known domains and how to add one."""
    if ":" in name:
        return _by_reference(name)
    known = _known()
    if name not in known:
        raise UnknownDomainError(f"unknown domain {name!r}; known domains: {sorted(known)} (built-in domains, "
                                 f"installed ones and those loaded by reference); {_HOW_TO_ADD}")
    return known[name].domain


def domain_name(name: str) -> str:
    """The name a domain entry stands for: a plain name as given (the caller says what it expected of it), the
    name of the domain a "module:attr" reference loads."""
    return get_domain(name).name if ":" in name else name


def domain_argument(value: str) -> str:
    """argparse `type=` of a --domain flag: the name of a known domain, or of the one a "module:attr" reference
    loads; anything else is a usage error naming the known domains and how to add one."""
    try:
        return get_domain(value).name
    except DomainError as error:
        raise argparse.ArgumentTypeError(error.args[0]) from None


def _registered() -> dict[str, _Found]:
    """Built-in and installed domains by name; a name both give to different domains is an error."""
    found = {name: _Found(domain, f"built-in domain envs/domains/{name}") for name, domain in builtin_domains().items()}
    for found_elsewhere in _installed().values():
        _add(found, found_elsewhere.domain, found_elsewhere.source)
    return found


def _known() -> dict[str, _Found]:
    """Registered and referenced domains by name (references were checked for clashes when loaded)."""
    return {**_registered(), **_referenced}


@cache
def _installed() -> dict[str, _Found]:
    """The domains of the installed entry points of `ENTRY_POINT_GROUP`, by name (read once per process)."""
    found: dict[str, _Found] = {}
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        source = _describe(entry)
        domain = _as_domain(_load(entry.load, source), source)
        if domain.name != entry.name:
            raise DomainError(f"{source} loads Domain(name={domain.name!r}); name the entry point {domain.name!r}")
        _add(found, domain, source)
    return found


def _describe(entry: EntryPoint) -> str:
    """The entry point as its package declares it, and which package that is."""
    distribution = entry.dist.name if entry.dist is not None else "an unnamed distribution"
    return f"entry point {entry.name} = {entry.value} of group {ENTRY_POINT_GROUP!r} (from {distribution})"


def _add(found: dict[str, _Found], domain: Domain, source: str) -> None:
    """Record `domain` under its name, unless that name already stands for another domain (an error naming
    both sources) or for this one (nothing to do)."""
    earlier = found.get(domain.name)
    if earlier is None:
        found[domain.name] = _Found(domain, source)
    elif earlier.domain is not domain:
        raise DomainError(f"two domains are named {domain.name!r}: the {earlier.source} and the {source}; "
                          "rename one of them (Domain(name=...))")


def _by_reference(reference: str) -> Domain:
    """Load the Domain `reference` ("module:attr", attr may be dotted) names, and make it known by its name."""
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise UnknownDomainError(f"domain reference {reference!r} must read 'module:attr', e.g. my_pkg.domain:DOMAIN")
    source = f"domain {reference!r} loaded by reference"
    loaded = _load(lambda: reduce(getattr, attribute.split("."), importlib.import_module(module_name)), source)
    domain = _as_domain(loaded, source)
    known = _known()
    _add(known, domain, source)  # an error if its name is another domain's
    _referenced.setdefault(domain.name, known[domain.name])
    return domain


def _load(load: Callable[[], object], source: str) -> object:
    """What `load` imports, with an error that says which domain source failed and how to fix it."""
    try:
        return load()
    except ImportError as exc:
        raise UnknownDomainError(f"{source}: cannot import it ({exc}); install its package or put it on sys.path "
                                 "(PYTHONPATH)") from exc
    except AttributeError as exc:
        raise UnknownDomainError(f"{source}: {exc}; check the attribute after the ':'") from exc


def _as_domain(loaded: object, source: str) -> Domain:
    """`loaded`, which must be a Domain: a reference to anything else is refused by what it is."""
    if not isinstance(loaded, Domain):
        raise UnknownDomainError(f"{source} is a {type(loaded).__name__}, not a Domain; point it at a "
                                 "Domain(...) object (envs.sdk.Domain)")
    return loaded
