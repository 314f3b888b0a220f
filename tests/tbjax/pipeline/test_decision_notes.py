"""scripts/decision_notes.py sorts a trial by what the policy did after the tool result its note reads: on
the oracle's real demonstration (episode loop, sandbox, MCP tools), and on that transcript edited the way a
policy goes wrong."""

import asyncio
import functools

from decision_notes import KINDS, note_kind

from envs import load_tasks, open_session
from rollout.oracle import demonstrations
from tests.rollout.oracle_support import LIMITS


def test_a_trial_is_sorted_by_what_it_does_after_the_record(tiny_interpreter) -> None:
    task = next(t for t in load_tasks("library", split="train") if t.template == "renew_past_the_limit")
    passed, _ = asyncio.run(demonstrations([task], tiny_interpreter, functools.partial(open_session, prompt="compact"),
                                           LIMITS))
    transcript = tiny_interpreter.decode(passed[0].trajectory.token_ids)
    assert note_kind(task, transcript) == KINDS[1]  # the oracle states the record
    assert note_kind(task, transcript.replace("renewals 2,", "renewals 0,")) == KINDS[2]
    assert note_kind(task, transcript.replace(task.note.text, "")) == KINDS[3]
    unread = transcript.split('"name": "list_loans"')[0]
    assert note_kind(task, unread) == KINDS[0]
