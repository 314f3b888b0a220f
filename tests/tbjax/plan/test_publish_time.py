"""The publish-time estimate (tbjax.plan.publish_time): bytes per node against hand-derived counts, a probe that
really publishes, parts that add up, and a plan that says when nothing was measured."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from rich.console import Console

from tbjax import compile as compile_cli
from tbjax import train
from tbjax.assets.model_source import planned_model_config
from tbjax.config import CONFIG_DIR, load_config
from tbjax.plan import publish_time, report, transfer_rates
from tbjax.plan.publish_time import ASSUMED_LINK, NOT_MEASURED, PublishEstimate, Rate, Rates, Served


def test_the_27b_reference_serves_its_parameters_in_bfloat16_to_each_of_its_3_hosts():
    config = load_config("qwen3-27b-3x8-h100")
    served = publish_time.served(config)
    assert served is not None
    # per layer: q and o 5120 x 5120, k and v 5120 x 1024, q/k norms 2 x 128, MLP 3 x 5120 x 22016, 2 norms of
    # 5120; 64 layers, untied embedding and head 2 x 151936 x 5120, the final norm: 27,225,641,984 parameters
    layer = 2 * 5120 * 5120 + 2 * 5120 * 1024 + 2 * 128 + 3 * 5120 * 22016 + 2 * 5120
    params = 64 * layer + 2 * 151936 * 5120 + 5120
    assert served.nbytes == planned_model_config(config).num_params() * 2 == params * 2 == 54_451_283_968
    assert (served.hosts, served.servers_per_host, served.tp) == (("node0", "node1", "node2"), 2, 4)
    assert "every host writes its own copy" in served.copies


def test_a_lora_config_serves_its_float32_adapters():
    # Qwen3-8B, rank 16 on q, k, v, o (4096 -> 4096, 1024, 1024, 4096) and the MLP (4096 <-> 12288): per layer
    # (8192 + 5120 + 5120 + 8192 + 3 x 16384) x 16 = 1,212,416 parameters, 36 layers, 4 bytes each
    served = publish_time.served(load_config("qwen3-8b-lora-1gpu"))
    assert served is not None and "LoRA adapters" in served.what
    assert served.nbytes == 1_212_416 * 36 * 4
    assert (served.hosts, served.tp) == (("127.0.0.1",), 1)


def test_a_delta_publishing_run_is_estimated_by_its_whole_versions():
    delta = publish_time.served(load_config("qwen3-8b-1x8", ["rollout.publish_delta=tensors"]))
    whole = publish_time.served(load_config("qwen3-8b-1x8"))
    assert delta is not None and whole is not None and delta.nbytes == whole.nbytes
    assert "whole versions every 10 publishes" in delta.copies and "this estimates a whole version" in delta.copies


def test_the_embedded_engine_has_nothing_published():
    assert publish_time.served(load_config("tiny-cpu")) is None
    assert "none" in publish_time.publish_lines(None)[0]


def test_the_parts_add_up():
    served = Served("bfloat16 weights", 60_000_000_000, ("a", "b"), 2, 4, "2 servers", "every host")
    rates = Rates(Rate(3e9, "measured"), Rate(10e9, "measured"), Rate(20e9, "assumed"), Rate(25e9, "assumed"))
    estimate = PublishEstimate(served, rates)
    assert estimate.write_s == pytest.approx(20.0) and estimate.d2h_s == pytest.approx(3.0)
    assert estimate.export_s == pytest.approx(20.0)  # the copies to the host overlap the write
    assert estimate.read_s == pytest.approx(6.0) and estimate.h2d_s == pytest.approx(0.6)  # 15 GB per GPU
    assert estimate.load_s == pytest.approx(6.6) and estimate.total_s == pytest.approx(26.6)
    assert estimate.meets_goal is False and "misses the 15 s goal" in " ".join(estimate.lines())
    faster_write = PublishEstimate(served, Rates(Rate(30e9, "m"), rates.read, rates.d2h, rates.h2d))
    assert faster_write.export_s == pytest.approx(3.0) and faster_write.meets_goal  # 3 + 6.6 s
    record = estimate.record()["seconds"]
    assert record["total"] == pytest.approx(record["export"] + record["read"] + record["host_to_device"])


def test_a_plan_without_the_probe_says_it_was_not_measured():
    estimate = publish_time.plan_publish(load_config("qwen3-27b-3x8-h100"))
    assert estimate is not None and estimate.rates.d2h == ASSUMED_LINK
    assert estimate.total_s is None and estimate.meets_goal is None
    assert NOT_MEASURED in " ".join(estimate.lines()) and "assumed (PCIe Gen5 x16" in " ".join(estimate.lines())
    recorder = Console(record=True, width=400)
    config = load_config("qwen3-8b-1x8")
    report.print_plan(config, planned_model_config(config), recorder)
    printed = recorder.export_text()
    assert "16.4 GB of bfloat16 weights to each of 1 server host" in printed and NOT_MEASURED in printed


def test_the_probe_publishes_for_real_and_removes_what_it_wrote(tmp_path, monkeypatch):
    published = []

    def publish_and_look(*args, **kwargs):
        path = publish(*args, **kwargs)
        published.append({p.name: p.stat().st_size for p in path.iterdir()})
        return path
    publish = transfer_rates.publish_weights
    monkeypatch.setattr(transfer_rates, "publish_weights", publish_and_look)
    rates = publish_time.measured_rates(tmp_path)
    assert len(published) == 1 + transfer_rates.TIMED_PUBLISHES
    # the probe model: a tied 16384 x 1024 embedding, 3 layers of q, k + v, o (1024 x 1024 each), q/k norms,
    # MLP 3 x 1024 x 2816 and 2 norms, the final norm
    params = 16384 * 1024 + 3 * (3 * 1024 * 1024 + 2 * 128 + 3 * 1024 * 2816 + 2 * 1024) + 1024
    assert all(files["model.safetensors"] > params * 4 and "config.json" in files for files in published)
    assert list(tmp_path.iterdir()) == []  # the probe's directory is gone
    assert rates.write is not None and rates.read is not None
    assert rates.write.bytes_per_s > 0 and rates.read.bytes_per_s > 0
    assert str(tmp_path) in rates.write.source and rates.d2h == ASSUMED_LINK  # no accelerator here
    # the config's publish directory where it exists, else node-local memory
    assert transfer_rates.probe_directory(tmp_path, 1 << 20) == tmp_path
    assert transfer_rates.probe_directory(tmp_path / "absent", 1 << 20) in (transfer_rates.SHM,
                                                                           Path(tempfile.gettempdir()))


def test_the_dry_run_measures_only_when_asked(monkeypatch, capsys):
    with pytest.raises(SystemExit):  # it measures for --dry-run's plan
        train.main(["--config", "qwen3-8b-1x8", "--publish-probe"])
    assert "add --dry-run" in capsys.readouterr().err
    measured = Rates(Rate(1e9, "measured here (a probe)"), Rate(4e9, "measured here (its files)"), ASSUMED_LINK,
                     ASSUMED_LINK)
    monkeypatch.setattr(report, "measured_rates", lambda directory: measured)
    assert train.main(["--config", "qwen3-8b-1x8", "--dry-run", "--publish-probe"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    # 16.4 GB at 1 GB/s, then read at 4 GB/s and 8.2 GB per GPU at 25 GB/s
    assert "16.4 s export + 4.4 s load = 20.8 s per publish: misses the 15 s goal" in out


def test_the_command_prints_every_config_and_the_record_carries_it(tmp_path, capsys):
    configs = sorted(str(path) for path in CONFIG_DIR.glob("*.yaml"))
    assert publish_time.main(configs) == 0
    out = capsys.readouterr().out
    assert "prices.yaml: skipped" in out and out.count(NOT_MEASURED) == 6 and out.count("publish: none") == 2
    record = tmp_path / "plan.json"
    assert compile_cli.main(["--config", "qwen3-8b-1x8", "--target", "gpu-estimate:h100", "--json", str(record)]) == 0
    saved = json.loads(record.read_text())["publish"]
    assert saved["bytes_per_node"] == 16_381_470_720 and saved["seconds"]["total"] is None
