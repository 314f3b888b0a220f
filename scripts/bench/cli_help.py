"""How fast each command answers `--help`, against the bare interpreter and the import of JAX in the same run.

    python scripts/bench/cli_help.py [--rounds 5]

A newcomer's first call is `--help`; it should not wait for JAX, transformers or torch. Each command runs as
a fresh process (`python -m MODULE --help`), in alternation with its peers, and the table gives the median
wall time, its excess over `python -c pass` (the floor), its ratio to `python -c "import jax"` (what an entry
point that imported JAX up front would pay at least), the peak RSS of answering, and which heavy packages
got imported. Target: about a second, below 1.0x of the JAX import, no heavy import.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from rich.console import Console
from rich.table import Table

COMMANDS = ("tbjax.train", "tbjax.compile", "tbjax.serve", "tbjax.export", "rollout.evaluate", "rollout.select",
            "rollout.launch_sglang", "envs.validate")
HEAVY = ("jax", "torch", "transformers", "flax")
# answers a command's --help in-process, then prints the heavy packages it imported and its peak RSS (KB)
PROBE = ("import resource, runpy, sys; sys.argv = [{module!r}, '--help']\n"
         "try:\n    runpy.run_module({module!r}, run_name='__main__')\n"
         "except SystemExit:\n    pass\n"
         "print('PROBE', ','.join(sorted({{m.split('.')[0] for m in sys.modules}} & set({heavy!r}))) or 'none', "
         "resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")


def wall_seconds(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, timeout=300)
    return time.perf_counter() - start


def probe(module: str) -> tuple[str, float]:
    """(heavy packages imported, peak RSS in MB) of answering `module --help`."""
    out = subprocess.run([sys.executable, "-c", PROBE.format(module=module, heavy=HEAVY)], check=True,
                         capture_output=True, text=True, timeout=300)
    _, heavy, kilobytes = next(line for line in out.stdout.splitlines() if line.startswith("PROBE")).split()
    return heavy, int(kilobytes) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    runs = {"python -c pass": [sys.executable, "-c", "pass"],
            "import jax": [sys.executable, "-c", "import jax"],
            **{f"{module} --help": [sys.executable, "-m", module, "--help"] for module in COMMANDS}}
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.rounds):  # alternated, so load on the machine falls on every command alike
        for name, argv in runs.items():
            times[name].append(wall_seconds(argv))
    floor, jax_import = statistics.median(times["python -c pass"]), statistics.median(times["import jax"])
    table = Table(title=f"--help, median of {args.rounds} fresh processes")
    for column in ("command", "seconds", "over the bare interpreter", "/ import jax", "peak RSS", "heavy imports"):
        table.add_column(column)
    for name in runs:
        median = statistics.median(times[name])
        module = name.removesuffix(" --help")
        heavy, megabytes = probe(module) if module in COMMANDS else ("-", None)
        table.add_row(name, f"{median:.2f}", f"{median - floor:+.2f}", f"{median / jax_import:.2f}x",
                      "-" if megabytes is None else f"{megabytes:.0f} MB", heavy)
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
