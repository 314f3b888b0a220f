"""`python -m tbjax.compile --config FILE --target tpu:v5p-64 | tpu:v5p:2x2x6 | cpu:3x8 | gpu-estimate[:h100]
[--mesh AxB] [--memory-gb N] [key=value ...]`

Will this config fit that machine? Ahead of time, without the machine: the mesh is checked against the
model's shapes first (seconds), then the run's own GRPO update (and, when the config rolls out on the
embedded engine or with --decode, the engine's decode step) is compiled for the target's devices from
abstract inputs. It prints bytes per device (parameters, optimizer state, gradients, temporaries), FLOPs per
step, and exits 1 with an explanation when the program does not fit. TPU targets compile with libtpu in a
separate venv (scripts/tpu_aot_venv.sh); GPU targets get an analytic estimate, labelled as one.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from tbjax.plan.targets import TargetError, parse_target

console = Console(highlight=False, soft_wrap=True)
REPO = Path(__file__).resolve().parents[1]
DEFAULT_TPU_VENV = Path.home() / ".cache" / "tbjax" / "tpu-aot-venv"
# libtpu looks for a TPU VM's metadata at start-up: these tell it there is none, so it stays quiet; JAX must
# not start a TPU backend (there is no TPU), and transformers need not say that the venv has no torch.
TPU_VENV_ENV = {"TPU_SKIP_MDS_QUERY": "1", "TPU_WORKER_HOSTNAMES": "localhost", "TPU_WORKER_ID": "0",
                "TPU_ACCELERATOR_TYPE": "v5p-8", "JAX_PLATFORMS": "cpu", "TRANSFORMERS_VERBOSITY": "error"}


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tbjax.compile", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", help="a YAML file, or a shipped config by name: tiny-cpu (the default), smoke, "
                        "qwen3-8b-1x8, qwen3-27b-3x8-h100, qwen3-27b-tpu-v5p")
    parser.add_argument("--target", required=True, help="tpu:v5p-64, tpu:v5p:2x2x6, cpu:3x8 or gpu-estimate[:h100]")
    parser.add_argument("--mesh", help="device mesh, e.g. 3x8 (default: the config's mesh.shape)")
    parser.add_argument("--memory-gb", type=float, help="per-device budget to check against instead of the "
                        "target's (e.g. 80 to hold a TPU compile to an H100's memory)")
    parser.add_argument("--decode", action="store_true", help="also compile the embedded engine's decode step "
                        "when the config rolls out on SGLang")
    parser.add_argument("--full-optimization", action="store_true", help="compile with XLA's full execution-time "
                        "optimisation, as the trainer does (minutes for a 27B TPU program; memory within ~1%%)")
    parser.add_argument("--json", type=Path, help="also write the plan (bytes per device, compiler figures) here")
    parser.add_argument("--publish-probe", action="store_true", help="measure this machine's write and read "
                        "rates for the publish-time estimate (a real publish of a ~200 MB model, about 2 s)")
    parser.add_argument("--tpu-venv", type=Path, help=f"venv with jax[tpu] (default {DEFAULT_TPU_VENV})")
    parser.add_argument("overrides", nargs="*", help="key=value config overrides, e.g. train.row_len=65536")
    return parser.parse_intermixed_args(argv)  # flags may sit among the overrides


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    try:
        target = parse_target(args.target)
    except TargetError as error:
        console.print(f"[red]error:[/red] {escape(str(error))}")
        return 2
    if target.kind == "tpu" and importlib.util.find_spec("libtpu") is None:
        venv = args.tpu_venv or Path(os.environ.get("TBJAX_TPU_AOT_VENV", DEFAULT_TPU_VENV))
        return run_in_tpu_venv(venv, argv)
    from tbjax.plan.report import plan_and_report  # JAX is imported here: delegating to the TPU venv needs none

    return plan_and_report(args, target)


def run_in_tpu_venv(venv: Path, argv: list[str]) -> int:
    """TPU compiles need libtpu, which must not live in the project's venv (JAX would try to start a TPU
    backend on every import); a venv of its own runs this command against this checkout."""
    python = venv / "bin" / "python"
    if not python.is_file():
        console.print(f"[red]error:[/red] TPU ahead-of-time compilation needs jax[tpu] (libtpu) in its own venv, "
                      f"and {venv} has none. Build it once (about 1 minute, 1.8 GB): scripts/tpu_aot_venv.sh {venv}")
        return 2
    env = {**os.environ, **TPU_VENV_ENV,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([str(python), "-m", "tbjax.compile", *argv], env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
