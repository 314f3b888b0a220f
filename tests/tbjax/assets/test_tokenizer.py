"""The tiny tokenizer: Qwen's special tokens, exact chat-template rendering, lossless byte-level BPE."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jinja2.exceptions import TemplateError

from tbjax.assets.tokenizer import SPECIAL_TOKENS, TAG_TOKENS, train_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer()


def test_special_and_tag_tokens_are_single_ids(tokenizer):
    for token in SPECIAL_TOKENS + TAG_TOKENS:
        ids = tokenizer.encode(token, add_special_tokens=False)
        assert len(ids) == 1 and tokenizer.convert_ids_to_tokens(ids[0]) == token
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|endoftext|>"
    # chat delimiters vanish with skip_special_tokens; tool and think tags stay visible (as in Qwen)
    ids = tokenizer.encode("<|im_start|>assistant\n<think>x</think><tool_call>{}</tool_call><|im_end|>")
    assert tokenizer.decode(ids, skip_special_tokens=True) == "assistant\n<think>x</think><tool_call>{}</tool_call>"


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=80))
def test_any_text_round_trips(tokenizer, text):
    assert tokenizer.decode(tokenizer.encode(text, add_special_tokens=False)) == text


def test_chat_template_renders_tools_calls_responses_and_reasoning(tokenizer):
    tools = [{"type": "function", "function": {"name": "get_plan", "parameters": {"type": "object"}}}]
    messages = [
        {"role": "system", "content": "Follow the policy."},
        {"role": "user", "content": "Change my plan."},
        {"role": "assistant", "content": "", "reasoning_content": "look it up",
         "tool_calls": [{"type": "function", "function": {"name": "get_plan", "arguments": {"id": 7}}}]},
        {"role": "tool", "content": '{"plan": "basic"}'},
        {"role": "tool", "content": "second"},
        {"role": "assistant", "content": "Done."},
    ]
    text = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
    assert text == (
        "<|im_start|>system\nFollow the policy.\n\n# Tools\n\nYou may call one or more functions to assist with "
        "the user query. The available functions are listed in <tools></tools>, one JSON object per line:\n"
        '<tools>\n{"name": "get_plan", "parameters": {"type": "object"}}\n</tools>\n\nTo call a function, reply '
        "with a JSON object holding its name and arguments inside <tool_call></tool_call> tags:\n<tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\nChange my plan.<|im_end|>\n"
        '<|im_start|>assistant\n<think>\nlook it up\n</think>\n\n<tool_call>\n{"name": "get_plan", "arguments": '
        '{"id": 7}}\n</tool_call><|im_end|>\n'
        '<|im_start|>user\n<tool_response>\n{"plan": "basic"}\n</tool_response>\n<tool_response>\nsecond\n'
        "</tool_response><|im_end|>\n"
        "<|im_start|>assistant\nDone.<|im_end|>\n<|im_start|>assistant\n"
    )


def test_chat_template_renders_qwen3_xml_calls_on_request(tokenizer):
    tools = [{"type": "function", "function": {"name": "get_plan", "parameters": {"type": "object"}}}]
    messages = [
        {"role": "user", "content": "Change my plan."},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"type": "function", "function": {"name": "get_plan",
                                              "arguments": {"id": "AC 7\nx", "n": 7, "ok": True, "tags": ["a"]}}},
            {"type": "function", "function": {"name": "get_plan", "arguments": {}}}]},
    ]
    text = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, tool_call_format="qwen3_xml")
    assert text == (
        "<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user query. The "
        "available functions are listed in <tools></tools>, one JSON object per line:\n<tools>\n"
        '{"name": "get_plan", "parameters": {"type": "object"}}\n</tools>\n\nTo call a function, reply with its '
        "name and one <parameter> block per argument inside <tool_call></tool_call> tags, writing strings as they "
        "are and any other value as JSON:\n<tool_call>\n<function=<function-name>>\n<parameter=<argument-name>>\n"
        "<argument-value>\n</parameter>\n</function>\n</tool_call><|im_end|>\n"
        "<|im_start|>user\nChange my plan.<|im_end|>\n"
        "<|im_start|>assistant\nChecking.\n<tool_call>\n<function=get_plan>\n<parameter=id>\nAC 7\nx\n</parameter>\n"
        "<parameter=n>\n7\n</parameter>\n<parameter=ok>\ntrue\n</parameter>\n<parameter=tags>\n[\"a\"]\n"
        "</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_plan>\n</function>\n</tool_call>"
        "<|im_end|>\n"
    )
    hermes = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)
    assert hermes == tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, tool_call_format="hermes")


def test_chat_template_refuses_what_qwen3_xml_cannot_write(tokenizer):
    call = {"type": "function", "function": {"name": "get_plan", "arguments": '{"id": 7}'}}
    messages = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "", "tool_calls": [call]}]
    with pytest.raises(TemplateError, match="arguments as a mapping"):
        tokenizer.apply_chat_template(messages, tokenize=False, tool_call_format="qwen3_xml")
    with pytest.raises(TemplateError, match="tool_call_format must be hermes or qwen3_xml"):
        tokenizer.apply_chat_template(messages, tokenize=False, tool_call_format="xml")
