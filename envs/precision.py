"""Answer precision for information tasks: a reply must answer the question, not replay the records it read.

An agent that pastes every tool result back to the user states the answer somewhere in the paste, so a
must_mention rubric alone rewards dumping. `with_precision_rubric` gives each information task one more
rubric, of kind mention_at_most: the distinctive values its golden tool calls return that nobody asked for
(ids, names, codes, dates and amounts of other fields and records), of which a reply may repeat only a few.

Left out of those values, so that an honest answer is never penalised for them: whatever the reference
answer states, whatever the user said or knows (opening, goal, facts), and anything that contains or is
contained in an accepted answer phrase (the ISO form of the asked date, say). Distinctive means a string
with a digit or a capital letter, or a number that is not a small whole number: common words ("active") and
small counts occur in any honest sentence.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from envs.domain import Domain
from envs.golden import golden_results
from envs.judges.rules import mentions, normalise
from envs.tasks import Rubric, Task, TaskKind

MAX_EXTRA = 3  # unrequested record values a reply may repeat (a greeting by name, an id, a date)
_SMALL = 100  # whole numbers below this are counts and hours, said in any sentence


def record_values(result: Any) -> Iterator[Any]:
    """The scalar values of a tool result, depth first (dict keys are field names, not data)."""
    if isinstance(result, dict):
        for value in result.values():
            yield from record_values(value)
    elif isinstance(result, list | tuple):
        for value in result:
            yield from record_values(value)
    else:
        yield result


def _distinctive(value: Any) -> str | None:
    """`value` as a phrase a dump would contain, if it is specific enough that an answer would not say it
    by chance; otherwise None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return json.dumps(value) if abs(value) >= _SMALL or value != int(value) else None
    text = str(value)
    specific = any(ch.isdigit() or ch.isupper() for ch in text)
    return text if specific and len(normalise(text)) >= 3 else None


def unrequested_values(task: Task, results: list[Any]) -> list[str]:
    """Distinctive values of the golden tool results that neither the question nor the answer is about, each
    once (by normalised form), in the order the tools returned them."""
    known = "\n".join([task.reference_answer, task.scenario.opening, task.scenario.goal,
                       *(fact.value for fact in task.scenario.facts)])
    answers = [phrase for rubric in task.rubrics if rubric.kind == "must_mention" for phrase in rubric.phrases]
    values: dict[str, str] = {}
    for value in record_values(results):
        phrase = _distinctive(value)
        if phrase is None or mentions(known, phrase):
            continue
        if any(mentions(phrase, answer) or mentions(answer, phrase) for answer in answers):
            continue
        values.setdefault(normalise(phrase), phrase)
    return list(values.values())


def precision_rubric(task: Task, results: list[Any]) -> Rubric | None:
    """A mention_at_most rubric over the unrequested values: at most `MAX_EXTRA`, and at most half of them.

    None when there are fewer than two such values: then any allowance at all would let a dump through.
    """
    values = unrequested_values(task, results)
    limit = min(MAX_EXTRA, len(values) // 2)
    if limit == 0:
        return None
    return Rubric(kind="mention_at_most", phrases=tuple(values), limit=limit,
                  description=f"answers without replaying the records: at most {limit} of {len(values)} record "
                              "values nobody asked for")


def with_precision_rubric(domain: Domain, task: Task) -> Task:
    """`task` with its answer-precision rubric added, if it is an information task that has one."""
    if task.kind != TaskKind.INFORMATION:
        return task
    rubric = precision_rubric(task, golden_results(domain, task))
    return task if rubric is None else task.model_copy(update={"rubrics": (*task.rubrics, rubric)})
