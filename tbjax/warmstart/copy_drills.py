"""Copy drills: the one skill a pretrained LLM brings to tool use that a policy made on the spot lacks.

A real Qwen copies an id it was just told into a tool call without thinking; the laptop demo's tiny Qwen is
initialised at random, and its few hundred demonstrations teach the conversation's shape long before they
teach copying: it predicts the digits of the values its calls copy barely above chance, so every task needing
an id fails on every trial and GRPO sees no task in the middle bands. Short synthetic drills first (a user
states one to three numbers or dates, the assistant passes them to a tool call, in another order) let its
attention learn to look a value up by its name and copy it digit by digit.

Copying the value just said is not enough: an episode's fourth call copies a book title the user gave in
the first turn, 500 tokens and two long tool results earlier, and the policy garbled exactly those (every
place-hold, booking and waiver task failed on every trial; only tasks needing no write passed). So the last
quarter of the drills puts one or two lookups between the statement and the call: the assistant looks a
stated value up, gets a long record back (which it must not copy from), and then records the values said
at the start; names and titles are drilled beside numbers and dates. Drills alone do not make a policy
choose the right tool chain; the demonstrations' epochs do (configs/tiny-cpu.yaml sets both).

Each drill is rendered by the model's own chat template, in the turns an episode's token stream has
(first prompt, sampled assistant turns, tool-result deltas), so the drill and the episodes share every
formatting token; only the assistant's calls carry loss.
"""

from __future__ import annotations

import json

import numpy as np

from rollout.interpret.render import ChatRenderer
from rollout.trajectory import Trajectory

DATE_FIELDS = ("date of birth", "booking date", "start date")
TEXT_FIELDS = ("book title", "full name", "street")
FIELDS = ("customer id", "line id", "card number", "PIN", "member id", "phone number", "account number",
          "order number", "book id", "loan id", *DATE_FIELDS, *TEXT_FIELDS)
WORDS = ("Silent", "Harbor", "Letters", "River", "Winter", "Garden", "Stone", "Lantern", "Orchard", "Falcon",
         "Maple", "Summer", "Hollow", "Crown", "Meadow", "Ember", "Atlas", "Willow", "Copper", "North",
         "Marlow", "Quinn", "Okafor", "Lindqvist", "Moreau", "Tanaka", "Alvarez", "Brennan", "Castellano", "Iyer")
RECORD_KEYS = ("status", "branch", "plan", "balance_usd", "opened_on", "expires_on", "owner", "email", "tier",
               "notes", "record_id", "count", "region", "updated_on")
DIGITS = (4, 16)  # a drilled number's length range: PINs to card numbers
MAX_VALUES = 3  # values stated per drill, reached by the third quarter of the drills (see drill_batch)
MAX_LOOKUPS = 2  # calls with long results between the statement and the recording call (last quarter)
ROWS = 4
ROW_LEN, DISTANT_ROW_LEN = 256, 768  # one update: 4 packed rows, about 25 near drills or 6 distant ones
TOOL, LOOKUP_TOOL = "record_details", "look_up"


def drill(renderer: ChatRenderer, rng: np.random.Generator, at_most: int = MAX_VALUES,
          lookups: int = 0) -> Trajectory:
    """One drill: "My PIN is 4821 and my book title is Winter Orchard." -> `lookups` look_up calls, each
    answered by a long random record -> a `record_details` call with the stated values (1 to `at_most` of
    them) keyed by snake-cased names, in a random order."""
    names = [FIELDS[i] for i in rng.choice(len(FIELDS), size=int(rng.integers(1, at_most + 1)), replace=False)]
    values = {name: _value(name, rng) for name in names}
    said = " and ".join(f"my {name} is {value}" for name, value in values.items())
    messages = [{"role": "user", "content": said[0].upper() + said[1:] + "."}]
    ids = renderer.first_prompt(messages)
    mask = [0] * len(ids)
    for _ in range(lookups):
        name = names[int(rng.integers(len(names)))]
        messages.append(_call(LOOKUP_TOOL, {_key(name): values[name]}))
        sampled = renderer.assistant_ids(messages)
        messages.append({"role": "tool", "content": json.dumps(_record(rng))})
        result = renderer.delta(messages[-1:])
        ids, mask = ids + sampled + result, mask + [1] * len(sampled) + [0] * len(result)
    messages.append(_call(TOOL, {_key(names[i]): values[names[i]] for i in rng.permutation(len(names))}))
    sampled = renderer.assistant_ids(messages)
    return Trajectory("copy-drill", "copy-drill", ids + sampled, mask + [1] * len(sampled),
                      [0.0] * (len(ids) + len(sampled)), [], 1.0, "agent_done")


def _call(tool: str, arguments: dict[str, str]) -> dict:
    return {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": tool, "arguments": arguments}}]}


def _key(name: str) -> str:
    return name.lower().replace(" ", "_")


def _value(name: str, rng: np.random.Generator) -> str:
    if name in DATE_FIELDS:
        return _date(rng)
    if name in TEXT_FIELDS:
        return _words(rng)
    return _number(rng)


def _record(rng: np.random.Generator) -> dict[str, str]:
    """A lookup's answer, as long as a domain's member or line record: values the recording call must skip."""
    keys = rng.choice(len(RECORD_KEYS), size=int(rng.integers(6, len(RECORD_KEYS) + 1)), replace=False)
    kinds = (_number, _date, _words)
    return {RECORD_KEYS[k]: kinds[int(rng.integers(len(kinds)))](rng) for k in keys}


def _words(rng: np.random.Generator) -> str:
    return " ".join(WORDS[i] for i in rng.choice(len(WORDS), size=int(rng.integers(2, 4)), replace=False))


def _number(rng: np.random.Generator) -> str:
    return "".join(map(str, rng.integers(0, 10, size=int(rng.integers(*DIGITS, endpoint=True)))))


def _date(rng: np.random.Generator) -> str:
    """YYYY-MM-DD: its two-digit parts are too short for tbjax.warmstart.fresh_values, so the demonstrations alone
    teach a policy to recall months and days rather than copy them (it wrote 1995-0-16 for 1995-10-16)."""
    return f"{rng.integers(1940, 2031)}-{rng.integers(1, 13):02d}-{rng.integers(1, 29):02d}"


def drill_row_len(step: int, steps: int) -> int:
    """The packed row length of update `step`'s drills: distant drills are three times as long."""
    return DISTANT_ROW_LEN if _quarter(step, steps) == 3 else ROW_LEN


def drill_batch(renderer: ChatRenderer, seed: int, step: int, steps: int) -> list[Trajectory]:
    """The drills of update `step` of `steps`: enough to fill ROWS rows of drill_row_len tokens nine-tenths, a
    pure function of its arguments so a resumed warm start draws what an uninterrupted one would. By quarters:
    one value per drill, up to two, up to MAX_VALUES, then up to MAX_VALUES with 1 to MAX_LOOKUPS lookups
    between statement and call. Copying one number forms first; picking the named one of three from the start
    did not form at all (tbjax/pipeline/README.md, Experiments behind the recipe)."""
    rng = np.random.default_rng([seed, step, 2])
    quarter = _quarter(step, steps)
    at_most = min(MAX_VALUES, 1 + quarter)
    budget = ROWS * drill_row_len(step, steps) * 0.9
    batch: list[Trajectory] = []
    while sum(len(t.token_ids) for t in batch) < budget:
        lookups = int(rng.integers(1, MAX_LOOKUPS + 1)) if quarter == 3 else 0
        batch.append(drill(renderer, rng, at_most, lookups))
    return batch


def _quarter(step: int, steps: int) -> int:
    return min(3, step * 4 // max(steps, 1))
