"""Copy drills: the one skill a pretrained LLM brings to tool use that a policy made on the spot lacks.

A real Qwen copies an id it was just told into a tool call without thinking; the laptop demo's tiny Qwen is
initialised at random, and its few hundred demonstrations teach the conversation's shape long before they
teach copying: teacher-forced after 120 demonstration updates, it predicted 22% of the digits of the values its
calls copy (chance is 10%), so every task needing an id failed on every trial and GRPO saw no task in the
middle bands. Short synthetic drills first (a user states one to three numbers or dates, the assistant passes
them to a tool call, in another order) let its attention learn to look a value up by its name and copy it
digit by digit: after 400 drill updates and the same 120, 92% of the first
digits and 96% of the later ones.

Each drill is rendered by the model's own chat template, so the drill and the episodes share every
formatting token; only the assistant's tool call carries loss.
"""

from __future__ import annotations

import numpy as np

from rollout.interpret.render import ChatRenderer
from rollout.trajectory import Trajectory

DATE_FIELDS = ("date of birth", "booking date", "start date")
FIELDS = ("customer id", "line id", "card number", "PIN", "member id", "phone number", "account number",
          "order number", "book id", "loan id", *DATE_FIELDS)
DIGITS = (4, 16)  # a drilled number's length range: PINs to card numbers
MAX_VALUES = 3  # numbers stated per drill, reached by the last third of the drills (see drill_batch)
ROW_LEN, ROWS = 256, 4  # one drill update: 4 packed rows of 256 tokens, about 25 drills
TOOL = "record_details"


def drill(renderer: ChatRenderer, rng: np.random.Generator, at_most: int = MAX_VALUES) -> Trajectory:
    """One drill: "My PIN is 4821 and my card number is 29087000107581." -> a `record_details` call with
    those values (1 to `at_most` of them) keyed by snake-cased names, in a random order."""
    names = [FIELDS[i] for i in rng.choice(len(FIELDS), size=int(rng.integers(1, at_most + 1)), replace=False)]
    values = {name: _date(rng) if name in DATE_FIELDS else _number(rng) for name in names}
    said = " and ".join(f"my {name} is {value}" for name, value in values.items())
    user = {"role": "user", "content": said[0].upper() + said[1:] + "."}
    arguments = {names[i].lower().replace(" ", "_"): values[names[i]] for i in rng.permutation(len(names))}
    call = {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": TOOL, "arguments": arguments}}]}
    prompt, sampled = renderer.first_prompt([user]), renderer.assistant_ids([user, call])
    ids = prompt + sampled
    return Trajectory("copy-drill", "copy-drill", ids, [0] * len(prompt) + [1] * len(sampled), [0.0] * len(ids),
                      [], 1.0, "agent_done")


def _number(rng: np.random.Generator) -> str:
    return "".join(map(str, rng.integers(0, 10, size=int(rng.integers(*DIGITS, endpoint=True)))))


def _date(rng: np.random.Generator) -> str:
    """YYYY-MM-DD: its two-digit parts are too short for tbjax.fresh_values, so the demonstrations alone
    teach a policy to recall months and days rather than copy them (it wrote 1995-0-16 for 1995-10-16)."""
    return f"{rng.integers(1940, 2031)}-{rng.integers(1, 13):02d}-{rng.integers(1, 29):02d}"


def drill_batch(renderer: ChatRenderer, seed: int, step: int, steps: int) -> list[Trajectory]:
    """The drills of update `step` of `steps`: enough to fill ROWS rows of ROW_LEN tokens nine-tenths, a pure
    function of its arguments so a resumed warm start draws what an uninterrupted one would. The first third
    states one number per drill, the next up to two, the last up to MAX_VALUES: copying one number forms
    within ~150 updates, while picking the named one of three from the start did not in 300 (nll stayed at
    1.15 per trained token)."""
    rng = np.random.default_rng([seed, step, 2])
    at_most = min(MAX_VALUES, 1 + step * MAX_VALUES // max(steps, 1))
    batch: list[Trajectory] = []
    while sum(len(t.token_ids) for t in batch) < ROWS * ROW_LEN * 0.9:
        batch.append(drill(renderer, rng, at_most))
    return batch
