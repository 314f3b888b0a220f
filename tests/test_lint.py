"""ruff, with pyproject.toml's rules, finds nothing in the packages, the scripts or the tests."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    ruff = Path(sys.executable).with_name("ruff")  # installed beside this interpreter by the dev extra
    result = subprocess.run([str(ruff), "check", "tbjax", "rollout", "envs", "scripts", "tests"], cwd=REPO,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "All checks passed!" in result.stdout
