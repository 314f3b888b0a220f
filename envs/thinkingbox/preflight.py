"""Checks the servers' interpreter once, before any task runs, so a wrong setup fails with its fix instead
of as 507 identical system errors.

The servers need Python 3.12, `fastmcp<4` (a newer fastmcp breaks their imports) and their package installed
*editable* from the clone: a plain install leaves out the `initial_data` folders the databases are built from.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from envs.errors import ConfigError

PACKAGE = "tb_business_ops_servers_202606"
INSTALL_HINT = (
    "create it with: python3.12 -m venv VENV && VENV/bin/pip install 'fastmcp<4' "
    "--config-settings editable-mode=compat -e {clone}/servers/" + PACKAGE
)

_PROBE = """
import importlib.metadata, json, sys
out = {"python": list(sys.version_info[:2])}
try:
    out["fastmcp"] = importlib.metadata.version("fastmcp")
except importlib.metadata.PackageNotFoundError:
    out["fastmcp"] = None
try:
    import importlib.util
    spec = importlib.util.find_spec(PACKAGE_NAME)
    out["package_dir"] = str(list(spec.submodule_search_locations)[0]) if spec else None
except Exception:
    out["package_dir"] = None
print(json.dumps(out))
""".replace("PACKAGE_NAME", repr(PACKAGE))


def check_interpreter(python: str, clone: Path, timeout_s: float = 60.0) -> dict[str, object]:
    """What the probe found; raises `ConfigError` naming the problem and the fix."""
    hint = INSTALL_HINT.format(clone=clone)
    if not Path(python).exists():
        raise ConfigError(f"server interpreter {python} does not exist; {hint}")
    try:
        done = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=timeout_s, check=False)
    except OSError as exc:
        raise ConfigError(f"cannot run server interpreter {python}: {exc}; {hint}") from exc
    if done.returncode != 0:
        raise ConfigError(f"server interpreter {python} failed to run a probe: {done.stderr[-500:]}")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    if tuple(found["python"]) != (3, 12):
        raise ConfigError(f"{python} is Python {'.'.join(map(str, found['python']))}; the servers need 3.12; {hint}")
    if found["fastmcp"] is None:
        raise ConfigError(f"fastmcp is not installed for {python}; {hint}")
    if int(str(found["fastmcp"]).split(".")[0]) >= 4:
        raise ConfigError(f"{python} has fastmcp {found['fastmcp']}; the servers' imports need fastmcp<4; {hint}")
    if found["package_dir"] is None:
        raise ConfigError(f"{PACKAGE} is not importable by {python}; {hint}")
    installed, source = Path(str(found["package_dir"])), clone / "servers" / PACKAGE / PACKAGE
    missing = [p.relative_to(source) for p in source.rglob("initial_data") if p.is_dir()
               and not (installed / p.relative_to(source)).is_dir()]
    if missing:
        raise ConfigError(f"{PACKAGE} at {installed} lacks its data folders ({missing[0]}, ...): it was not "
                          f"installed editable; {hint}")
    return found
