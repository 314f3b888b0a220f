"""The test suite's layout (tests/conftest.py's docstring states it): what test modules share lives in support
modules, and no module of tests/ imports a test module, a conftest or a script.

Every module of a package under tests/ is one of:
- a test module, `test_*.py`;
- a support module, `support.py` or `<topic>_support.py`: helpers (functions, classes, constants) that test
  modules, scripts and conftests import;
- a conftest.py: fixtures and pytest hooks, never imported (a fixture that several directories need lives in,
  or is imported by, the conftest of their nearest common parent; only a conftest imports a fixture);
- a script run as a subprocess (`python path.py ...` or `python -m ...`), with an `if __name__ == "__main__":`
  block, never imported;
- an `__init__.py`.

Folders that are no package (a fixture's data, such as a synthetic clone's files) are not looked at.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent


def is_support(name: str) -> bool:
    return name == "support" or name.endswith("_support")


def package_modules() -> list[Path]:
    """Every .py file under tests/ whose folders are all packages, up to tests/ itself."""
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        folders = path.relative_to(TESTS).parents
        if all((TESTS / folder / "__init__.py").exists() for folder in folders):
            found.append(path)
    return found


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_file(name: str) -> Path | None:
    """The file of module `name` of tests/ (None for a package or a name that is no module)."""
    path = REPO.joinpath(*name.split("."))
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else None


def imported_modules(path: Path, source: str | None = None) -> list[tuple[int, str]]:
    """(line, module) for every module of tests/ that `path` (or `source`, read as if it were that file)
    imports, absolute or relative, at any depth of the code (imports inside functions count too)."""
    tree = ast.parse(path.read_text() if source is None else source, filename=str(path))
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module_file(module) is not None:  # from module import names
                found.append((node.lineno, module))
            else:  # from package import modules (or the package's own names)
                found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names
                          if module_file(f"{module}.{alias.name}") is not None]
    return sorted((line, module) for line, module in found if module == "tests" or module.startswith("tests."))


def imported_names(path: Path) -> list[tuple[int, str, str]]:
    """(line, module, name) for every `from <module of tests/> import name` in `path` (absolute imports: the
    suite has no relative ones, which the first test would show)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return sorted((node.lineno, node.module, alias.name) for node in ast.walk(tree)
                  if isinstance(node, ast.ImportFrom) and not node.level and node.module
                  and node.module.startswith("tests.") and module_file(node.module) is not None
                  for alias in node.names)


def fixtures_of(file: Path) -> set[str]:
    """Names of the module-level functions of `file` decorated with `pytest.fixture` (called or not)."""
    def is_fixture(decorator: ast.expr) -> bool:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        return isinstance(target, ast.Attribute) and target.attr == "fixture" or \
            isinstance(target, ast.Name) and target.id == "fixture"

    return {node.name for node in ast.parse(file.read_text(), filename=str(file)).body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(map(is_fixture, node.decorator_list))}


def has_main_block(path: Path) -> bool:
    for node in ast.parse(path.read_text(), filename=str(path)).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and \
                isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__":
            return True
    return False


def where(path: Path, line: int | None = None) -> str:
    relative = path.relative_to(REPO).as_posix()
    return relative if line is None else f"{relative}:{line}"


def test_modules_import_only_support_modules_of_the_suite():
    offenders = []
    for path in package_modules():
        for line, module in imported_modules(path):
            file = module_file(module)
            if file is None:
                continue  # a package: tests/**/__init__.py holds nothing
            name = file.stem
            if name == "conftest":
                why = "a conftest holds fixtures only: move what others import to a support module"
            elif name.startswith("test_"):
                why = "a test module: move what others import to a support module"
            elif not is_support(name):
                why = "not a support module: rename it `<topic>_support.py` (or make it a script nobody imports)"
            else:
                continue
            offenders.append(f"{where(path, line)} imports {module} ({why})")
    assert not offenders, "modules of tests/ import what is no support module:\n" + "\n".join(offenders)


def test_only_a_conftest_imports_a_fixture():
    """A fixture defined in a support module reaches tests through a conftest (the nearest common parent's:
    tests/conftest.py for several folders), never by an import into a test module, which pytest's docs warn
    against and which shadows the fixture's name in that module."""
    offenders = []
    for path in package_modules():
        if path.name == "conftest.py":
            continue
        for line, module, name in imported_names(path):
            if name in fixtures_of(module_file(module)):
                offenders.append(f"{where(path, line)} imports the fixture {name} from {module}")
    assert not offenders, "fixtures imported outside a conftest:\n" + "\n".join(offenders)


def test_every_module_is_a_test_support_conftest_or_script():
    offenders = []
    for path in package_modules():
        name = path.stem
        if name.startswith("test_") or is_support(name) or name in ("conftest", "__init__") or has_main_block(path):
            continue
        offenders.append(f"{where(path)} (helpers: rename it `<topic>_support.py`; a script: give it an "
                         "`if __name__ == \"__main__\":` block)")
    assert not offenders, "modules of tests/ that are no test, support, conftest or script:\n" + "\n".join(offenders)


def test_the_layout_check_sees_every_kind_of_import(tmp_path):
    """The checker itself: absolute, from-package and relative imports of a test module, a conftest and a
    helper that is no support module are all found; support modules and packages pass."""
    source = "\n".join([
        "import tests.rollout.test_compare",
        "from tests.rollout import test_compare, campaign_support",
        "from tests.faults.conftest import engine",
        "from .test_oracle import LIMITS",
        "from . import campaign_support",
        "from tests.rollout.campaign_support import records",
        "import tests",
        "def later():",
        "    from tests.rollout.test_plots import x",
    ])
    probe = TESTS / "rollout" / "probe.py"  # where its relative imports resolve; it need not exist
    assert imported_modules(probe, source) == [
        (1, "tests.rollout.test_compare"), (2, "tests.rollout.campaign_support"), (2, "tests.rollout.test_compare"),
        (3, "tests.faults.conftest"), (4, "tests.rollout.test_oracle"), (5, "tests.rollout.campaign_support"),
        (6, "tests.rollout.campaign_support"), (7, "tests"), (9, "tests.rollout.test_plots")]
