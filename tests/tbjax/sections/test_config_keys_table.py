"""tbjax/README.md's table of config keys names every key of every section and nothing else: a key added to a
section, renamed or removed fails here until the table says so. A key counts where the table names it in
backticks outside parentheses (inside them: values and sub-keys); `prefix_*` stands for the keys it starts."""

import dataclasses
import fnmatch
import re
from pathlib import Path

from pydantic import BaseModel

from tbjax.config import Config

README = Path(__file__).resolve().parents[3] / "tbjax" / "README.md"
ROW = re.compile(r"^\| `(\w+)` \| (.*) \|$")
KEY = re.compile(r"^[a-z][a-z0-9_]*\*?$")


def _outside_parentheses(text: str) -> str:
    kept, depth = [], 0
    for char in text:
        depth += char == "("
        if not depth:
            kept.append(char)
        depth -= char == ")" and depth > 0
    return "".join(kept)


def table_keys() -> dict[str, list[str]]:
    """Section -> the keys its row names, from the README's `| section | keys |` table."""
    text = README.read_text()
    table = text[text.index("| section | keys |"):].split("\n\n")[0]
    rows = {}
    for line in table.splitlines()[2:]:
        match = ROW.match(line)
        assert match, f"a row of the keys table is not `| `section` | keys |`: {line}"
        named = re.findall(r"`([^`]+)`", _outside_parentheses(match.group(2)))
        rows[match.group(1)] = [key for key in named if KEY.match(key)]
    return rows


def section_fields(section: type) -> list[str]:
    if isinstance(section, type) and issubclass(section, BaseModel):
        return list(section.model_fields)
    return [field.name for field in dataclasses.fields(section)]


def test_the_readme_table_names_every_config_key():
    rows = table_keys()
    assert sorted(rows) == sorted(Config.model_fields), "the table's sections are not the config's"
    for name, field in Config.model_fields.items():
        fields, named = section_fields(field.annotation), rows[name]
        covered = {f for f in fields if any(fnmatch.fnmatchcase(f, key) for key in named)}
        assert covered == set(fields), f"tbjax/README.md's `{name}` row lacks {sorted(set(fields) - covered)}"
        stale = [key for key in named if not fnmatch.filter(fields, key)]
        assert not stale, f"tbjax/README.md's `{name}` row names {stale}, which the section does not have"
