"""`--engine openai`: the chat-level episode against a local OpenAI-compatible HTTP server with canned
replies (real HTTP, real client): tool calls run against the sandbox and grade, usage is summed from the
API's `usage`, malformed arguments go back to the agent, and an endpoint failure is a system error."""

import json

from envs import load_tasks, write_jsonl
from rollout import evaluate
from rollout.records import read_records
from tests.envs.fake_openai_support import Canned
from tests.rollout.evaluation.openai_support import completion

TASK_ID = "telecom/upgrade_plan/000"


def test_chat_episodes_pass_fail_and_system_error(fake_openai, tmp_path, monkeypatch):
    task = next(t for t in load_tasks("telecom", "train") if t.id == TASK_ID)
    golden = [(call.tool, call.args) for call in task.golden_path]
    # Trial 0 follows the golden path (one malformed call first), trial 1 only talks, trial 2 hits an API error.
    fake_openai.queue(completion(calls=[(golden[0][0], "{not json")]),
                      *[completion(calls=[call]) for call in golden],
                      completion(text="Your line is now on the Plus 20GB plan."),
                      completion(text="I cannot help with that today."),
                      Canned(status=400, text="model not found"))
    tasks_file = tmp_path / "tasks.jsonl"
    write_jsonl([task], tasks_file)
    prices = tmp_path / "prices.yaml"
    prices.write_text("version: t\nmodels:\n  api-model: {input: 3.0, cached_input: 0.3, output: 15.0}\n")
    monkeypatch.setenv("TEST_AGENT_KEY", "sk-local")
    out = tmp_path / "eval"
    code = evaluate.main(["--engine", "openai", "--base-url", fake_openai.base_url, "--model", "api-model",
                          "--api-key-env", "TEST_AGENT_KEY", "--tasks", str(tasks_file), "--k", "3",
                          "--concurrency", "1", "--out", str(out), "--prices", str(prices), "--max-turns", "8"])
    assert code == 0
    records = {r.trial: r for r in read_records(out / "trials.jsonl")}
    calls = len(golden) + 2  # the malformed call, the golden path, the closing message
    assert records[0].passed is True and records[0].termination == "user_done" and records[0].turns == calls
    assert records[0].usage.prompt_tokens == 1000 * calls and records[0].usage.cached_tokens == 200 * calls
    assert records[0].usage.reasoning_tokens == 10 * calls and records[0].model == "api-model"
    assert records[1].passed is False and records[1].diff  # the plan was not changed
    assert records[2].passed is None and records[2].system_error == "agent_endpoint"

    first = fake_openai.requests[0]
    assert first["model"] == "api-model" and {t["function"]["name"] for t in first["tools"]} >= {g[0] for g in golden}
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    answered = fake_openai.requests[1]["messages"]
    assert answered[-1]["role"] == "tool" and answered[-1]["tool_call_id"] == "call_0"
    assert "arguments" in answered[-1]["content"]  # the malformed call was explained, not run
    assert fake_openai.headers[0]["Authorization"] == "Bearer sk-local"

    summary = json.loads((out / "summary.json").read_text())
    assert summary["system_errors"] == {"total": 1, "by_kind": {"agent_endpoint": 1}}
    assert summary["pass@1"] == 0.5 and summary["trials"] == 2
    tokens = summary["tokens"]
    expected = ((tokens["prompt_tokens"] - tokens["cached_tokens"]) * 3.0 + tokens["cached_tokens"] * 0.3
                + tokens["completion_tokens"] * 15.0) / 1e6
    assert abs(summary["cost_usd"]["campaign"] - expected) < 1e-12 and summary["cost_usd"]["per_success"] == expected


def test_missing_api_key_is_a_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    tasks_file = tmp_path / "tasks.jsonl"
    write_jsonl(load_tasks("telecom", "train")[:1], tasks_file)
    try:
        evaluate.main(["--engine", "openai", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--api-key-env",
                       "NO_SUCH_KEY_VAR", "--tasks", str(tasks_file), "--out", str(tmp_path / "o")])
    except SystemExit as exit_:
        assert "NO_SUCH_KEY_VAR" in str(exit_.code) and "not set" in str(exit_.code)
    else:
        raise AssertionError("a missing API key must stop the run before any trial")
