"""Copy drills are episodes in the policy's own format: the interpreter reads the drilled call back with the
values the user said, only that call carries loss, and a step's drills depend on (seed, step) alone."""

import numpy as np
import pytest

from rollout.interpret import Interpreter
from rollout.interpret.tools import ToolCatalog
from tbjax.assets.tokenizer import train_tokenizer
from tbjax.warmstart.copy_drills import (
    DATE_FIELDS,
    LOOKUP_TOOL,
    MAX_LOOKUPS,
    MAX_VALUES,
    ROWS,
    TEXT_FIELDS,
    TOOL,
    drill,
    drill_batch,
    drill_row_len,
)


@pytest.fixture(scope="module")
def interpreter() -> Interpreter:
    return Interpreter(train_tokenizer())


def assistant_turns(interpreter, trajectory):
    """(the text before it, its ids) of each stretch of loss-carrying ids: the assistant's turns."""
    mask, turns, start = trajectory.loss_mask, [], None
    for i, m in enumerate([*mask, 0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            turns.append((interpreter.decode(trajectory.token_ids[:start]), trajectory.token_ids[start:i]))
            start = None
    return turns


@pytest.mark.parametrize("lookups", [0, 1, MAX_LOOKUPS])
def test_the_drilled_calls_carry_the_said_values_and_all_the_loss(interpreter, lookups) -> None:
    catalog = ToolCatalog([{"name": name, "parameters": {"type": "object", "additionalProperties": True}}
                           for name in (TOOL, LOOKUP_TOOL)])
    reordered = 0
    seen_kinds = set()
    for seed in range(20):
        trajectory = drill(interpreter, np.random.default_rng(seed), lookups=lookups)
        turns = assistant_turns(interpreter, trajectory)
        assert len(turns) == lookups + 1 and all(ids[-1] == interpreter.end_of_turn_id for _, ids in turns)
        said = interpreter.decode(trajectory.token_ids).split("<|im_end|>")[0].lower()  # the user turn
        for number, (before, ids) in enumerate(turns):
            turn = interpreter.interpret(ids, catalog)
            expected = TOOL if number == lookups else LOOKUP_TOOL
            assert not turn.malformed and [c.name for c in turn.tool_calls] == [expected]
            assert before.count("<tool_response>") == number  # each lookup was answered before the next call
            arguments = turn.tool_calls[0].arguments
            assert 1 <= len(arguments) <= 3
            for name, value in arguments.items():
                assert f"my {name.replace('_', ' ')} is {value}".lower() in said
                kind = "date" if name.replace("_", " ") in DATE_FIELDS else \
                    "text" if name.replace("_", " ") in TEXT_FIELDS else "number"
                seen_kinds.add(kind)
                assert value.replace("-", "").isdigit() == (kind != "text")
        final = list(turn.tool_calls[0].arguments)
        said_at = [said.index(name.replace("_", " ")) for name in final]
        reordered += said_at != sorted(said_at)
    assert reordered  # the call names the values in another order than the user said them
    assert seen_kinds == {"number", "date", "text"}


def test_a_steps_drills_depend_on_seed_and_step_only(interpreter) -> None:
    first = drill_batch(interpreter, seed=0, step=5, steps=40)
    assert [t.token_ids for t in first] == [t.token_ids for t in drill_batch(interpreter, 0, 5, 40)]
    assert [t.token_ids for t in first] != [t.token_ids for t in drill_batch(interpreter, 0, 6, 40)]
    assert [t.token_ids for t in first] != [t.token_ids for t in drill_batch(interpreter, 1, 5, 40)]
    assert sum(len(t.token_ids) for t in first) >= ROWS * drill_row_len(5, 40) * 0.9


def test_drills_state_more_values_then_put_lookups_between(interpreter) -> None:
    """Quarters of the drills: one value each, then up to two, then up to three (MAX_VALUES), then up to
    three with one or two lookups before the recording call, in rows long enough for them."""
    def most(step: int, what: str) -> int:
        return max(interpreter.decode(t.token_ids).count(what) for t in drill_batch(interpreter, 0, step, 40))

    steps = (0, 9, 10, 19, 20, 29, 30, 39)
    assert [most(step, " is ") for step in steps] == [1, 1, 2, 2, 3, 3, MAX_VALUES, MAX_VALUES]
    assert [most(step, LOOKUP_TOOL) for step in steps] == [0] * 6 + [MAX_LOOKUPS] * 2
    assert [drill_row_len(step, 40) for step in steps] == [drill_row_len(0, 40)] * 6 + [3 * drill_row_len(0, 40)] * 2
    for trajectory in drill_batch(interpreter, 0, 39, 40):
        assert len(trajectory.token_ids) <= drill_row_len(39, 40)  # a distant drill fits its row
