"""Oracle demonstrations through the real episode loop (real sandboxes, MCP sessions, scripted user), in both
prompt styles, and the compact style's promise: short prompts, calls still validated against the schemas."""

from __future__ import annotations

import asyncio
import functools
import json

import pytest

from envs import TaskKind, load_tasks, open_session
from envs.oracle import ask_for, oracle_turns
from rollout.engines.protocol import SamplingParams
from rollout.episode import EpisodeConfig, derive_seed, run_episode
from rollout.interpret import ToolCatalog
from rollout.oracle import OracleEngine, demonstrations
from tests.rollout.oracle_support import LIMITS


def one_task_per_domain_and_kind() -> list:
    chosen = {}
    for task in load_tasks(split="train"):
        chosen.setdefault((task.domain, task.kind), task)
    return list(chosen.values())


def test_script_asks_for_unsaid_facts_before_the_call_that_needs_them() -> None:
    task = next(t for t in load_tasks("telecom", split="train") if t.template == "upgrade_plan")
    turns = oracle_turns(task)
    verify = next(i for i, t in enumerate(turns) if t.call and t.call.tool == "verify_identity")
    facts = {f.name: f for f in task.scenario.facts}
    assert turns[verify - 1].text == ask_for([facts["date of birth"], facts["PIN"]])
    assert turns[0].call is not None and turns[0].call.tool == "find_customer"  # the phone is in the opening
    assert turns[-1].closing and not turns[-1].call
    assert [t.call for t in turns if t.call] == list(task.golden_path)


@pytest.mark.parametrize("prompt", ["compact", "full"])
def test_oracle_passes_every_domain_and_kind_through_the_episode_loop(tiny_interpreter, prompt) -> None:
    tasks = one_task_per_domain_and_kind()
    assert len({t.kind for t in tasks}) == len(TaskKind)
    passed, failed = asyncio.run(demonstrations(tasks, tiny_interpreter, functools.partial(open_session, prompt=prompt),
                                                LIMITS))
    assert failed == [] and len(passed) == len(tasks)
    for task, result in zip(tasks, passed, strict=True):
        t = result.trajectory
        assert t.task_id == task.id and t.termination == "agent_done" and t.malformed_tool_calls == 0
        sampled = [tok for tok, m in zip(t.token_ids, t.loss_mask, strict=True) if m]
        assert sampled[-1] == tiny_interpreter.tokenizer.convert_tokens_to_ids("<|endoftext|>")
        assert tiny_interpreter.decode(sampled).count("<tool_call>") == len(task.golden_path)


def test_compact_prompt_is_short_and_still_validates_calls(tiny_interpreter) -> None:
    task = next(t for t in load_tasks("library", split="train"))

    async def first_prompts() -> tuple[int, int, object]:
        sizes = []
        for style in ("full", "compact"):
            session = await open_session(task, prompt=style)
            tools = ToolCatalog(session.tool_schemas)
            rendered = tools if session.tools_in_prompt else None
            sizes.append(len(tiny_interpreter.first_prompt([*session.system_messages], rendered)))
            if style == "compact":
                bad = tiny_interpreter.interpret(tiny_interpreter.encode(
                    '<tool_call>\n{"name": "no_such_tool", "arguments": {}}\n</tool_call><|im_end|>'), tools)
            await session.close()
        return sizes[0], sizes[1], bad

    full, compact, bad = asyncio.run(first_prompts())
    assert compact * 20 < full
    assert bad.malformed and bad.malformed[0].kind == "unknown_tool"


def test_oracle_engine_refuses_a_session_it_has_no_script_for(tiny_interpreter) -> None:
    from rollout.engines.protocol import EngineError

    engine = OracleEngine(tiny_interpreter)
    with pytest.raises(EngineError, match="no turn left"):
        asyncio.run(engine.generate([1, 2], SamplingParams(max_new_tokens=8), session_id="unknown"))


def test_seeded_trials_are_a_function_of_seed_task_and_trial(tiny_interpreter) -> None:
    """The same (seed, task, trial) gives the same sampling seed on every turn; another trial does not."""
    task = next(t for t in load_tasks("telecom", split="train") if t.kind == TaskKind.DIRECT)
    seen: dict[str, list[int | None]] = {}

    class Recorder(OracleEngine):
        async def generate(self, input_ids, sampling, *, session_id=None):
            seen.setdefault(session_id, []).append(sampling.seed)
            return await super().generate(input_ids, sampling, session_id=session_id)

    engine = Recorder(tiny_interpreter)
    for session_id, trial in (("a", 0), ("b", 0), ("c", 1)):
        engine.expect(session_id, task)
        asyncio.run(run_episode(task, engine, tiny_interpreter, group_id="g", config=LIMITS, session_id=session_id,
                                seed=derive_seed(7, task.id, trial)))
    assert seen["a"] == seen["b"] and seen["a"] != seen["c"]
    assert len(set(seen["a"])) == len(seen["a"])  # each turn draws with its own seed
    assert derive_seed(7, "x", 0) == derive_seed(7, "x", 0) != derive_seed(8, "x", 0)


@pytest.mark.parametrize("last_turn", [False, True])  # True: the overrunning reply follows the last allowed turn
def test_an_episode_out_of_budget_never_exceeds_it(tiny_interpreter, last_turn) -> None:
    """A tool reply that overruns the token budget ends the episode cut at the budget, also when the turn
    before it was the last one allowed: its trajectory fits a packed row as long as the budget (the trainer
    refuses longer ones)."""
    task = next(t for t in load_tasks("library", split="train") if t.template == "renew_loan")
    engine = OracleEngine(tiny_interpreter)
    full = asyncio.run(demonstrations([task], tiny_interpreter, open_session, LIMITS))[0][0].trajectory
    mask = full.loss_mask
    last_reply = max(i for i in range(1, len(mask)) if mask[i - 1] and not mask[i])  # the last tool reply starts
    budget = last_reply + 5  # the call before it fits; the reply overruns
    engine.expect("cut", task)
    turns = full.turns - 1 if last_turn else 12  # the closing turn never comes
    limits = EpisodeConfig(max_turns=turns, max_tokens_per_turn=256, token_budget=budget)
    result = asyncio.run(run_episode(task, engine, tiny_interpreter, group_id="g", session_id="cut", config=limits))
    t = result.trajectory
    assert t.termination == "token_budget" and len(t.token_ids) <= budget
    assert t.token_ids == full.token_ids[:len(t.token_ids)]


NOTED_TEMPLATES = ("renew_loan", "renew_past_the_limit", "renew_with_others_waiting", "waive_small_overdue_fine",
                   "waive_damage_charge")


def named_record(subject: str, tool_result: object) -> dict:
    """The one record of a list tool result (or of the list inside one) that has `subject` as a value."""
    records = tool_result if isinstance(tool_result, list) else next(v for v in tool_result.values()
                                                                     if isinstance(v, list))
    named = [r for r in records if subject in (str(v) for v in r.values())]
    assert len(named) == 1, (subject, records)
    return named[0]


def test_a_decision_note_states_the_record_the_tool_showed_in_the_turn_that_decides(tiny_interpreter) -> None:
    """The oracle's note opens the turn right after the tool result it reads, and every fact it states is what
    the real tool returned in that episode: a policy that imitates it decides next to the facts it copied."""
    tasks = [next(t for t in load_tasks("library", split="train") if t.template == name) for name in NOTED_TEMPLATES]
    compact = functools.partial(open_session, prompt="compact")
    passed, failed = asyncio.run(demonstrations(tasks, tiny_interpreter, compact, LIMITS))
    assert failed == [] and len(passed) == len(tasks)
    for task, result in zip(tasks, passed, strict=True):
        text = tiny_interpreter.decode(result.trajectory.token_ids)
        before, after = text.split(task.note.text)
        tool_result = json.loads(before.rsplit("<tool_response>", 1)[1].split("</tool_response>")[0])
        record = named_record(task.note.subject, tool_result)
        assert {key: str(record[key]) for key in task.note.facts} == task.note.facts, (task.id, record)
        decided = after.lstrip()
        if task.kind == TaskKind.DIRECT:
            assert decided.startswith("<tool_call>") and task.golden_path[-1].tool in decided.split("</tool_call>")[0]
        else:
            assert decided.startswith("I'm sorry, I can't do that")
