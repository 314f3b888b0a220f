"""Canonical form of a database state: per-table digests for speed, keyed rows for explanation.

A state is compared over the non-volatile columns of every table; views are not state (they are derived
from the tables, which are graded already) and are never read here. Rows are ordered by primary key and
columns by name, serialised as compact JSON and hashed with sha256, so two databases with equal graded
content always have equal digests regardless of insertion order or physical layout.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import dataclass
from typing import Any

Key = tuple[Any, ...]
Rows = dict[Key, tuple[Any, ...]]  # primary key -> graded values in `TableInfo.graded_columns` order


@dataclass(frozen=True)
class TableInfo:
    """What the grader needs to know about one table: its key and the columns it compares."""

    name: str
    key_columns: tuple[str, ...]
    graded_columns: tuple[str, ...]  # sorted by name; volatile columns left out

    @property
    def select_sql(self) -> str:
        columns = ", ".join(f'"{c}"' for c in self.key_columns + self.graded_columns)
        order = ", ".join(f'"{c}"' for c in self.key_columns)
        return f'SELECT {columns} FROM "{self.name}" ORDER BY {order}'


def inspect_tables(conn: sqlite3.Connection, volatile: dict[str, list[str]]) -> dict[str, TableInfo]:
    """Read every user table's columns and primary key (views are left out); refuse tables without a primary key.

    A primary key is what lets a diff say *which* row changed, so every table must declare one.
    """
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    names = [n for n in names if not n.startswith("sqlite_")]
    unknown = set(volatile) - set(names)
    if unknown:
        raise ValueError(f"volatile columns declared for unknown tables {sorted(unknown)}; tables are {names}")
    tables: dict[str, TableInfo] = {}
    for name in names:
        columns = conn.execute(f'PRAGMA table_info("{name}")').fetchall()
        all_columns = [c[1] for c in columns]
        keys = tuple(c[1] for c in sorted((c for c in columns if c[5]), key=lambda c: c[5]))
        if not keys:
            raise ValueError(f"table {name!r} has no PRIMARY KEY; declare one so diffs can name rows")
        skipped = set(volatile.get(name, ()))
        if skipped - set(all_columns):
            raise ValueError(f"volatile columns {sorted(skipped - set(all_columns))} are not in table {name!r}")
        if skipped & set(keys):
            raise ValueError(f"key columns of {name!r} cannot be volatile: {sorted(skipped & set(keys))}")
        graded = tuple(sorted(c for c in all_columns if c not in skipped and c not in keys))
        tables[name] = TableInfo(name=name, key_columns=keys, graded_columns=graded)
    return tables


def table_digest(conn: sqlite3.Connection, info: TableInfo) -> str:
    """sha256 over the compact JSON of the table's graded content, rows in key order."""
    rows = conn.execute(info.select_sql).fetchall()
    payload = json.dumps([list(info.key_columns + info.graded_columns), rows], separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


def combine_digests(digests: dict[str, str]) -> str:
    """One digest for the whole database from its per-table digests."""
    payload = json.dumps(sorted(digests.items()), separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


def table_rows(conn: sqlite3.Connection, info: TableInfo) -> Rows:
    """The table's graded content keyed by primary key, for diffs (tuples: cheap to build and compare)."""
    width = len(info.key_columns)
    return {row[:width]: row[width:] for row in conn.execute(info.select_sql)}
