"""Domains of your own, without editing this repository: one loaded by "module:attr" runs oracle episodes
through rollout.evaluate's task selection and the episode loop; installed through an entry point it appears
beside the built-in domains by name and its sessions open; a name two sources claim is an error naming both."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import envs
from envs import DomainError, Task, UnknownDomainError, known_domains, load_tasks, open_session, write_jsonl
from envs.validate import main as validate_main
from rollout.episode import EpisodeConfig
from rollout.evaluate import parse_args
from rollout.interpret import Interpreter
from rollout.oracle import demonstrations
from rollout.task_choice import TaskChoiceError, command_tasks
from tbjax.assets.tokenizer import BASE_CORPUS, save_tokenizer, train_tokenizer
from tests.envs.external_domain_support import (
    NAME,
    PACKAGE,
    REFERENCE,
    external_domain,
    forget_references,
    golden_verdict,
)

LIMITS = EpisodeConfig(max_turns=6, max_tokens_per_turn=256, token_budget=4000)


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    with external_domain(tmp_path, monkeypatch) as root:
        yield root


@pytest.fixture
def installed_shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    with external_domain(tmp_path, monkeypatch, entry_points=(f"{NAME} = {REFERENCE}",)) as root:
        yield root


def evaluated(tmp_path: Path, *flags: str) -> list[Task]:
    """The tasks `python -m rollout.evaluate` would run with these flags."""
    args = parse_args(["--out", str(tmp_path / "eval"), *flags])
    return command_tasks(args.tasks, args.domain, args.split, args.limit, for_training=False)


def test_a_domain_named_by_reference_runs_episodes_from_evaluate_task_selection(shop: Path, tmp_path: Path) -> None:
    assert NAME not in known_domains()
    tasks = evaluated(tmp_path, "--domain", REFERENCE, "--split", "train")
    assert [t.id for t in tasks] == [f"{NAME}/ask_price/{i:03d}" for i in range(3)]
    assert known_domains()[NAME] is envs.get_domain(REFERENCE)  # by name from now on: what task.domain holds
    interpreter = Interpreter.from_pretrained(save_tokenizer(train_tokenizer(BASE_CORPUS), tmp_path / "tokenizer"))
    passed, failed = asyncio.run(demonstrations(tasks, interpreter, open_session, LIMITS))
    assert failed == [] and [r.trajectory.task_id for r in passed] == [t.id for t in tasks]
    assert all(r.trajectory.termination == "agent_done" and r.trajectory.reward == 1.0 for r in passed)


def test_a_file_of_its_tasks_reads_in_a_process_that_names_the_reference(shop: Path, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "tasks.jsonl"
    write_jsonl(load_tasks(REFERENCE), path)
    forget_references(monkeypatch)  # a fresh process: the file records the domain's name, not where it lives
    with pytest.raises(TaskChoiceError, match=f"--tasks {path}: unknown domain '{NAME}'.*'module:attr'"):
        evaluated(tmp_path, "--tasks", str(path))
    tasks = evaluated(tmp_path, "--tasks", str(path), "--domain", REFERENCE)
    assert {t.template for t in tasks} == {"ask_price", "ask_name"} and len(tasks) == 5
    verdict = asyncio.run(golden_verdict(tasks[-1]))
    assert verdict.passed, verdict.report()


def test_an_installed_domain_appears_beside_the_built_in_ones(installed_shop: Path) -> None:
    known = known_domains()
    assert {"library", "telecom", NAME} <= set(known)
    tasks = load_tasks(NAME, split="heldout")
    assert [t.id for t in tasks] == [f"{NAME}/ask_name/000", f"{NAME}/ask_name/001"]
    verdict = asyncio.run(golden_verdict(tasks[0]))
    assert verdict.passed, verdict.report()
    assert envs.get_domain(REFERENCE) is known[NAME]  # the same Domain by reference: no clash


def test_an_entry_point_claiming_a_built_in_name_is_an_error_naming_both(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    with external_domain(tmp_path, monkeypatch, entry_points=(f"library = {PACKAGE}:CLASH",)):
        with pytest.raises(DomainError, match=r"two domains are named 'library': the built-in domain "
                                              rf"envs/domains/library and the entry point library = {PACKAGE}:CLASH "
                                              r"of group 'tbjax.domains' \(from tiny-shop\)"):
            envs.get_domain("telecom")


def test_a_reference_claiming_a_built_in_name_is_an_error_naming_both(shop: Path) -> None:
    with pytest.raises(DomainError, match=rf"the built-in domain envs/domains/library and the domain "
                                          rf"'{PACKAGE}:CLASH' loaded by reference; rename one"):
        envs.get_domain(f"{PACKAGE}:CLASH")


@pytest.mark.parametrize(("reference", "message"), [
    (f"{PACKAGE}:NOPE", "has no attribute 'NOPE'"),
    ("no_such_package:DOMAIN", "cannot import it .*install its package"),
    (f"{PACKAGE}:populate", "is a function, not a Domain"),
    (f"{PACKAGE}:", "must read 'module:attr'"),
])
def test_a_reference_that_names_no_domain_says_why(shop: Path, reference: str, message: str) -> None:
    with pytest.raises(UnknownDomainError, match=message):
        envs.get_domain(reference)


def test_envs_validate_checks_a_domain_given_by_reference(shop: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert validate_main(["--domain", REFERENCE]) == 0
    out = capsys.readouterr().out
    assert "5 valid tasks in 1 domain(s); all checks passed" in out and NAME in out
    with pytest.raises(SystemExit) as usage:
        validate_main(["--domain", "airline"])
    assert usage.value.code == 2
    assert "unknown domain 'airline'" in capsys.readouterr().err


def test_the_starter_domain_is_written_outside_the_package_and_validates(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """What the README tells a newcomer: `python -m envs.new_domain DIR/NAME`, then `envs.validate` on it."""
    from envs.new_domain import main as new_domain_main

    assert new_domain_main([str(tmp_path / "domains" / "my_shop")]) == 0
    with pytest.raises(SystemExit):  # a second time: the folder exists, and nothing is overwritten
        new_domain_main([str(tmp_path / "domains" / "my_shop")])
    with pytest.raises(SystemExit):  # the folder's name becomes the domain's and the package's
        new_domain_main([str(tmp_path / "domains" / "my-shop")])
    monkeypatch.syspath_prepend(str(tmp_path / "domains"))
    forget_references(monkeypatch)
    try:
        assert validate_main(["--domain", "my_shop:DOMAIN"]) == 0
        assert [t.id for t in load_tasks("my_shop", "train")] == [f"my_shop/ask_price/{i:03d}" for i in range(3)]
    finally:
        sys.modules.pop("my_shop", None)
