"""scripts/sglang_jax_venv.py without building anything: a cached venv is reused, a missing Python 3.12 is a
clear reason (what the sglang-jax tests skip with), and the command line says so with exit status 1."""

import pytest
from sglang_jax_venv import READY_MARK, SGLANG_JAX, VenvUnavailable, ensure_venv, find_python312, main


def test_a_ready_venv_is_reused_without_looking_for_python(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    (venv / READY_MARK).write_text(SGLANG_JAX + "\n")
    said: list[str] = []
    assert ensure_venv(venv, python="/nonexistent/python3.12", say=said.append) == venv / "bin" / "python"
    assert said == [f"sglang-jax venv cached at {venv}"]


def test_no_python_312_is_a_reason_not_a_crash(tmp_path, capsys):
    with pytest.raises(VenvUnavailable, match="no Python 3.12"):
        find_python312("/bin/false")
    assert main(["--venv", str(tmp_path / "venv"), "--python", "/bin/false"]) == 1
    assert "sglang-jax venv unavailable: no Python 3.12" in capsys.readouterr().err
    assert not (tmp_path / "venv").exists()
