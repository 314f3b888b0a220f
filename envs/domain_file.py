"""A domain package's `domain.yaml`: what the domain is and what it stores, as data.

One file says what a reader needs to know about a backend's data: its one-line description, every table
with its columns in order (each value is the column's SQLite declaration; a table constraint such as
`PRIMARY KEY: (a, b)` reads the same way), the indexes, the views (a value derived from the tables, such as
a bill's balance, declared once as a SELECT that tools and templates read like a table; only tables are
state, so views are never graded), and which columns hold free text the agent writes in its own words
(volatile: left out of the graded state). SQLite checks the declarations when the template database is
built; this module checks the file's shape and renders the DDL.
"""

from __future__ import annotations

from importlib.resources.abc import Traversable

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

FILE_NAME = "domain.yaml"


class DomainFile(BaseModel):
    """The parsed file; unknown keys are refused, so a misspelt `volatile` cannot silently grade free text."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str
    tables: dict[str, dict[str, str]]
    indexes: dict[str, str] = {}
    views: dict[str, str] = {}  # name -> SELECT
    volatile: dict[str, list[str]] = {}

    @classmethod
    def read(cls, folder: Traversable) -> DomainFile:
        """The `domain.yaml` of a package folder, or an error naming the file and what is wrong in it."""
        path = folder.joinpath(FILE_NAME)
        try:
            return cls.model_validate(yaml.safe_load(path.read_text()))
        except (yaml.YAMLError, ValidationError) as exc:
            raise ValueError(f"{path} is not a valid domain file (description, tables, indexes, views, volatile; "
                             f"see envs/README.md): {exc}") from exc

    @property
    def schema_sql(self) -> str:
        """The DDL: one CREATE TABLE per table in file order, then one CREATE INDEX per index and one CREATE VIEW
        per view."""
        tables = [f"CREATE TABLE {name} (\n" + ",\n".join(f"    {column} {declaration}"
                                                       for column, declaration in columns.items()) + "\n);"
                  for name, columns in self.tables.items()]
        indexes = [f"CREATE INDEX {name} ON {target};" for name, target in self.indexes.items()]
        views = [f"CREATE VIEW {name} AS {select};" for name, select in self.views.items()]
        return "\n".join([*tables, *indexes, *views]) + "\n"
