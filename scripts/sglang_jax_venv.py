"""Builds (once) and finds the Python 3.12 virtual environment that runs sglang-jax, SGLang's JAX port.

    python scripts/sglang_jax_venv.py [--venv DIR] [--python PYTHON3.12]

sglang-jax is the one SGLang that serves on a CPU, so the SGLangEngine tests run against it. It pins flax
0.12.4 and transformers 4.57 and needs Python 3.12, so it never goes into the project's venv: it lives in
its own, cached outside the repository (default ~/.cache/tbjax/sglang-jax-<version>-py312, or under
$XDG_CACHE_HOME) and reused by every later test session. A venv counts as built only once `sgl_jax` imports
in it; a half-built one (an interrupted install) is removed and built again. A file lock serialises
concurrent builders (several test sessions on one machine). Exit status 0: ready (its python is printed
last); 1: it cannot be built here, with the reason.
"""

from __future__ import annotations

import argparse
import fcntl
import glob
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

SGLANG_JAX = "sglang-jax[cpu]==0.1.0rc0"
READY_MARK = ".tbjax-ready"  # written last, holding SGLANG_JAX: a venv without it is incomplete
INSTALL_TIMEOUT_S = 600  # well past a normal install (rollout/README.md); slower, the tests skip rather than eat
# the CI budget


class VenvUnavailable(RuntimeError):
    """sglang-jax cannot be installed on this machine; the message says why and what would fix it."""


def default_venv() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    version = SGLANG_JAX.split("==")[1]
    return cache / "tbjax" / f"sglang-jax-{version}-py312"


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def is_ready(venv: Path) -> bool:
    mark = venv / READY_MARK
    return mark.is_file() and mark.read_text().strip() == SGLANG_JAX and venv_python(venv).is_file()


def find_python312(explicit: str | None = None) -> str:
    """A Python 3.12 interpreter: `explicit`, else python3.12 on PATH, else a pyenv install."""
    candidates = [explicit] if explicit else [
        shutil.which("python3.12"),
        *sorted(glob.glob(str(Path.home() / ".pyenv/versions/3.12*/bin/python3.12")), reverse=True),
        "/usr/bin/python3.12", "/usr/local/bin/python3.12",
    ]
    for candidate in filter(None, candidates):
        try:
            probe = subprocess.run([candidate, "-c", "import sys, venv; print(sys.version_info[:2])"],
                                   capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0 and probe.stdout.strip() == "(3, 12)":
            return candidate
    raise VenvUnavailable("no Python 3.12 with the venv module found (looked at python3.12 on PATH and "
                          "~/.pyenv/versions/3.12*); install one (pyenv install 3.12, apt-get install python3.12-venv) "
                          "or pass --python")


def ensure_venv(venv: Path | None = None, python: str | None = None,
                say: Callable[[str], None] = print) -> Path:
    """The python of a ready sglang-jax venv, building it first if needed. Raises VenvUnavailable."""
    venv = venv or default_venv()
    if is_ready(venv):
        say(f"sglang-jax venv cached at {venv}")
        return venv_python(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f".{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another session may be building it right now
        if not is_ready(venv):
            _build(venv, find_python312(python), say)
    return venv_python(venv)


def _build(venv: Path, python: str, say: Callable[[str], None]) -> None:
    start = time.perf_counter()
    if venv.exists():
        say(f"removing the incomplete venv {venv}")
        shutil.rmtree(venv)
    say(f"building {venv} with {python}: pip install --pre '{SGLANG_JAX}' (~1.8 GB, a minute or two)")
    log = venv.parent / f"{venv.name}.install.log"
    steps = [[python, "-m", "venv", str(venv)],
             [str(venv_python(venv)), "-m", "pip", "install", "--pre", "--disable-pip-version-check", SGLANG_JAX],
             [str(venv_python(venv)), "-c", "import sgl_jax.launch_server"]]
    with open(log, "w") as out:
        for step in steps:
            try:
                done = subprocess.run(step, stdout=out, stderr=subprocess.STDOUT, timeout=INSTALL_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                raise VenvUnavailable(f"`{' '.join(step)}` ran over {INSTALL_TIMEOUT_S} s; see {log}") from None
            if done.returncode != 0:
                tail = log.read_text()[-1500:]
                raise VenvUnavailable(f"`{' '.join(step)}` failed (exit {done.returncode}; is PyPI reachable?). "
                                      f"End of {log}:\n{tail}")
    (venv / READY_MARK).write_text(SGLANG_JAX + "\n")
    say(f"built {venv} in {time.perf_counter() - start:.0f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--venv", type=Path, default=None, help=f"default: {default_venv()}")
    parser.add_argument("--python", help="a Python 3.12 interpreter (default: found on PATH or in pyenv)")
    args = parser.parse_args(argv)
    try:
        python = ensure_venv(args.venv, args.python)
    except VenvUnavailable as error:
        print(f"sglang-jax venv unavailable: {error}", file=sys.stderr)
        return 1
    print(python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
