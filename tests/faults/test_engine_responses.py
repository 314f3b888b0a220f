"""Engine answers that must not be believed: over real HTTP from a stand-in SGLang server whose answers are
rewritten, each is a `ProtocolError` naming what is wrong (never a TypeError out of the client, never tokens an
episode trusts), and in a real episode a system error of kind `engine_protocol`, not a score of 0."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from envs import load_tasks, open_session
from rollout.engines.protocol import SamplingParams
from rollout.engines.sglang import SGLangEngine
from rollout.engines.sglang_wire import ProtocolError
from rollout.episode import EpisodeConfig, run_episode
from rollout.interpret import Interpreter
from tbjax.assets.tokenizer import save_tokenizer, train_tokenizer
from tests.rollout.sglang_stub_support import StubModel, ThreadServer, on_engine

SAMPLING = SamplingParams(max_new_tokens=4, stop_token_ids=(7,))
VOCAB = 1000


def rewrite(ids: list[Any] | None = None, logprob: Any = None, **meta: Any):
    """An answer rewriter: new output ids (with log-prob entries to match), a first log-prob, meta fields."""
    def corrupt(answer: dict[str, Any]) -> dict[str, Any]:
        info = answer["meta_info"]
        if ids is not None:
            answer["output_ids"] = ids
            info["output_token_logprobs"] = [[-0.5, token, None] for token in ids]
            info["finish_reason"] = {"type": "length"}
        if logprob is not None:
            info["output_token_logprobs"][0][0] = logprob
        info.update(meta)
        return answer
    return corrupt


HOSTILE = [
    (rewrite(ids=[None]), r"output_ids\[0\] is 'None'"),
    (rewrite(ids=["x"]), r"output_ids\[0\] is 'x'"),
    (rewrite(ids=[-5]), r"output_ids\[0\] is '-5'"),
    (rewrite(ids=[True]), r"output_ids\[0\] is 'True'"),
    (rewrite(ids=[VOCAB + 3]), "below the vocabulary size 1000"),
    (rewrite(ids=[101] * 3001), "3001 output ids for max_new_tokens 4"),
    (rewrite(ids=[]), "0 output ids for max_new_tokens 4"),
    (rewrite(logprob=50.0), "log-prob 50.0: a log-prob is finite and at most 0"),
    (rewrite(logprob=True), r"must be \[logprob, token_id, text\]"),
    (rewrite(prompt_tokens="abc"), "meta_info.prompt_tokens is 'abc'"),
    (rewrite(cached_tokens=-1), "meta_info.cached_tokens is '-1'"),
]


@pytest.fixture(scope="module")
def server():
    running = ThreadServer(StubModel(name="hostile"))
    yield running
    running.stop()


@pytest.mark.parametrize(("corrupt", "problem"), HOSTILE)
def test_an_unbelievable_answer_is_a_protocol_error(server, corrupt, problem) -> None:
    server.model.reset(corrupt=corrupt)
    with pytest.raises(ProtocolError, match=problem) as raised:
        on_engine([server.url], lambda engine: engine.generate([1, 2, 3], SAMPLING), vocab_size=VOCAB)
    assert server.url in str(raised.value)
    assert len(server.model.received) == 1  # not retried: another attempt would get the same answer


def test_a_believable_answer_still_parses(server) -> None:
    server.model.reset()
    generation = on_engine([server.url], lambda engine: engine.generate([1, 2, 3], SAMPLING), vocab_size=VOCAB)
    assert generation.output_ids == (106, 107, 108, 109) and generation.finish_reason == "length"


@pytest.mark.parametrize("fault", ["out of the vocabulary", "more tokens than asked for", "a positive log-prob"])
def test_in_an_episode_it_is_a_system_error_not_a_failure(server, tmp_path, fault) -> None:
    interpreter = Interpreter.from_pretrained(save_tokenizer(train_tokenizer(), tmp_path))
    server.model.reset(corrupt={"out of the vocabulary": rewrite(ids=[len(interpreter.tokenizer)]),
                                "more tokens than asked for": rewrite(ids=[101] * 3001),
                                "a positive log-prob": rewrite(logprob=50.0)}[fault])
    task = next(t for t in load_tasks("library", split="train") if t.template == "renew_loan")

    async def episode():
        engine = SGLangEngine.from_urls([server.url], vocab_size=len(interpreter.tokenizer), backoff_s=0.01)
        try:
            return await run_episode(task, engine, interpreter, group_id="g", opener=open_session,
                                     config=EpisodeConfig(max_turns=4, max_tokens_per_turn=64, token_budget=60_000))
        finally:
            await engine.close()

    trajectory = asyncio.run(episode()).trajectory
    assert trajectory.system_error == "engine_protocol" and trajectory.reward is None
    assert trajectory.termination == "system_error"
