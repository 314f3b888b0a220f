"""Sandbox: private copies, authorizer denials, parameter-only SQL, deterministic ids, atomic tools."""

from __future__ import annotations

import sqlite3
from concurrent.futures import ThreadPoolExecutor

import pytest

from envs.domain import Domain


def test_sandboxes_are_private_copies(telecom: Domain) -> None:
    a, b = telecom.new_sandbox(), telecom.new_sandbox()
    a.execute("UPDATE lines SET roaming_enabled = ? WHERE line_id = ?", (1, "L-20001"))
    a.execute("DELETE FROM tickets WHERE ticket_id IN (SELECT ticket_id FROM tickets LIMIT 1)")
    assert a.state_hash() != telecom.database.state_hash
    assert b.state_hash() == telecom.database.state_hash
    assert b.one("SELECT roaming_enabled FROM lines WHERE line_id = ?", ("L-20001",)) == \
        telecom.database.read("SELECT roaming_enabled FROM lines WHERE line_id = 'L-20001'")[0]
    a.close()
    b.close()


@pytest.mark.parametrize("sql", [
    "ATTACH DATABASE ':memory:' AS other",
    "CREATE TABLE evil (x INTEGER PRIMARY KEY)",
    "DROP TABLE tickets",
    "ALTER TABLE customers ADD COLUMN vip INTEGER",
    "CREATE INDEX evil_index ON lines (status)",
    "CREATE TRIGGER evil AFTER INSERT ON tickets BEGIN DELETE FROM credits; END",
    "PRAGMA foreign_keys = OFF",
    "PRAGMA writable_schema = ON",
])
def test_authorizer_denies_attach_schema_changes_and_pragma_writes(telecom: Domain, sql: str) -> None:
    sandbox = telecom.new_sandbox()
    with pytest.raises(sqlite3.DatabaseError, match="not authorized"):
        sandbox.raw(sql)
    assert sandbox.state_hash() == telecom.database.state_hash
    sandbox.close()


def test_authorizer_allows_pragma_reads(telecom: Domain) -> None:
    sandbox = telecom.new_sandbox()
    assert sandbox.raw("PRAGMA foreign_keys").fetchone() is not None
    sandbox.close()


def test_quoted_literals_are_refused_so_values_travel_as_parameters(telecom: Domain) -> None:
    sandbox = telecom.new_sandbox()
    with pytest.raises(ValueError, match="pass values as parameters"):
        sandbox.query("SELECT * FROM lines WHERE status = 'active'")
    assert sandbox.query("SELECT COUNT(*) AS n FROM lines WHERE status = ?", ("active",))[0]["n"] > 0
    sandbox.close()


def test_ids_are_deterministic_per_episode_and_per_prefix(telecom: Domain) -> None:
    a, b = telecom.new_sandbox(), telecom.new_sandbox()
    assert [a.new_id("TK"), a.new_id("CR"), a.new_id("TK")] == ["TK-N0001", "CR-N0001", "TK-N0002"]
    assert [b.new_id("CR"), b.new_id("TK")] == ["CR-N0001", "TK-N0001"]
    a.close()
    b.close()


def test_transaction_rolls_back_partial_writes(telecom: Domain) -> None:
    sandbox = telecom.new_sandbox()
    with pytest.raises(RuntimeError), sandbox.transaction():
        sandbox.execute("UPDATE lines SET status = ? WHERE line_id = ?", ("suspended", "L-20001"))
        raise RuntimeError("tool failed half-way")
    assert sandbox.state_hash() == telecom.database.state_hash
    sandbox.close()


def test_many_sandboxes_from_many_threads(telecom: Domain) -> None:
    def episode(i: int) -> str:
        sandbox = telecom.new_sandbox()
        sandbox.execute("UPDATE lines SET data_used_gb = ? WHERE line_id = ?", (float(i % 4), "L-20002"))
        digest = sandbox.state_hash()
        sandbox.close()
        return digest

    with ThreadPoolExecutor(max_workers=8) as pool:
        digests = list(pool.map(episode, range(400)))
    assert len(set(digests)) == 4  # same write, same state; different writes, different states
    assert [digests[i] == digests[i % 4] for i in range(400)] == [True] * 400


def test_volatile_columns_do_not_count(telecom: Domain) -> None:
    sandbox = telecom.new_sandbox()
    sandbox.execute("UPDATE tickets SET summary = ? WHERE ticket_id IN (SELECT ticket_id FROM tickets LIMIT 1)",
                    ("rewritten by the agent",))
    assert sandbox.state_hash() == telecom.database.state_hash
    sandbox.execute("UPDATE tickets SET status = ? WHERE ticket_id IN (SELECT ticket_id FROM tickets LIMIT 1)",
                    ("pending_approval",))
    assert sandbox.state_hash() != telecom.database.state_hash
    sandbox.close()
