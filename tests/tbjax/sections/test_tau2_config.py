"""tasks.suite=tau2 as a config says it: the tau2 section and the suite come together, the settings that choose or
play built-in tasks are refused naming the key and the fix, the fingerprint leaves out where τ² is installed, and
the shipped configs/qwen3-8b-tau2-1x8.yaml plans on a machine without τ²'s venv. None of it needs the venv."""

from pathlib import Path

import pytest
from rich.console import Console

from tbjax import train
from tbjax.config import ConfigError, load_config
from tests.tbjax.tau2_run_support import NO_VENV, tau2_run_config, tau2_tree


def test_a_tau2_config_loads_and_gives_the_suite_its_settings(tmp_path):
    config = tau2_run_config(tmp_path, tau2_tree(python="~/tau2-venv/bin/python"))
    assert config.tasks.suite == "tau2"
    suite = config.tau2  # envs.tau2's own settings, which the suite runs with
    assert suite.python == str(Path.home() / "tau2-venv/bin/python")  # `~` expanded: a subprocess would not
    assert suite.domains == ("retail",) and suite.grading == "fast" and suite.user is not None


@pytest.mark.parametrize(("overrides", "message"), [
    (["warm_start.steps=2"], "warm_start.steps=2: the warm start imitates the oracle's demonstrations"),
    (["warm_start.slips={leak: 0.5}"], "warm_start.slips: the warm start's demonstrations are built-in"),
    (["tasks.file=mine.jsonl"], "tasks.file=mine.jsonl: the tasks are τ²-bench's; drop tasks.file"),
    (["tasks.domains=[telecom]"], "tasks.domains: τ²-bench's domains are tau2.domains"),
    (["tasks.templates=[renew_loan]"], "tasks.templates: τ²-bench's tasks have no templates"),
    (["tasks.prompt=compact"], "tasks.prompt=compact: the agent's prompt is τ²-bench's own"),
    (["evaluate.heldout=instances"], "evaluate.heldout=instances: the held-out tasks are τ²-bench's test split; "
                                     "set evaluate.heldout=templates"),
    (["evaluate.templates_tasks=4"], "drop evaluate.templates_tasks"),
    (["user.kind=llm", "user.endpoint.base_url=http://u/v1", "user.endpoint.model=m"],
     "user: τ²-bench's user simulator is tau2.user"),
    (["tau2.domains=[shop]"], "tau2.domains.0: Input should be 'retail', 'airline' or 'telecom'"),
    (["tau2.user=null"], "tasks.suite=tau2 needs tau2.python (the Python of τ²-bench's venv) and tau2.user"),
])
def test_settings_that_cannot_act_with_tau2_are_refused_naming_the_key(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match="invalid config") as error:
        tau2_run_config(tmp_path, tau2_tree(), overrides)
    assert message in str(error.value)


def test_the_suite_and_its_section_come_together(tmp_path):
    with pytest.raises(ConfigError, match="tasks.suite=tau2 needs tau2.python .* and tau2.user"):
        tau2_run_config(tmp_path, {"tasks": {"suite": "tau2"}})
    for builtin in (["tasks.suite=builtin"], ["tasks.suite=builtin", "tau2.python=null", "tau2.user=null",
                                              "tau2.workers=3"]):
        with pytest.raises(ConfigError, match="the tau2 section acts only with tasks.suite=tau2"):
            tau2_run_config(tmp_path, tau2_tree(), builtin)


def test_the_fingerprint_follows_what_the_run_computes_not_where_tau2_lives(tmp_path):
    base = tau2_run_config(tmp_path, tau2_tree()).fingerprint()
    moved = ["tau2.python=/elsewhere/python", "tau2.workers=8", "tau2.user.timeout_s=5", "tau2.user.max_retries=3",
             "tau2.start_timeout_s=5", "tau2.call_timeout_s=9"]
    assert tau2_run_config(tmp_path, tau2_tree(), moved).fingerprint() == base
    for changed in ("tau2.user_temperature=0.5", "tau2.domains=[retail, airline]", "tau2.user.model=other",
                    "tau2.grading=tau2", "tau2.max_errors=3", "tau2.max_user_tool_calls=5"):
        assert tau2_run_config(tmp_path, tau2_tree(), [changed]).fingerprint() != base, changed
    # the built-in suite's fingerprint leaves the new keys out: every config saved before them resumes
    assert load_config(overrides=["tasks.suite=builtin"]).fingerprint() == load_config().fingerprint()


@pytest.mark.parametrize(("suite", "message"), [
    ("tau3", "tasks.suite: Value error, unknown suite 'tau3': train on one of builtin, tau2"),
    ("thinkingbox", "ThinkingBox-Bench (thinkingbox) is evaluation-only: train on one of builtin, tau2"),
])
def test_the_suite_is_one_the_registry_trains(suite, message):
    with pytest.raises(ConfigError, match="invalid config") as error:
        load_config(overrides=[f"tasks.suite={suite}"])
    assert message in str(error.value)


def run_main(monkeypatch, *argv: str) -> tuple[int, str]:
    """`python -m tbjax.train ARGV`'s exit code and what it printed."""
    recorder = Console(record=True, width=400)
    monkeypatch.setattr(train, "console", recorder)
    return train.main(list(argv)), recorder.export_text()


def test_the_shipped_tau2_config_plans_without_the_venv_and_a_run_stops_before_loading(monkeypatch):
    """configs/qwen3-8b-tau2-1x8.yaml: the 8B's plan, 18 groups of 8 on τ²'s suite; τ²'s missing venv is a
    warning in a dry run (a cluster's run planned on a laptop) and an error, before any model, in a real one."""
    shipped = ["--config", "qwen3-8b-tau2-1x8", f"tau2.python={NO_VENV}"]
    code, out = run_main(monkeypatch, *shipped, "--dry-run")
    assert code == 0 and f"warning: tau2.python: {NO_VENV} does not exist" in out
    assert "8.2B parameters" in out and "suite: tau2" in out and "groups: 18" in out and "group_size: 8" in out
    assert "data=1 x fsdp=1 x tensor=8" in out and "peak 18.4 GB" in out
    code, out = run_main(monkeypatch, *shipped)
    assert code == 2 and f"error: tau2.python: {NO_VENV} does not exist" in out
