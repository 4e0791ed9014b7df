"""What the two SQL stores' migrations compute alike. The schema step that lets work
discovery find a quiet parent by key (SQLite 3 to 4, PostgreSQL 1 to 2) fills each
Run's quiet flag and the children it waits for from its latest state, and a child's
parent call from its activation line. The step that allows one pending answer per wait
(SQLite 6 to 7, PostgreSQL 3 to 4) names the ticket of each pending resume and first
settles every pending answer but the oldest of a ticket (the one the runtime would
apply). The statements are in ``?`` style (``dialect.POSTGRESQL.sql`` rewrites them for
psycopg)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from runkernel.adapters.stores.contract import SchemaError
from runkernel.adapters.stores.serial import answer_name, answered_ticket, snapshot_from_json
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


def one_answer_statements(pending: Iterable[Sequence[Any]]) -> Iterator[Statement]:
    """The updates that name each pending resume's ticket and settle the later answers of
    a ticket that has several, from (entry id, run id, body text) rows of the pending
    commands, oldest first. A body that cannot be read names no ticket (the runtime
    refuses it as malformed, as before)."""
    kept: dict[tuple[str, str], tuple[int, str]] = {}
    for entry_id, run_id, text in (row[:3] for row in pending):
        try:
            body = json.loads(str(text))
        except ValueError:
            continue
        ticket = answered_ticket(body)
        if ticket is None:
            continue
        first = kept.get((str(run_id), ticket))
        if first is None:
            kept[(str(run_id), ticket)] = (int(entry_id), answer_name(body))
            yield "UPDATE inbox SET ticket_id = ? WHERE entry_id = ?", (ticket, entry_id)
        else:
            outcome = f"refused: already answered by command {first[0]} ({first[1]}); a wait takes one answer"
            yield "UPDATE inbox SET state = 'settled', outcome = ? WHERE entry_id = ?", (outcome, entry_id)
