"""A domain package's domain.yaml, read by `Domain.in_package` from a real package on the import path: its
tables become the template database, its volatile columns and the escalation text column stay ungraded, its
views are read like tables but are not state, a view that does not read is refused when the database is
built, and a file with a misspelt key is refused with the file and the key named."""

from __future__ import annotations

import random
import sqlite3
import sys
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

from envs.domains.telecom.tools import TICKETS
from envs.sdk import Domain, Sandbox

DOMAIN_FILE = """\
description: A one-desk test backend.
tables:
  customers:
    customer_id: TEXT PRIMARY KEY
    name: TEXT NOT NULL
  notes:
    note_id: TEXT PRIMARY KEY
    customer_id: TEXT NOT NULL REFERENCES customers (customer_id)
    body: TEXT NOT NULL
indexes:
  notes_by_customer: notes (customer_id)
views:
  note_counts: SELECT c.customer_id, COUNT(n.note_id) AS notes FROM customers c LEFT JOIN {notes} n USING (customer_id)
    GROUP BY c.customer_id
{volatile_key}:
  notes: [body]
"""


@pytest.fixture
def package(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "yaml_desk"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "policy.md").write_text("1. Be brief.\n")
    sys.path.insert(0, str(tmp_path))
    yield folder
    sys.path.remove(str(tmp_path))
    sys.modules.pop("yaml_desk", None)


def _domain() -> Domain:
    return Domain.in_package("yaml_desk", date(2026, 1, 1), escalations=TICKETS, populate=_populate, tools=[],
                             templates=[])


def _populate(conn: sqlite3.Connection, rng: random.Random) -> None:
    conn.execute("INSERT INTO customers VALUES (?, ?)", ("C-1", "Ada"))


def test_domain_file_declares_tables_indexes_and_ungraded_columns(package: Path) -> None:
    (package / "domain.yaml").write_text(DOMAIN_FILE.format(volatile_key="volatile", notes="notes"))
    domain = _domain()
    assert (domain.name, domain.description) == ("yaml_desk", "A one-desk test backend.")
    assert domain.policy == "1. Be brief.\n"
    tables = domain.database.tables
    assert set(tables) == {"customers", "notes", "tickets"}
    assert "body" not in tables["notes"].graded_columns and "customer_id" in tables["notes"].graded_columns
    assert "summary" not in tables["tickets"].graded_columns  # the escalation record's free text
    assert "CREATE INDEX notes_by_customer ON notes (customer_id);" in domain.schema_sql


def test_a_misspelt_key_is_refused_naming_the_file_and_the_key(package: Path) -> None:
    (package / "domain.yaml").write_text(DOMAIN_FILE.format(volatile_key="volatle", notes="notes"))
    with pytest.raises(ValueError, match=r"domain\.yaml is not a valid domain file(.|\n)*volatle"):
        _domain()


def _count(sandbox: Sandbox) -> int:
    row = sandbox.one("SELECT notes FROM note_counts WHERE customer_id = ?", ("C-1",))
    assert row is not None
    return row["notes"]


def test_a_view_is_read_like_a_table_and_left_out_of_the_graded_state(package: Path) -> None:
    (package / "domain.yaml").write_text(DOMAIN_FILE.format(volatile_key="volatile", notes="notes"))
    database = _domain().database
    assert set(database.tables) == {"customers", "notes", "tickets"}  # the graded state: tables only
    sandbox = database.spawn()
    assert _count(sandbox) == 0
    sandbox.execute("INSERT INTO notes VALUES (?, ?, ?)", ("N-1", "C-1", "called"))
    assert _count(sandbox) == 1  # derived from the tables as they are now
    assert set(sandbox.table_digests()) == {"customers", "notes", "tickets"}
    sandbox.close()


def test_a_view_that_does_not_read_is_refused_when_the_database_is_built(package: Path) -> None:
    (package / "domain.yaml").write_text(DOMAIN_FILE.format(volatile_key="volatile", notes="noets"))
    with pytest.raises(ValueError, match="view 'note_counts' does not read: no such table: main.noets"):
        _ = _domain().database
