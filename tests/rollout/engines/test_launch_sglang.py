"""The SGLang launcher with the stub server standing in for `python -m sglang.launch_server`."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from rollout.launch_sglang import LaunchConfig, LaunchError, Supervisor, healthy, parse_args
from tests.rollout.sglang_stub_support import command, free_port


def model_info(url: str) -> dict:
    with urllib.request.urlopen(f"{url}/get_model_info", timeout=2) as response:
        return json.load(response)


def two_free_ports() -> int:
    while True:
        port = free_port()
        try:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", port + 1))
            return port
        except OSError:
            continue


def test_command_line_splits_gpus_and_passes_extra_args():
    config, dry_run = parse_args(["--model-path", "/m", "--tp", "2", "--servers", "2", "--gpus", "4,5,6,7",
                                  "--dry-run", "--", "--mem-fraction-static", "0.7"])
    supervisor = Supervisor(config)
    assert dry_run and [s.env["CUDA_VISIBLE_DEVICES"] for s in supervisor.servers] == ["4,5", "6,7"]
    assert supervisor.servers[1].argv == [sys.executable, "-m", "sglang.launch_server", "--model-path", "/m",
                                          "--tp", "2", "--port", "30001", "--host", "127.0.0.1",
                                          "--mem-fraction-static", "0.7"]
    with pytest.raises(ValueError, match="need 4 GPUs, but only 3"):
        LaunchConfig(model_path="/m", tp=2, servers=2, gpus=("0", "1", "2"))


def test_starts_restarts_a_killed_server_and_stops_all():
    config = LaunchConfig(model_path="tiny", tp=1, servers=2, port=two_free_ports(), gpus=("0", "1"),
                          server_command=tuple(command()), poll_s=0.05, restart_backoff_s=0.05, max_restarts=2)
    supervisor = Supervisor(config)
    try:
        urls = supervisor.start()
        infos = [model_info(url) for url in urls]
        assert [i["model_path"] for i in infos] == ["tiny", "tiny"]
        assert [i["cuda_visible_devices"] for i in infos] == ["0", "1"]
        os.kill(infos[0]["pid"], signal.SIGKILL)
        deadline = time.monotonic() + 20
        while not (supervisor.servers[0].restarts == 1 and supervisor.servers[0].ready):
            assert time.monotonic() < deadline, "the killed server was not restarted"
            time.sleep(0.05)
            supervisor.check()
        assert model_info(urls[0])["pid"] != infos[0]["pid"] and model_info(urls[1])["pid"] == infos[1]["pid"]
    finally:
        supervisor.stop()
    assert not any(healthy(url) for url in urls)
    assert all(s.process.poll() is not None for s in supervisor.servers)


def test_restart_on_brings_every_server_back_on_the_new_model_path():
    config = LaunchConfig(model_path="v0", tp=1, servers=2, port=two_free_ports(), gpus=("0", "1"),
                          server_command=tuple(command()), poll_s=0.05, max_restarts=0)
    supervisor = Supervisor(config)
    try:
        urls = supervisor.start()
        before = [model_info(url)["pid"] for url in urls]
        supervisor.restart_on("weights/v1")  # the publish to servers that cannot load in place
        after = [model_info(url) for url in urls]
    finally:
        supervisor.stop()
    assert [i["model_path"] for i in after] == ["weights/v1"] * 2 and supervisor.config.model_path == "weights/v1"
    assert all(i["pid"] != pid for i, pid in zip(after, before, strict=True))
    assert [s.restarts for s in supervisor.servers] == [0, 0]  # deliberate: no crash budget spent


def test_a_server_that_fails_its_first_start_stops_the_launch_without_restarts():
    """A bad command, model or port fails the same way every time: no restarts, one clear error."""
    config = LaunchConfig(model_path="m", tp=1, servers=1, port=free_port(), gpus=("0",),
                          server_command=(sys.executable, "-c", "raise SystemExit(3)"),
                          poll_s=0.02, restart_backoff_s=0.01, max_restarts=2)
    supervisor = Supervisor(config)
    with pytest.raises(LaunchError, match="exited with code 3 before it was ever healthy"):
        supervisor.start()
    assert supervisor.servers[0].restarts == 0


def test_a_server_that_keeps_dying_stops_the_launch_after_its_restarts():
    config = LaunchConfig(model_path="m", tp=1, servers=1, port=free_port(), gpus=("0",),
                          server_command=tuple(command()), poll_s=0.02, restart_backoff_s=0.01, max_restarts=0)
    supervisor = Supervisor(config)
    try:
        url = supervisor.start()[0]
        os.kill(model_info(url)["pid"], signal.SIGKILL)
        with pytest.raises(LaunchError, match="exited with code -9 and has used all 0 restarts"):
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                supervisor.check()
                time.sleep(0.02)
    finally:
        supervisor.stop()


def test_cli_prints_urls_and_sigterm_stops_every_server():
    port = two_free_ports()
    launcher = subprocess.Popen(
        [sys.executable, "-m", "rollout.launch_sglang", "--model-path", "tiny", "--tp", "1", "--servers", "2",
         "--port", str(port), "--gpus", "0,1", "--poll-s", "0.05", "--server-command", " ".join(command())],
        stdout=subprocess.PIPE, text=True)
    try:
        line = launcher.stdout.readline().strip()
        urls = [f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port + 1}"]
        assert line == "SGLANG_URLS=" + ",".join(urls)
        assert all(healthy(url) for url in urls)
        launcher.send_signal(signal.SIGTERM)
        assert launcher.wait(timeout=20) == 0
        assert not any(healthy(url) for url in urls)
    finally:
        launcher.kill()
        launcher.wait()
