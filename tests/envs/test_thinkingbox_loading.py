"""ThinkingBox task loading without the real clone: `!`-YAML docstrings read by ast (never imported), the
world_state/init merge rules, the test list, refusals of cases this adapter cannot grade, the interpreter
preflight, and the server diff as DiffEntry rows."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from envs.errors import ConfigError, InvalidTaskError
from envs.tasks import Split, TaskKind
from envs.thinkingbox import TASK_PREFIX, is_benchmark_task, load_cases
from envs.thinkingbox.docstrings import parse_marked_yaml, read_test_module
from envs.thinkingbox.grading import diff_entries
from envs.thinkingbox.merge import merge, server_config
from envs.thinkingbox.preflight import PACKAGE, check_interpreter
from tests.envs.thinkingbox_fixtures.support import FIXTURES, synthetic_clone, synthetic_config

MODULE = FIXTURES / "clone" / "dataset" / "test_case" / "notes" / "notes_group1.py"


def test_docstrings_are_read_without_importing_the_module() -> None:
    module = read_test_module(MODULE)  # it imports `thinkingbox.common`, which does not exist here
    assert module.header == {"scenario": "notes_desk"}
    assert sorted(module.functions) == ["test_add_one", "test_add_two_with_rubric", "test_not_in_the_list",
                                        "test_nothing_to_do"]
    add_one = module.functions["test_add_one"]
    assert add_one.spec["query"] == 'Please add a note saying "call Bob".'
    assert add_one.spec["init"]["notes_desk"]["golden_test_case"]["tool_interactions"][0]["tool"] == "add_note"
    assert add_one.checks == ("validate_database",)
    assert module.functions["test_add_two_with_rubric"].checks == ("validate_database", "validate_rubrics_yesno")
    assert module.functions["test_not_in_the_list"].checks == ("<Assert>",)


def test_marked_yaml_rules() -> None:
    assert parse_marked_yaml("plain docstring", "x") is None and parse_marked_yaml(None, "x") is None
    assert parse_marked_yaml("!\n", "x") == {}
    assert parse_marked_yaml("!\na: [1, 2]\n", "x") == {"a": [1, 2]}
    with pytest.raises(ValueError, match="must be a YAML mapping"):
        parse_marked_yaml("!\n- 1\n", "where")
    with pytest.raises(ValueError, match="where: the `!` docstring is not valid YAML"):
        parse_marked_yaml("!\na: [1\n", "where")


def test_merge_recurses_into_dicts_concatenates_lists_and_lets_the_test_win_otherwise() -> None:
    scenario = {"data_patch": {"users": [{"id": 1}], "orders": []}, "golden_test_case": None, "mode": "a",
                "sources": [{"name": "policy.md"}]}
    test = {"data_patch": {"users": [{"id": 2}], "items": [{"id": 9}]}, "golden_test_case": {"tool_interactions": []},
            "mode": "b"}
    merged = merge(scenario, test)
    assert merged == {"data_patch": {"users": [{"id": 1}, {"id": 2}], "orders": [], "items": [{"id": 9}]},
                      "golden_test_case": {"tool_interactions": []}, "mode": "b", "sources": [{"name": "policy.md"}]}
    merged["data_patch"]["users"].append({"id": 3})
    assert scenario["data_patch"]["users"] == [{"id": 1}] and test["data_patch"]["users"] == [{"id": 2}]
    world = {"srv": scenario, "other": {"x": 1}}
    assert "sources" not in server_config(world, {"srv": test}, "srv", drop_policy_sources=True)
    assert server_config(world, {}, "srv", drop_policy_sources=False)["sources"] == [{"name": "policy.md"}]


def test_loading_the_synthetic_clone(tmp_path: Path) -> None:
    cases = load_cases(synthetic_config(synthetic_clone(tmp_path)))
    assert [c.id for c in cases] == [f"{TASK_PREFIX}notes_group1:test_add_one",
                                     f"{TASK_PREFIX}notes_group1:test_nothing_to_do",
                                     f"{TASK_PREFIX}notes_group1:test_add_two_with_rubric"]
    add_one, nothing, rubric = cases
    assert add_one.config["data_patch"]["notes"] == [{"id": "1", "text": "seeded by the scenario"},
                                                     {"id": "2", "text": "seeded by the test"}]
    assert "sources" not in add_one.config and add_one.command.module == "fake_tb_server"
    assert [(g.tool, g.args) for g in add_one.golden] == [("add_note", {"text": "call Bob"})]
    assert (add_one.max_user_turns, nothing.max_user_turns) == (10, 2)
    assert rubric.rubrics == ("Does the reply say both notes were added?",) and add_one.rubrics == ()
    assert add_one.domain == "thinkingbox/notes_desk" and add_one.scenario.tools[:2] == ("add_note", "list_notes")
    task = add_one.task
    assert task.id == add_one.id and task.split == Split.HELDOUT and task.kind == TaskKind.DIRECT
    assert nothing.task.kind == TaskKind.INFORMATION
    assert task.scenario.opening == add_one.query and add_one.user_context in task.scenario.facts[0].value
    assert all(is_benchmark_task(c.id) for c in cases) and not is_benchmark_task("telecom/upgrade_plan/0")


def test_cases_the_adapter_cannot_grade_are_refused(tmp_path: Path) -> None:
    clone = synthetic_clone(tmp_path)
    (clone / "releases" / "mini" / "testlist.yaml").write_text("- notes_group1.py:test_not_in_the_list\n")
    with pytest.raises(InvalidTaskError, match=r"calls \['<Assert>'\]"):
        load_cases(synthetic_config(clone))
    (clone / "releases" / "mini" / "testlist.yaml").write_text("- notes_group1.py:test_missing\n")
    with pytest.raises(InvalidTaskError, match="no such test function"):
        load_cases(synthetic_config(clone))
    (clone / "releases" / "mini" / "testlist.yaml").write_text("- notes_group1.py:test_add_one\n" * 2)
    with pytest.raises(InvalidTaskError, match="listed twice"):
        load_cases(synthetic_config(clone))
    with pytest.raises(FileNotFoundError, match="pass the path of a local clone"):
        load_cases(synthetic_config(tmp_path / "nowhere"))


def test_preflight_names_the_problem_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist; create it with: python3.12 -m venv"):
        check_interpreter(str(tmp_path / "missing-python"), tmp_path)
    if sys.version_info[:2] != (3, 12):
        with pytest.raises(ConfigError, match=r"the servers need 3\.12"):
            check_interpreter(sys.executable, tmp_path)


def _fake_interpreter(tmp_path: Path, answer: str) -> str:
    """An executable standing in for the servers' Python: it prints what the probe would find."""
    script = tmp_path / "fake-python"
    script.write_text(f"#!/bin/sh\necho '{answer}'\n")
    script.chmod(0o755)
    return str(script)


def test_preflight_refuses_fastmcp_4_and_a_non_editable_install(tmp_path: Path) -> None:
    clone, installed = tmp_path / "clone", tmp_path / "site" / PACKAGE
    (clone / "servers" / PACKAGE / PACKAGE / "toolslib" / "zendesk" / "initial_data").mkdir(parents=True)
    (installed / "toolslib" / "zendesk").mkdir(parents=True)
    newer = _fake_interpreter(tmp_path, f'{{"python": [3, 12], "fastmcp": "4.1.0", "package_dir": "{installed}"}}')
    with pytest.raises(ConfigError, match="fastmcp 4.1.0; the servers' imports need fastmcp<4"):
        check_interpreter(newer, clone)
    plain = _fake_interpreter(tmp_path, f'{{"python": [3, 12], "fastmcp": "3.4.11", "package_dir": "{installed}"}}')
    with pytest.raises(ConfigError, match="lacks its data folders .* not installed editable"):
        check_interpreter(plain, clone)
    (installed / "toolslib" / "zendesk" / "initial_data").mkdir()
    assert check_interpreter(plain, clone)["fastmcp"] == "3.4.11"


def test_server_diff_becomes_diff_entries() -> None:
    entries = diff_entries([
        {"path": "tickets[2].status", "type": "value mismatch", "result": "open", "golden": "solved"},
        {"path": "refunds[0]", "type": "missing in result (present in golden)"},
        {"path": "tickets[3]", "type": "present in result (missing in golden)"},
        {"path": "tickets", "type": "length mismatch", "result": 4, "golden": 3},
    ])
    assert [(e.change, e.table, e.key, e.column) for e in entries] == [
        ("changed_value", "tickets", [2], "status"), ("missing_row", "refunds", [0], None),
        ("unexpected_row", "tickets", [3], None), ("changed_value", "tickets", [], "(row count)")]
    assert (entries[0].expected, entries[0].actual) == ("solved", "open")
    assert "expected 'solved', got 'open'" in entries[0].describe()
