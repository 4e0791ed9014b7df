"""The SQL differences between SQLite and PostgreSQL, in one value per database.

Every statement the two stores share is written once, in SQLite's ``?`` style; a
store's ``Dialect`` says how its database takes one (``sql``: psycopg takes ``%s``
and a literal ``%`` doubled) and fills in the few expressions that differ: the store's
clock inside a statement (a parameter on SQLite, whose clock is this process's; the
server's ``now()`` on PostgreSQL), null-safe equality, and the column that orders Runs
by activation. What differs in the shape of a transaction (how a lease row is locked,
how a commit is sent) stays in each store."""

from __future__ import annotations

import functools

from attrs import frozen


@frozen
class Dialect:
    """One database's SQL: ``placeholder`` (how it writes a parameter), ``now`` (the
    store's clock, in seconds since the Unix epoch, inside a statement: ``?`` where the
    clock is a parameter), ``same`` (equality that holds between two NULLs) and
    ``activation_order`` (the ``runs`` column that orders Runs by activation)."""

    name: str
    placeholder: str
    now: str
    same: str
    activation_order: str

    def sql(self, query: str) -> str:
        """A statement written in ``?`` style as this database takes it. No shared
        statement holds a ``?`` of its own."""
        return query if self.placeholder == "?" else _percent_style(query)


@functools.lru_cache(maxsize=256)
def _percent_style(query: str) -> str:
    """``query`` with ``%s`` parameters (psycopg), a literal ``%`` doubled."""
    return query.replace("%", "%%").replace("?", "%s")


SQLITE = Dialect(name="sqlite", placeholder="?", now="?", same="IS", activation_order="rowid")
POSTGRESQL = Dialect(
    name="postgresql",
    placeholder="%s",
    now="extract(epoch FROM now())::float8",
    same="IS NOT DISTINCT FROM",
    activation_order="activated",
)
