"""Copy drills are episodes in the policy's own format: the interpreter reads the drilled call back with the
values the user said, only that call carries loss, and a step's drills depend on (seed, step) alone."""

import numpy as np
import pytest

from rollout.interpret import Interpreter
from rollout.interpret.tools import ToolCatalog
from tbjax.assets.tokenizer import train_tokenizer
from tbjax.copy_drills import DATE_FIELDS, MAX_VALUES, ROW_LEN, ROWS, TOOL, drill, drill_batch


@pytest.fixture(scope="module")
def interpreter() -> Interpreter:
    return Interpreter(train_tokenizer())


def test_the_drilled_call_carries_the_said_values_and_all_the_loss(interpreter) -> None:
    catalog = ToolCatalog([{"name": TOOL, "parameters": {"type": "object", "additionalProperties": True}}])
    reordered = dates = 0
    for seed in range(20):
        trajectory = drill(interpreter, np.random.default_rng(seed))
        start = trajectory.loss_mask.index(1)
        sampled, prompt = trajectory.token_ids[start:], interpreter.decode(trajectory.token_ids[:start])
        assert all(trajectory.loss_mask[start:]) and sampled[-1] == interpreter.end_of_turn_id
        turn = interpreter.interpret(sampled, catalog)
        assert not turn.malformed and [call.name for call in turn.tool_calls] == [TOOL]
        arguments = turn.tool_calls[0].arguments
        assert 1 <= len(arguments) <= 3
        for name, value in arguments.items():
            assert f"my {name.replace('_', ' ')} is {value}" in prompt.lower() and value.replace("-", "").isdigit()
            dates += name.replace("_", " ") in DATE_FIELDS
        said_at = [prompt.lower().index(name.replace("_", " ")) for name in arguments]
        reordered += said_at != sorted(said_at)
    assert reordered  # the call names the values in another order than the user said them
    assert dates  # dates are drilled too


def test_a_steps_drills_depend_on_seed_and_step_only(interpreter) -> None:
    first = drill_batch(interpreter, seed=0, step=5, steps=30)
    assert [t.token_ids for t in first] == [t.token_ids for t in drill_batch(interpreter, 0, 5, 30)]
    assert [t.token_ids for t in first] != [t.token_ids for t in drill_batch(interpreter, 0, 6, 30)]
    assert [t.token_ids for t in first] != [t.token_ids for t in drill_batch(interpreter, 1, 5, 30)]
    assert sum(len(t.token_ids) for t in first) >= ROWS * ROW_LEN * 0.9


def test_drills_state_more_numbers_as_they_go(interpreter) -> None:
    """Thirds of the drills: one number each, then up to two, then up to three (MAX_VALUES)."""
    def most_values(step: int) -> int:
        return max(interpreter.decode(t.token_ids).count(" is ") for t in drill_batch(interpreter, 0, step, 30))

    assert [most_values(step) for step in (0, 9, 10, 19, 20, 29)] == [1, 1, 2, 2, MAX_VALUES, MAX_VALUES]
