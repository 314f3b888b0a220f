"""An LLM yes/no judge for answer rubrics that phrases cannot capture.

The judge runs at temperature 0 and must answer Yes or No; reasoning in <think> tags is ignored. Any other
answer raises `JudgeParseError` (a system error), because reading it as "no" would punish the agent for the
judge's failure.
"""

from __future__ import annotations

import re

from envs.chat_endpoint import ChatClient
from envs.errors import JudgeParseError
from envs.tasks import Rubric
from envs.verdict import RubricResult

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_VERDICT = re.compile(r"^\W*(yes|no)\b\W*$", re.IGNORECASE)

JUDGE_INSTRUCTIONS = (
    "You grade a customer-support agent's replies. Read the replies and the question about them. "
    "Answer with exactly one word: Yes or No."
)


def parse_yes_no(answer: str) -> bool:
    """True for yes, False for no; anything else is a `JudgeParseError`."""
    text = _THINK.sub("", answer).strip()
    match = _VERDICT.match(text)
    if match is None:
        raise JudgeParseError(f"judge answer is neither Yes nor No: {answer[:200]!r}")
    return match.group(1).lower() == "yes"


class LlmJudge:
    def __init__(self, client: ChatClient) -> None:
        self._client = client

    async def check(self, rubric: Rubric, replies: str) -> RubricResult:
        messages = [
            {"role": "system", "content": JUDGE_INSTRUCTIONS},
            {"role": "user", "content": f"Agent replies:\n<<<\n{replies}\n>>>\n\nQuestion: {rubric.question}"},
        ]
        answer = await self._client.complete(messages, temperature=0.0, max_tokens=1024)
        passed = parse_yes_no(answer)
        return RubricResult(kind=rubric.kind, description=rubric.description or rubric.question,
                            passed=passed, detail=f"judge answered {'yes' if passed else 'no'}")
