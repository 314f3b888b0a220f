"""The suite registry (envs.suite_registry): every registered suite answers the suite protocol consistently (its
settings, requirements, evaluation grading and placement name fields of its settings type; its held-out split is
one of its splits), an unknown or evaluation-only name is refused naming the ones there are, and the built-in
domains' suite lists their tasks and opens their sessions with the user and prompt it is given."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from envs import Split
from envs.suite_registry import DEFAULT_SUITE, SUITES, UnknownSuiteError, get_suite, trainable_suites, training_suite
from envs.tau2 import Tau2Config


@pytest.mark.parametrize("name", list(SUITES))
def test_each_suite_answers_the_protocol(name):
    suite = get_suite(name)
    assert suite.name == name and suite.title
    assert suite.heldout_split in suite.splits or not suite.splits
    assert suite.is_benchmark_task is None or callable(suite.is_benchmark_task)
    if suite.settings_type is None:  # the built-in kind: nothing of its own to require, grade or place
        assert not suite.requirements and not suite.evaluation_settings and suite.trainable
        return
    assert issubclass(suite.settings_type, BaseModel)
    fields = set(suite.settings_type.model_fields)
    assert set(suite.requirements) <= fields and set(suite.evaluation_settings) <= fields
    settings = suite.settings_type.model_construct()  # the type's defaults, required fields unset
    assert set(suite.placement(settings)) <= fields
    if suite.trainable:
        assert suite.is_benchmark_task is not None and suite.heldout_split != suite.splits[0]


def test_benchmark_ids_are_claimed_by_the_suites_that_hold_them():
    claims = {name: suite.is_benchmark_task for name, suite in SUITES.items() if suite.is_benchmark_task}
    assert claims["tau2"]("tau2/retail/test/5") and not claims["tau2"]("tau2/retail/train/5")
    assert claims["thinkingbox"]("thinkingbox/retail/001")
    assert DEFAULT_SUITE not in claims  # built-in tasks are never benchmark tasks


def test_unknown_and_evaluation_only_names_are_refused_naming_the_known_ones():
    with pytest.raises(UnknownSuiteError, match="unknown suite 'tau3': the suites are builtin, thinkingbox, tau2"):
        get_suite("tau3")
    assert trainable_suites() == ["builtin", "tau2"]
    with pytest.raises(UnknownSuiteError, match="ThinkingBox-Bench .thinkingbox. is evaluation-only: train on one "
                                                "of builtin, tau2"):
        training_suite("thinkingbox")
    with pytest.raises(UnknownSuiteError, match="unknown suite 'nope': train on one of builtin, tau2"):
        training_suite("nope")


def test_tau2s_evaluation_grades_with_its_own_evaluator_and_its_venv_is_placement():
    tau2 = get_suite("tau2")
    settings = Tau2Config(python="/venv/bin/python")
    assert settings.model_copy(update=tau2.evaluation_settings).grading == "tau2" and settings.grading == "fast"
    assert {"python", "workers", "max_errors"} <= set(tau2.placement(settings))  # max_errors: at its default
    assert "max_errors" not in tau2.placement(Tau2Config(max_errors=3))  # a changed limit is what the run computes


def test_the_builtin_suite_lists_tasks_and_opens_sessions_as_told():
    builtin = get_suite(DEFAULT_SUITE)
    train = builtin.tasks(None, "train")
    assert train and all(task.split == Split.TRAIN for task in train)
    assert {task.split for task in builtin.tasks(None, None)} == set(Split)

    async def tools_in_prompt() -> bool:
        async with builtin.sessions(None, None, prompt="compact") as opener:
            session = await opener(train[0])
            await session.close()
            return session.tools_in_prompt

    assert asyncio.run(tools_in_prompt()) is False  # the compact prompt leaves the tool schemas out
