"""Task generation and loading: counts, splits by template, loud invalid tasks, JSONL round trips, SDK checks."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import pytest

import envs
from envs.domain import Domain
from envs.errors import InvalidTaskError
from envs.loading import _check_unique, generate, seal
from envs.sdk import Sandbox, TaskDraft, UserScenario, call, template
from envs.tasks import Rubric, Split, Task, TaskKind, ToolCall
from envs.templates import GenContext
from tests.envs.support import first_task


def test_telecom_has_enough_distinct_tasks_of_every_kind(telecom_tasks: list[Task]) -> None:
    assert len(telecom_tasks) >= 150
    kinds = Counter(t.kind for t in telecom_tasks)
    assert set(kinds) == set(TaskKind) and min(kinds.values()) >= 12
    assert all(t.golden_hash for t in telecom_tasks)
    assert {t.changes_state for t in telecom_tasks if t.kind in (TaskKind.DIRECT, TaskKind.APPROVAL)} == {True}
    assert {t.changes_state for t in telecom_tasks if t.kind not in (TaskKind.DIRECT, TaskKind.APPROVAL)} == {False}


def test_heldout_holds_out_whole_templates(telecom_tasks: list[Task]) -> None:
    train = {t.template for t in envs.load_tasks("telecom", split="train")}
    heldout = {t.template for t in envs.load_tasks("telecom", split=Split.HELDOUT)}
    assert train and heldout and not train & heldout
    assert len(train) + len(heldout) == len({t.template for t in telecom_tasks})


def test_generation_is_deterministic(telecom: Domain, telecom_tasks: list[Task]) -> None:
    again = [seal(telecom, t) for t in generate(telecom)]
    assert [t.model_dump() for t in again] == [t.model_dump() for t in telecom_tasks]


def test_failing_golden_call_makes_the_task_invalid_naming_task_and_call(telecom: Domain,
                                                                          telecom_tasks: list[Task]) -> None:
    task = first_task(telecom_tasks, "upgrade_plan")
    broken = task.model_copy(update={"golden_path": (*task.golden_path[:2],
                                                      ToolCall(tool="change_plan", args={"line_id": "L-1",
                                                                                         "plan_code": "UNLTD"}))})
    with pytest.raises(InvalidTaskError, match=r"telecom/upgrade_plan/000: golden step 3 change_plan.*L-1.* not found"):
        seal(telecom, broken)


def test_kind_that_contradicts_the_outcome_is_invalid(telecom: Domain, telecom_tasks: list[Task]) -> None:
    task = first_task(telecom_tasks, "upgrade_plan").model_copy(update={"kind": TaskKind.FORBIDDEN})
    with pytest.raises(InvalidTaskError, match="must leave unchanged"):
        seal(telecom, task)


def test_reference_answer_must_satisfy_its_rubrics(telecom: Domain, telecom_tasks: list[Task]) -> None:
    task = first_task(telecom_tasks, "plan_and_fee").model_copy(update={"reference_answer": "no idea"})
    with pytest.raises(InvalidTaskError, match="reference_answer fails"):
        seal(telecom, task)


def test_duplicates_are_invalid(telecom_tasks: list[Task]) -> None:
    task = telecom_tasks[0]
    with pytest.raises(InvalidTaskError, match="duplicate task id"):
        _check_unique([task, task])
    with pytest.raises(InvalidTaskError, match="same scenario"):
        _check_unique([task, task.model_copy(update={"id": "telecom/copy/000"})])


def test_jsonl_round_trip(tmp_path: Path, telecom_tasks: list[Task]) -> None:
    path = tmp_path / "tasks.jsonl"
    envs.write_jsonl(telecom_tasks[:20], path)
    assert envs.read_jsonl(path) == telecom_tasks[:20]
    path.write_text('{"id": "x"}\n')
    with pytest.raises(InvalidTaskError, match="tasks.jsonl:1"):
        envs.read_jsonl(path)


def test_builtin_domains_are_discovered(telecom: Domain) -> None:
    assert envs.builtin_domains()["telecom"] is telecom
    with pytest.raises(KeyError, match="built-in domains"):
        envs.get_domain("nope")


def _tiny_domain(**changes: object) -> Domain:
    def lookup(db: Sandbox, key: str) -> dict:
        """Read one row."""
        return db.one("SELECT * FROM items WHERE key = ?", (key,)) or {}

    @template(kind="information", split="train", variants=3)
    def ask(ctx: GenContext) -> TaskDraft:
        row = ctx.pick("SELECT * FROM items ORDER BY key")
        return TaskDraft(scenario=UserScenario(opening=f"what is {row['key']}?", goal="know"),
                         golden_path=[call("lookup", key=row["key"])],
                         rubrics=[Rubric(kind="must_mention", phrases=(row["value"],))],
                         reference_answer=f"It is {row['value']}.")

    fields = dict(name="tiny", description="d", schema_sql="CREATE TABLE items (key TEXT PRIMARY KEY, value TEXT);",
                  policy="p", today="2026-01-01", tools=[lookup], templates=[ask],
                  populate=lambda conn, rng: conn.executemany("INSERT INTO items VALUES (?, ?)",
                                                              [(f"k{i}", f"v{rng.randrange(99)}") for i in range(5)]))
    return Domain(**{**fields, **changes})


def test_a_minimal_domain_works_end_to_end() -> None:
    domain = _tiny_domain()
    tasks = [seal(domain, t) for t in generate(domain)]
    assert len(tasks) == 3 and all(t.golden_hash == domain.database.state_hash for t in tasks)


def test_sdk_rejects_malformed_domains() -> None:
    def no_db(key: str) -> str:
        """Doc."""
        return key

    def no_doc(db: Sandbox, key: str) -> str:
        return key

    with pytest.raises(TypeError, match="first parameter"):
        _ = _tiny_domain(tools=[no_db]).mcp_tools
    with pytest.raises(TypeError, match="needs a docstring"):
        _ = _tiny_domain(tools=[no_doc]).mcp_tools
    with pytest.raises(ValueError, match="no PRIMARY KEY"):
        _ = _tiny_domain(schema_sql="CREATE TABLE items (key TEXT, value TEXT);").database
    with pytest.raises(ValueError, match="unknown tables"):
        _ = _tiny_domain(volatile={"nope": ["x"]}).database
    starved = _tiny_domain()
    starved.templates = [dataclasses.replace(starved.templates[0], variants=9)]
    with pytest.raises(ValueError, match="wants 9 variants but its candidate query returns 5 rows"):
        generate(starved)


def test_a_decision_note_on_a_tool_the_golden_path_never_calls_is_refused_at_load() -> None:
    task = next(t for t in envs.load_tasks("library", split="train") if t.template == "renew_past_the_limit")
    misplaced = task.note.model_copy(update={"after": "list_fines"})
    with pytest.raises(InvalidTaskError, match="decision note reads the result of 'list_fines'"):
        seal(envs.get_domain("library"), task.model_copy(update={"note": misplaced, "golden_hash": None}))
