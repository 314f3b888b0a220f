"""`python -m rollout.evaluate --thinkingbox-data ...`: an API agent on a ThinkingBox-style task through the
adapter's synthetic clone (its stand-in server runs on this Python), with the user simulator given by flags.
The real clone's run is the adapter's to measure (skipped here without TBJAX_THINKINGBOX_DATA)."""

import json
import sys

from rollout import evaluate
from rollout.records import read_records
from tests.envs.fake_openai_support import Canned
from tests.envs.thinkingbox_fixtures.support import synthetic_clone
from tests.rollout.evaluation.openai_support import completion


def test_api_agent_on_a_thinkingbox_task_with_a_simulated_user(fake_openai, tmp_path, monkeypatch):
    monkeypatch.setattr("envs.thinkingbox.session.check_interpreter", lambda *_: None)  # not the real 3.12 venv
    clone = synthetic_clone(tmp_path)
    fake_openai.queue(
        completion(calls=[("add_note", {"text": "call Bob"})]), completion(text="Added it. <DONE>"),  # trial 0
        completion(text="What should the note say?"), Canned("It should say call Bob."),  # trial 1: asks the user
        completion(calls=[("add_note", {"text": "call Bob"})]), completion(text="Done. <DONE>"),
        completion(text="Nothing to do. <DONE>"))  # trial 2: changes nothing
    out = tmp_path / "eval"
    code = evaluate.main(["--engine", "openai", "--base-url", fake_openai.base_url, "--model", "agent",
                          "--thinkingbox-data", str(clone), "--thinkingbox-python", sys.executable,
                          "--thinkingbox-test-list", "releases/mini/testlist.yaml", "--limit", "1",
                          "--user-base-url", fake_openai.base_url, "--user-model", "user-sim",
                          "--k", "3", "--concurrency", "1", "--out", str(out)])
    assert code == 0
    records = {r.trial: r for r in read_records(out / "trials.jsonl")}
    assert [records[t].passed for t in range(3)] == [True, True, False]
    assert all(r.task_id.startswith("thinkingbox/") for r in records.values())
    assert [r["model"] for r in fake_openai.requests] == ["agent"] * 3 + ["user-sim"] + ["agent"] * 3
    summary = json.loads((out / "summary.json").read_text())
    assert summary["tasks"] == 1 and summary["pass@1"] == 2 / 3
