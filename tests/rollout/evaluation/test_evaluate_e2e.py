"""Evaluation end to end on CPU: a tiny random Qwen served by `python -m tbjax.serve` (started the way
`--engine embedded` starts it, one server for the module), the scripted user, built-in tasks of all five
domains. The CLI writes records, summary, report and plots; an interrupted campaign resumes without redoing
finished trials; an engine failing for one task gives system errors that are reported and not scored, flag the
campaign inexact (a comparison refuses it) until a resumed run retries exactly those trials."""

import asyncio
import json
import time

import httpx
import pytest

from envs import load_tasks, write_jsonl
from rollout import evaluate
from rollout.compare import write_comparison
from rollout.engines.protocol import EngineError
from rollout.engines.sglang import SGLangEngine
from rollout.episode import EpisodeConfig
from rollout.evaluation import agent_sources, engine_flags
from rollout.evaluation.agent_sources import start_embedded
from rollout.evaluation.coverage import InexactCampaignError
from rollout.evaluation.runner import token_trial_runner
from rollout.interpret import Interpreter
from rollout.launch_sglang import healthy
from rollout.records import read_records
from tbjax.assets.tiny import make_flax_checkpoint

DOMAINS = ("clinic", "library", "telecom", "ticketing", "utility")
# Prompts are 2.7k-4.3k tokens (system prompt and tools); prefill dominates on CPU, so the 20-trial CLI run
# takes one agent turn per episode and the smaller campaigns two.
EPISODE = EpisodeConfig(max_turns=2, max_tokens_per_turn=16, token_budget=4600, timeout_s=600)
EPISODE_FLAGS = ["--max-turns", "1", "--max-tokens-per-turn", "16", "--token-budget", "4600", "--timeout-s", "600"]


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory):
    return make_flax_checkpoint(tmp_path_factory.mktemp("policy"), "qwen3")


@pytest.fixture(scope="module")
def server_url(policy_dir):
    supervisor = start_embedded(policy_dir, server_args="--slots 16 --max-len 5120")
    yield supervisor.urls[0]
    supervisor.stop()


def tasks_per_domain(n: int):
    return [t for d in DOMAINS for t in load_tasks(domain=d, split="train")[:n]]


@pytest.mark.slow
def test_cli_evaluates_five_tasks_four_trials(policy_dir, server_url, tmp_path):
    tasks_file = tmp_path / "tasks.jsonl"
    write_jsonl(tasks_per_domain(1), tasks_file)
    out = tmp_path / "eval"
    start = time.perf_counter()
    code = evaluate.main(["--engine", "sglang", "--url", server_url, "--tokenizer", str(policy_dir), "--tasks",
                          str(tasks_file), "--k", "4", "--out", str(out), "--concurrency", "16", *EPISODE_FLAGS])
    seconds = time.perf_counter() - start
    assert code == 0
    records = read_records(out / "trials.jsonl")
    assert len(records) == 20 and {r.trial for r in records} == {0, 1, 2, 3}
    assert all(r.model == policy_dir.name and r.usage.prompt_tokens > 0 for r in records)
    scored = [r for r in records if r.system_error is None]
    assert all(r.weight_version == "0" and r.turns >= 1 for r in scored if r.termination != "token_budget")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["trials"] + summary["system_errors"]["total"] == 20
    assert summary["pass@1"] == sum(bool(r.passed) for r in scored) / len(scored)
    assert set(summary["domains"]) == set(DOMAINS)
    assert summary["tokens"]["completion_tokens"] == sum(r.usage.completion_tokens for r in records)
    assert "## Domains" in (out / "report.md").read_text()
    for plot in ("domains.png", "successes.png"):
        assert (out / plot).read_bytes().startswith(b"\x89PNG")
    print(f"\n5 tasks x 4 trials through tbjax.serve: {seconds:.1f} s")


def test_seed_repeats_a_campaign_and_prompt_picks_the_instructions(policy_dir, server_url, tmp_path):
    """--seed: the same campaign twice, the server's prefix cache flushed before each, gives the same trials;
    --prompt compact gives the built-in domains' one-line instructions (far fewer prompt tokens)."""
    tasks_file = tmp_path / "tasks.jsonl"
    write_jsonl(load_tasks(domain="telecom", split="train")[:2], tasks_file)

    def campaign(name: str, *flags: str) -> dict:
        assert httpx.post(f"{server_url}/flush_cache").status_code == 200
        out = tmp_path / name
        assert evaluate.main(["--engine", "sglang", "--url", server_url, "--tokenizer", str(policy_dir), "--tasks",
                              str(tasks_file), "--k", "2", "--out", str(out), "--concurrency", "1", *EPISODE_FLAGS,
                              *flags]) == 0
        return {r.key: r.model_dump(exclude={"seconds"}) for r in read_records(out / "trials.jsonl")}

    compact = campaign("a", "--seed", "7", "--prompt", "compact")
    assert campaign("b", "--seed", "7", "--prompt", "compact") == compact
    full = campaign("full", "--seed", "7")
    assert compact.keys() == full.keys() and len(compact) == 4
    assert all(compact[k]["usage"]["prompt_tokens"] < full[k]["usage"]["prompt_tokens"] / 2 for k in compact)
    with pytest.raises(SystemExit, match="drop --seed"):
        asyncio.run(engine_flags.trial_runner_from_flags(evaluate.parse_args(
            ["--engine", "openai", "--base-url", "http://127.0.0.1:1", "--model", "m", "--out", "x",
             "--seed", "1"])).__aenter__())


class CountingRunner:
    """Wraps a trial runner: records which trials ran, and raises KeyboardInterrupt-like failure after
    `stop_after` trials finished (what Ctrl-C or a killed job does to a campaign)."""

    def __init__(self, runner, stop_after: int | None = None):
        self.runner, self.stop_after, self.ran = runner, stop_after, []

    async def __call__(self, task, trial):
        if self.stop_after is not None and len(self.ran) >= self.stop_after:
            raise RuntimeError("interrupted")
        record = await self.runner(task, trial)
        self.ran.append(record.key)
        return record


def test_interrupted_campaign_resumes_without_redoing_trials(policy_dir, server_url, tmp_path):
    interpreter = Interpreter.from_pretrained(policy_dir)
    tasks = tasks_per_domain(1)
    out = tmp_path / "eval"

    async def campaign(runner, resume):
        engine = SGLangEngine.from_urls([server_url])
        try:
            return await evaluate.evaluate(tasks, runner(token_trial_runner(engine, interpreter, model="tiny",
                                                                            config=EPISODE)),
                                           out=out, k=3, resume=resume, concurrency=4)
        finally:
            await engine.close()

    first = None

    def interrupting(runner):
        nonlocal first
        first = CountingRunner(runner, stop_after=6)
        return first

    with pytest.raises(ExceptionGroup):
        asyncio.run(campaign(interrupting, resume=False))
    done_first = {r.key for r in read_records(out / "trials.jsonl")}
    assert 6 <= len(done_first) < 15 and done_first <= set(first.ran)

    second = None

    def counting(runner):
        nonlocal second
        second = CountingRunner(runner)
        return second

    summary = asyncio.run(campaign(counting, resume=True))
    assert not done_first & set(second.ran)
    assert len(second.ran) == 15 - len(done_first)
    assert {r.key for r in read_records(out / "trials.jsonl")} == {(t.id, i) for t in tasks for i in range(3)}
    assert summary["trials"] + summary["system_errors"]["total"] == 15


class FailingForOneTask:
    """An engine whose every call for one task fails like a dead server."""

    def __init__(self, engine, task_id: str):
        self.engine, self.task_id, self.failures = engine, task_id, 0

    async def generate(self, input_ids, sampling, *, session_id=None):
        if session_id and session_id.startswith(self.task_id + "#"):
            self.failures += 1
            raise EngineError(f"server for {self.task_id} is down")
        return await self.engine.generate(input_ids, sampling, session_id=session_id)

    async def end_session(self, session_id):
        await self.engine.end_session(session_id)

    async def update_weights(self, hf_dir, version):
        await self.engine.update_weights(hf_dir, version)

    async def health(self):
        return True

    async def close(self):
        await self.engine.close()


def test_system_error_trials_are_reported_and_not_scored(policy_dir, server_url, tmp_path):
    interpreter = Interpreter.from_pretrained(policy_dir)
    tasks = load_tasks(domain="telecom", split="train")[:3]
    broken = tasks[1].id

    async def campaign():
        engine = FailingForOneTask(SGLangEngine.from_urls([server_url]), broken)
        try:
            runner = token_trial_runner(engine, interpreter, model="tiny", config=EPISODE)
            return await evaluate.evaluate(tasks, runner, out=tmp_path, k=2, concurrency=6), engine.failures
        finally:
            await engine.close()

    summary, failures = asyncio.run(campaign())
    assert failures == 2
    records = {r.key: r for r in read_records(tmp_path / "trials.jsonl")}
    for trial in (0, 1):
        failed = records[(broken, trial)]
        assert failed.passed is None and failed.system_error == "engine" and failed.termination == "system_error"
    assert summary["system_errors"] == {"total": 2, "by_kind": {"engine": 2}}
    assert summary["tasks"] == 2 and summary["trials"] == 4  # the broken task is not counted as failed
    clean = [r for r in records.values() if r.system_error is None]
    assert summary["pass@1"] == sum(bool(r.passed) for r in clean) / 4
    assert broken in (tmp_path / "report.md").read_text()
    # the campaign is flagged inexact, and a comparison refuses it unless told to compare what was recorded
    assert summary["coverage"] == {"exact": False, "expected": 6, "missing": 0, "system_errors": 2,
                                   "system_errors_retried": 0}
    assert "Coverage is not exact" in (tmp_path / "report.md").read_text()
    trials = tmp_path / "trials.jsonl"
    with pytest.raises(InexactCampaignError, match=r"0 of 6 trials missing and 2 lost to system errors"):
        write_comparison(trials, trials, tmp_path / "cmp", names=("a", "b"), resamples=10)
    assert write_comparison(trials, trials, tmp_path / "cmp", names=("a", "b"), resamples=10,
                            allow_inexact=True)["coverage"]["a"]["exact"] is False
    assert "coverage is not exact" in (tmp_path / "cmp" / "compare.md").read_text()

    async def retry(runner_type):  # the server back up: only the two lost trials run again
        engine = SGLangEngine.from_urls([server_url])
        try:
            runner = runner_type(token_trial_runner(engine, interpreter, model="tiny", config=EPISODE))
            return await evaluate.evaluate(tasks, runner, out=tmp_path, k=2, concurrency=6, resume=True,
                                           retry_system_errors=True), runner
        finally:
            await engine.close()

    summary, counted = asyncio.run(retry(CountingRunner))
    assert sorted(counted.ran) == [(broken, 0), (broken, 1)]
    assert summary["coverage"] == {"exact": True, "expected": 6, "missing": 0, "system_errors": 0,
                                   "system_errors_retried": 2}
    assert {r.key for r in read_records(trials)} == {(t.id, i) for t in tasks for i in (0, 1)}
    assert [r.key for r in read_records(tmp_path / "system_errors.jsonl")] == [(broken, 0), (broken, 1)]
    assert "Coverage is not exact" not in (tmp_path / "report.md").read_text()
    assert write_comparison(trials, trials, tmp_path / "cmp", names=("a", "b"), resamples=10)["delta"]["pass@1"] == 0
    with pytest.raises(ValueError, match="add --resume"):
        asyncio.run(evaluate.evaluate(tasks, counted, out=tmp_path, k=2, retry_system_errors=True))


def test_embedded_flags_start_and_stop_a_tbjax_server(policy_dir, monkeypatch):
    started = []

    def recording(*args, **kwargs):
        started.append(start_embedded(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(agent_sources, "start_embedded", recording)
    flags = ["--engine", "embedded", "--model", str(policy_dir), "--out", "unused", "--server-args",
             "--slots 2 --max-len 512"]

    async def enter_and_leave(args):
        async with engine_flags.trial_runner_from_flags(args) as runner:
            assert callable(runner) and healthy(started[0].urls[0])

    # a budget past the servers' 512-token sequences is refused before any server starts; unset, it is theirs
    with pytest.raises(SystemExit, match="--token-budget 106000 exceeds the embedded servers' --max-len 512"):
        asyncio.run(enter_and_leave(evaluate.parse_args([*flags, "--token-budget", "106000"])))
    assert not started
    args = evaluate.parse_args(flags)
    assert engine_flags.episode_config(args).token_budget == 512
    asyncio.run(enter_and_leave(args))
    server = started[0].servers[0]
    assert server.argv[1:3] == ["-m", "tbjax.serve"] and server.process.poll() is not None  # stopped on exit


def test_a_missing_model_directory_is_named_before_any_server_starts(tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr(agent_sources, "start_embedded", lambda *args, **kwargs: started.append(args))
    with pytest.raises(SystemExit, match="--model .*nowhere: no HF model directory there"):
        evaluate.main(["--engine", "embedded", "--model", str(tmp_path / "nowhere"), "--domain", "library",
                       "--limit", "1", "--out", str(tmp_path / "out")])
    assert not started
