"""The SQL queries of a store's summary rows (``work``), written once in ``?`` style:
the ``runkernel runs`` listing and its count, and the Runs with work, each with the few
expressions a store's dialect fills in."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runkernel.adapters.stores.sql.dialect import Dialect
from runkernel.adapters.stores.work import RunSummary


#: the summary columns, in RunSummary's field order, as both SQL stores keep them
SUMMARY_COLUMNS = "run_id, thread_id, state, step, version, app, waiting_for, wake_at, app_version"


def _filters(*, state: str | None, thread_id: str | None, app: str | None) -> tuple[str, list[object]]:
    """The WHERE clause of the listing's filters, and its parameters."""
    clause = "WHERE 1 = 1"
    params: list[object] = []
    for column, value in (("state", state), ("app", app), ("thread_id", thread_id)):
        if value is not None:
            clause += f" AND {column} = ?"
            params.append(value)
    return clause, params


def listing_query(
    dialect: Dialect,
    *,
    state: str | None,
    thread_id: str | None,
    limit: int | None,
    app: str | None = None,
    after: str | None = None,
) -> tuple[str, list[object]]:
    """The ``runkernel runs`` query over a store's ``runs`` table, newest first by the
    dialect's activation order, in ``?`` style. ``after`` (a run id) pages: only Runs
    activated before that one, found by its key, so a page is a range of an index, never
    a count of rows skipped."""
    clause, params = _filters(state=state, thread_id=thread_id, app=app)
    newest_first = dialect.activation_order
    query = f"SELECT {SUMMARY_COLUMNS} FROM runs {clause}"
    if after is not None:
        query += f" AND {newest_first} < (SELECT {newest_first} FROM runs WHERE run_id = ?)"
        params.append(after)
    query += f" ORDER BY {newest_first} DESC"
    if limit is not None:
        query += " LIMIT ?"
        params.append(limit)
    return query, params


def count_query(*, state: str | None, thread_id: str | None, app: str | None, cap: int) -> tuple[str, list[object]]:
    """How many Runs match the listing's filters, at most ``cap``: index entries counted
    without reading the rows, and the count stops at the cap."""
    clause, params = _filters(state=state, thread_id=thread_id, app=app)
    return f"SELECT count(*) FROM (SELECT 1 FROM runs {clause} LIMIT ?) AS capped", [*params, cap]


#: The Runs a worker of a version may drive (its parameters: that version three times;
#: NULL: a worker that drives every version): those recorded without a version
#: (activated before versions existed), of its own version, or of a version recorded
#: compatible with its own.
VERSION_FILTER = (
    "(CAST(? AS text) IS NULL OR r.app_version IS NULL OR r.app_version = CAST(? AS text) OR EXISTS ("
    "SELECT 1 FROM compatible_versions v WHERE v.app = r.app AND v.version = CAST(? AS text) "
    "AND v.drives = r.app_version))"
)


def work_query(dialect: Dialect) -> str:
    """The ``runs_with_work`` query over a store's ``runs``, ``awaited_children``,
    ``inbox`` and ``leases`` tables, in ``?`` style, with the dialect's store clock,
    null-safe equality and activation order. Its parameters: the app, the worker's
    version (three times: None drives every version), the clock where the dialect's is a
    parameter (twice), and the limit. Each branch is a key lookup: a quiet parent's
    children are found by its awaited rows and their own runs rows, never by reading
    history; a Run's version is its row's, and what it may be driven by the
    ``compatible_versions`` row the operator recorded (``accept_versions``)."""
    now = dialect.now
    return (
        f"SELECT r.run_id FROM runs r WHERE r.app {dialect.same} ? AND {VERSION_FILTER} AND ("
        " (r.state = 'running' AND (NOT r.quiet OR EXISTS (SELECT 1 FROM awaited_children a"
        "  LEFT JOIN runs c ON c.run_id = a.child_run_id"
        "  WHERE a.parent_run_id = r.run_id AND (c.run_id IS NULL OR c.state = 'ended'))))"
        f" OR (r.state = 'awaiting' AND r.wake_at <= {now})"
        " OR EXISTS (SELECT 1 FROM inbox i WHERE i.run_id = r.run_id AND i.state = 'pending'))"
        " AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.run_id = r.run_id"
        f"  AND NOT l.released AND l.expires_at > {now})"
        f" ORDER BY r.{dialect.activation_order} LIMIT ?"
    )


def summary_from_row(row: Sequence[Any]) -> RunSummary:
    """A RunSummary from a row of ``SUMMARY_COLUMNS``."""
    return RunSummary(
        str(row[0]),
        str(row[1]),
        str(row[2]),
        int(row[3]),
        int(row[4]),
        row[5],
        row[6],
        None if row[7] is None else float(row[7]),
        row[8],
    )
