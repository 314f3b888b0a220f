"""Replies of an OpenAI-compatible chat API for the `--engine openai` tests: a whole chat.completion body
(text or tool calls, with its `usage`), queued on the envs tests' local server (`fake_openai`)."""

import json

from tests.envs.fake_openai_support import Canned


def completion(*, text=None, calls=(), prompt=1000, completion_tokens=50, cached=200, reasoning=10):
    message = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [{"id": f"call_{i}", "type": "function",
                                  "function": {"name": name, "arguments": args if isinstance(args, str)
                                               else json.dumps(args)}} for i, (name, args) in enumerate(calls)]
    usage = {"prompt_tokens": prompt, "completion_tokens": completion_tokens,
             "total_tokens": prompt + completion_tokens, "prompt_tokens_details": {"cached_tokens": cached},
             "completion_tokens_details": {"reasoning_tokens": reasoning}}
    body = {"id": "x", "object": "chat.completion", "model": "api-model",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": usage}
    return Canned(raw_body=json.dumps(body))
