"""The task suites by name: the one place that maps a suite's name (tasks.suite, --suite) to its implementation of
envs.suite_protocol. Nothing else tells suites apart: the trainer, the pipeline and the commands ask the suite."""

from __future__ import annotations

from envs.builtin_suite import BuiltinDomains
from envs.suite_protocol import Suite
from envs.tau2_suite import Tau2Bench
from envs.thinkingbox_suite import ThinkingBoxBench

DEFAULT_SUITE = "builtin"
# in this order the benchmark ids they claim are listed (a selection's manifest records them)
SUITES: dict[str, Suite] = {suite.name: suite for suite in (BuiltinDomains(), ThinkingBoxBench(), Tau2Bench())}


class UnknownSuiteError(ValueError):
    """A suite name the registry does not know, or one that cannot act where it is named."""


def get_suite(name: str) -> Suite:
    """The suite called `name`; an unknown name is an error naming the known ones."""
    if name not in SUITES:
        raise UnknownSuiteError(f"unknown suite {name!r}: the suites are {', '.join(SUITES)}")
    return SUITES[name]


def training_suite(name: str) -> Suite:
    """The suite called `name`, which must be one whose train split may be trained on; any other name is an error
    naming those."""
    suite = SUITES.get(name)
    if suite is None or not suite.trainable:
        problem = f"unknown suite {name!r}" if suite is None else f"{suite.title} ({name}) is evaluation-only"
        raise UnknownSuiteError(f"{problem}: train on one of {', '.join(trainable_suites())}")
    return suite


def trainable_suites() -> list[str]:
    """The names of the suites whose train split may be selected from and trained on."""
    return [name for name, suite in SUITES.items() if suite.trainable]
