"""import-linter: dependencies flow envs <- rollout <- tbjax, envs/rollout never import JAX, and inside tbjax each room
imports only the rooms below it."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_import_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")  # installed beside this interpreter by the dev extra
    result = subprocess.run([str(lint)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 3 kept, 0 broken." in result.stdout
