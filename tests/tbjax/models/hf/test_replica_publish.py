"""Host replicas: 3 processes x 8 CPU devices (jax.distributed on 127.0.0.1, mesh 3x8) each publish their own
copy of the tiny model from their own devices, and every copy equals process 0's bytes and the single-process
export's; a publish after the first compiles nothing."""

import sys
from pathlib import Path

import pytest

from tbjax.models import from_pretrained, save_pretrained
from tests.tbjax.publish_support import BACKEND_COMPILE, count_compiles

REPO = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(REPO / "scripts" / "bench"))
from replica_publish import PROCESSES, run_job  # noqa: E402  (a script: the bench and this test share it)


def files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


@pytest.mark.slow
def test_every_host_writes_its_replica_and_all_equal_the_single_process_export(tiny_dir, tmp_path) -> None:
    model_dir = tiny_dir("qwen3")
    record = run_job(model_dir, tmp_path / "job", 2, tmp_path / "record.json", devices=8, timeout_s=300)
    hosts = [tmp_path / "job" / "replicas" / f"host{i}" for i in range(PROCESSES)]
    for host in hosts:  # each host kept its newest version alone (keep=1), and `latest` names it
        assert sorted(p.name for p in host.iterdir()) == ["latest", "v1"]
    reference = files(save_pretrained(from_pretrained(model_dir), tmp_path / "single"))
    assert files(hosts[0] / "v1") == reference
    for host in hosts[1:]:
        assert files(host / "v1") == files(hosts[0] / "v1")
    for host in range(PROCESSES):  # the one-writer copies too
        assert files(tmp_path / "job" / "one" / f"host{host}" / "v1") == reference
    assert record["compiles"][1] == 0, record  # the second publish reuses the first's programs
    assert 0 < record["compiles"][0] <= 16, record


def test_a_second_publish_in_one_process_compiles_nothing(tiny_dir, tmp_path) -> None:
    from tbjax.models.hf.versions import publish_weights

    model = from_pretrained(tiny_dir("qwen3"))
    assert count_compiles(lambda: publish_weights(model, tmp_path / "w", 1)) > 0
    second = []
    import jax

    def listen(event: str, _seconds: float, **_: object) -> None:
        second.append(event)
    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        publish_weights(model, tmp_path / "w", 2, keep=1)
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    assert BACKEND_COMPILE not in second
    assert sorted(p.name for p in (tmp_path / "w").iterdir()) == ["latest", "v2"]
