"""Private SQLite backends: one in-memory template per domain, one cheap copy per episode.

A `DatabaseTemplate` is built once per domain (schema + seeded rows). `DatabaseTemplate.spawn()` copies it
into a fresh in-memory database with SQLite's online-backup API, which copies pages rather than rows, so
an episode's private backend is cheap (envs/README.md, design notes, has the measurement). Each `Sandbox`
carries the episode's fixed clock and its deterministic id counters, so two valid tool paths reach
byte-identical graded states.

An authorizer guards every sandbox: ATTACH/DETACH, any schema change and any PRAGMA given an argument (the
form that writes settings) are denied, and every table a statement may write is recorded, so grading
re-hashes only tables that were touched.
"""

from __future__ import annotations

import copy
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from envs.state import Rows, TableInfo, combine_digests, inspect_tables, table_digest, table_rows

Params = Sequence[Any] | Mapping[str, Any]

_SCHEMA_ACTIONS = frozenset(
    getattr(sqlite3, name)
    for name in dir(sqlite3)
    if name.startswith(("SQLITE_CREATE_", "SQLITE_DROP_")) or name == "SQLITE_ALTER_TABLE"
)
_DENIED_ACTIONS = _SCHEMA_ACTIONS | {sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH}
_WRITE_ACTIONS = frozenset({sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_DELETE})


class DatabaseTemplate:
    """A domain's pristine database, kept in memory and copied for every episode.

    The template connection is only read (by backups and task generators) after construction; a lock
    serialises backups so sandboxes can be spawned from many threads at once.
    """

    def __init__(
        self,
        schema_sql: str,
        populate: Callable[[sqlite3.Connection], None],
        *,
        volatile: dict[str, list[str]],
        today: str,
    ) -> None:
        self.today = today
        self._conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._conn.executescript(schema_sql)
        _check_views(self._conn)
        self._conn.execute("BEGIN")
        populate(self._conn)
        self._conn.execute("COMMIT")
        self.tables: dict[str, TableInfo] = inspect_tables(self._conn, volatile)
        self.table_digests: dict[str, str] = {n: table_digest(self._conn, t) for n, t in self.tables.items()}
        self.state_hash = combine_digests(self.table_digests)
        self._lock = threading.Lock()
        self._reads: dict[tuple[str, tuple[Any, ...]], list[dict[str, Any]]] = {}

    def spawn(self) -> Sandbox:
        """A fresh private copy of the template (the per-episode backend)."""
        conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        with self._lock:
            self._conn.backup(conn)
        return Sandbox(conn, self)

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Rows of the pristine template (for task generators), as fresh dicts.

        Memoised: the template never changes, and every variant of a template runs the same candidate query.
        """
        key = (sql, tuple(params))
        with self._lock:
            if key not in self._reads:
                cursor = self._conn.execute(sql, key[1])
                names = [d[0] for d in cursor.description]
                self._reads[key] = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
            return [dict(row) for row in self._reads[key]]

    def row_count(self) -> int:
        with self._lock:
            return sum(self._conn.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0] for t in self.tables)


def _check_views(conn: sqlite3.Connection) -> None:
    """Compile every view once: SQLite resolves a view's tables and columns only when it is read, so a view
    naming a missing one would otherwise fail in the first tool that reads it, not where it is declared."""
    for (view,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'view'").fetchall():
        try:
            conn.execute(f'SELECT * FROM "{view}" LIMIT 0')
        except sqlite3.OperationalError as exc:
            raise ValueError(f"view {view!r} does not read: {exc}") from exc


class RefusedSqlError(ValueError):
    """SQL text a tool may not run (a quoted literal): a bug in the tool, never the agent's input."""


class Sandbox:
    """One episode's private database plus its fixed clock, id counters and per-episode memory.

    Tools receive a `Sandbox` as their first argument and use `query`/`one`/`execute`, which take SQL with
    placeholders and a separate parameter sequence; SQL text containing a quoted literal is refused so
    that values can only ever arrive as parameters.
    """

    def __init__(self, conn: sqlite3.Connection, template: DatabaseTemplate) -> None:
        self._conn = conn
        self.template = template
        self.today = template.today
        self.memory: dict[str, Any] = {}  # per-episode facts that are not graded state (e.g. who is verified)
        # per-episode counts of refused attempts (failed verifications): kept when the refused call rolls back
        self.refusals: dict[str, int] = {}
        self.dirty_tables: set[str] = set()
        self._id_counters: dict[str, int] = {}
        self._digests: tuple[int, dict[str, str]] | None = None  # (total_changes when computed, digests)
        conn.set_authorizer(self._authorize)

    # -- authorizer ---------------------------------------------------------------------------------
    def _authorize(self, action: int, arg1: str | None, arg2: str | None, _db: str | None, _src: str | None) -> int:
        if action in _DENIED_ACTIONS:
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_PRAGMA and arg2 is not None:
            return sqlite3.SQLITE_DENY
        if action in _WRITE_ACTIONS and arg1 is not None:
            self.dirty_tables.add(arg1)
        return sqlite3.SQLITE_OK

    # -- data access for tools ----------------------------------------------------------------------
    @staticmethod
    def _checked(sql: str) -> str:
        if "'" in sql or '"' in sql:
            raise RefusedSqlError(f"SQL with quoted literals is refused; pass values as parameters: {sql!r}")
        return sql

    def query(self, sql: str, params: Params = ()) -> list[dict[str, Any]]:
        cursor = self._conn.execute(self._checked(sql), params)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def one(self, sql: str, params: Params = ()) -> dict[str, Any] | None:
        rows = self.query(sql, params)
        return rows[0] if rows else None

    def execute(self, sql: str, params: Params = ()) -> int:
        """Run one write statement; returns the number of rows changed."""
        return self._conn.execute(self._checked(sql), params).rowcount

    def raw(self, sql: str, params: Params = ()) -> sqlite3.Cursor:
        """Unchecked SQL for tests and tooling; still subject to the authorizer."""
        return self._conn.execute(sql, params)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """All-or-nothing: a tool that fails half-way leaves no trace.

        Besides the SQLite writes, the episode's bookkeeping is restored on any exception: the id counters (so
        a retry after a failed write mints the id the golden path mints) and the memory (so a failed call
        verifies no one). `refusals` is kept: it counts the calls that fail. `dirty_tables` is deliberately
        kept: the authorizer runs when a statement is prepared, and the connection's statement cache re-runs a
        prepared statement without asking it again, so a table dropped from the set here would go unmarked when
        the retry writes it. A table that stays marked after a rollback is merely re-hashed, to the same digest.
        """
        saved = dict(self._id_counters), copy.deepcopy(self.memory)
        self._conn.execute("BEGIN")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            self._id_counters, self.memory = saved
            raise
        self._conn.execute("COMMIT")

    def new_id(self, prefix: str) -> str:
        """Deterministic per-episode id: the n-th id minted with `prefix` in this episode.

        The `N` marker keeps minted ids apart from seeded ones, which never contain it.
        """
        n = self._id_counters.get(prefix, 0) + 1
        self._id_counters[prefix] = n
        return f"{prefix}-N{n:04d}"

    # -- patches and grading ------------------------------------------------------------------------
    def apply_patch(self, patch: Mapping[str, Sequence[Mapping[str, Any]]]) -> None:
        """Upsert rows per table (a task's initial-state patch), in one transaction."""
        with self.transaction():
            for table, rows in patch.items():
                if table not in self.template.tables:
                    raise ValueError(f"patch names unknown table {table!r}; tables: {sorted(self.template.tables)}")
                for row in rows:
                    columns = ", ".join(f'"{c}"' for c in row)
                    marks = ", ".join("?" for _ in row)
                    self._conn.execute(
                        f'INSERT OR REPLACE INTO "{table}" ({columns}) VALUES ({marks})', tuple(row.values())
                    )

    def table_digests(self) -> dict[str, str]:
        """Per-table digests: the template's for untouched tables, recomputed for written ones.

        Reused while `total_changes` stands still, since no row can have changed in between.
        """
        if self._digests is not None and self._digests[0] == self._conn.total_changes:
            return dict(self._digests[1])
        digests = dict(self.template.table_digests)
        for name in self.dirty_tables & digests.keys():
            digests[name] = table_digest(self._conn, self.template.tables[name])
        self._digests = (self._conn.total_changes, digests)
        return dict(digests)

    def state_hash(self) -> str:
        """Digest of the graded state; only tables some statement could have written are re-read."""
        return combine_digests(self.table_digests())

    def rows(self, table: str) -> Rows:
        return table_rows(self._conn, self.template.tables[table])

    def close(self) -> None:
        self._conn.close()
