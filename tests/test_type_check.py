"""pyright, in basic mode as pyproject.toml's [tool.pyright] sets it, finds no type error in the packages. It runs
with this test's interpreter, so it resolves the imports the way this venv installs them."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_pyright_finds_no_type_errors():
    pyright = Path(sys.executable).with_name("pyright")  # installed beside this interpreter by the dev extra
    env = {**os.environ, "PYRIGHT_PYTHON_IGNORE_WARNINGS": "1"}  # no look-up of the newest pyright release
    result = subprocess.run([str(pyright), "--pythonpath", sys.executable], cwd=REPO, env=env, capture_output=True,
                            text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"^0 errors, ", result.stdout, re.MULTILINE), result.stdout + result.stderr
