"""Trial records: the public keys, validation, incremental append, resume and repair of a cut-off line."""

import json
import os
import stat

import pytest

from rollout.records import RecordsError, TrialLog, TrialRecord, Usage, atomic_write, read_records, task_counts

KEYS = {"task_id", "domain", "trial", "passed", "system_error", "termination", "turns", "usage", "model",
        "weight_version", "seconds", "diff", "outcome", "malformed_tool_calls", "reward_breakdown"}


def record(task="telecom/a/000", trial=0, passed=True, error=None):
    return TrialRecord(task_id=task, domain=task.split("/")[0], trial=trial, passed=None if error else passed,
                       system_error=error, termination="system_error" if error else "user_done", turns=2,
                       usage=Usage(prompt_tokens=100, completion_tokens=20, reasoning_tokens=5, cached_tokens=40),
                       model="tiny", weight_version="0", seconds=0.5, diff=[] if passed else ["changed x"])


def test_record_line_has_exactly_the_public_keys():
    line = json.loads(record().model_dump_json())
    assert set(line) == KEYS
    assert set(line["usage"]) == {"prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens"}


def test_a_record_is_scored_or_a_system_error_never_both():
    with pytest.raises(ValueError, match="exactly one of passed and system_error"):
        TrialRecord(task_id="t", domain="d", trial=0, passed=False, system_error="engine", termination="x", model="m")
    with pytest.raises(ValueError, match="exactly one of passed and system_error"):
        TrialRecord(task_id="t", domain="d", trial=0, passed=None, system_error=None, termination="x", model="m")


def test_append_then_resume_skips_recorded_trials(tmp_path):
    path = tmp_path / "trials.jsonl"
    with TrialLog(path, resume=False) as log:
        log.append(record(trial=0))
        log.append(record(trial=1, error="engine"))
    with pytest.raises(FileExistsError, match="--resume"):
        TrialLog(path, resume=False)
    with TrialLog(path, resume=True) as log:
        assert log.done == {("telecom/a/000", 0), ("telecom/a/000", 1)} and log.resumed == 2
        with pytest.raises(RecordsError, match="already recorded"):
            log.append(record(trial=1))
        log.append(record(trial=2, passed=False))
    assert [r.trial for r in read_records(path)] == [0, 1, 2]


def test_a_line_cut_by_an_interruption_is_dropped_and_repaired(tmp_path):
    path = tmp_path / "trials.jsonl"
    whole = record().model_dump_json() + "\n"
    path.write_text(whole + record(trial=1).model_dump_json()[:40])
    assert len(read_records(path)) == 1 and path.read_text() != whole  # reading alone does not modify
    with TrialLog(path, resume=True) as log:
        assert log.done == {("telecom/a/000", 0)}
        log.append(record(trial=1))
    assert [r.trial for r in read_records(path)] == [0, 1]


def test_bad_lines_and_duplicates_are_errors_naming_the_line(tmp_path):
    path = tmp_path / "trials.jsonl"
    path.write_text("not json\n" + record().model_dump_json() + "\n")
    with pytest.raises(RecordsError, match="trials.jsonl:1"):
        read_records(path)
    path.write_text(record().model_dump_json() + "\n" + record().model_dump_json() + "\n")
    with pytest.raises(RecordsError, match="trials.jsonl:2 records task telecom/a/000 trial 0 a second time"):
        read_records(path)
    with pytest.raises(RecordsError, match="no trial records"):
        read_records(tmp_path / "missing.jsonl")


def test_task_counts_leave_system_errors_out_of_n_and_c():
    records = [record(trial=0), record(trial=1, passed=False), record(trial=2, error="engine"),
               record(task="clinic/b/000", trial=0, error="tool_server")]
    counts = {t.task_id: (t.n, t.c) for t in task_counts(records)}
    assert counts == {"telecom/a/000": (2, 1), "clinic/b/000": (0, 0)}


def test_atomic_write_replaces_whole_files(tmp_path):
    target = tmp_path / "out" / "summary.json"
    atomic_write(target, "first")
    atomic_write(target, b"second")
    assert target.read_text() == "second" and [p.name for p in target.parent.iterdir()] == ["summary.json"]


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600)])
def test_atomic_write_gives_files_the_umask_permissions(tmp_path, umask, mode):
    # mkstemp's 0600 made every report and plot unreadable to anyone but the writer
    old = os.umask(umask)
    try:
        atomic_write(tmp_path / "report.md", "# report\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "report.md").stat().st_mode) == mode
