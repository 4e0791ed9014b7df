"""What the two SQL stores' migrations compute alike. The schema step that lets work
discovery find a quiet parent by key (SQLite 3 to 4, PostgreSQL 1 to 2) fills each
Run's quiet flag and the children it waits for from its latest state, and a child's
parent call from its activation line; the statements are in ``?`` style
(``dialect.POSTGRESQL.sql`` rewrites them for psycopg)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from runkernel.adapters.stores.contract import SchemaError
from runkernel.adapters.stores.serial import snapshot_from_json
from runkernel.adapters.stores.sql.statements import Statement
from runkernel.adapters.stores.work import activation_parent, awaited_children, parent_columns


def quiet_parent_statements(
    where: str, runs: Iterable[Sequence[Any]], activations: Iterable[Sequence[Any]]
) -> Iterator[Statement]:
    """The updates that fill the quiet flags, awaited children and parent calls, from
    (run id, snapshot text) rows of ``runs`` and (run id, commit line) rows that may be
    activations; a damaged row is a SchemaError naming it (the migration writes nothing)."""
    for run_id, text in (row[:2] for row in runs):
        try:
            awaited = awaited_children(snapshot_from_json(json.loads(str(text))))
        except (ValueError, KeyError, TypeError) as error:
            raise SchemaError(f"{where}: the stored state of run {run_id!r} is damaged: {error!r}") from None
        if awaited:
            yield "UPDATE runs SET quiet = ? WHERE run_id = ?", (True, run_id)
            for child in awaited:
                yield "INSERT INTO awaited_children (parent_run_id, child_run_id) VALUES (?, ?)", (run_id, child)
    # only an activation names a parent; reading every line is a migration's cost, once
    for run_id, line in (row[:2] for row in activations):
        try:
            parent = activation_parent(json.loads(str(line)))
        except (ValueError, KeyError, TypeError) as error:
            raise SchemaError(f"{where}: a commit of run {run_id!r} is damaged: {error!r}") from None
        if parent is not None:
            yield (
                "UPDATE runs SET parent_thread_id = ?, parent_run_id = ?, parent_call_id = ? WHERE run_id = ?",
                (*parent_columns(parent), run_id),
            )
