"""What the race tests count once every worker stopped: the acknowledged commits the
store lost, the commits written twice, and what the race app's downstream saw (second
starts of a reconnect or indeterminate call, starts the fence refused, replays)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from attrs import frozen

from runkernel.adapters.stores.contract import Store
from runkernel.kernel.codec import commit_to_json


@frozen
class Downstream:
    """The race app's ledger: second starts of a reconnect or indeterminate call (must be
    0), starts refused by their stale fencing token, and replay tool starts again."""

    repeated: int
    fenced: int
    replays: int


def acknowledged(directory: Path) -> list[tuple[str, int, str]]:
    """Every commit a worker saw acknowledged: (thread, version, worker), from the
    ``acks-*.jsonl`` files its ``on_event`` appended to."""
    return [
        (str(thread_id), int(version), str(worker_id))
        for path in directory.glob("acks-*.jsonl")
        for line in path.read_text().splitlines()
        if line.strip()
        for thread_id, version, worker_id in [json.loads(line)]
    ]


def lost(store: Store, acks: list[tuple[str, int, str]]) -> int:
    """Acknowledged commits the store does not hold as written by their worker."""
    return sum(
        1 for thread_id, version, worker_id in acks
        if (writer := store.writer_of(thread_id, version)) is None or writer.worker_id != worker_id
    )


def duplicated(store: Store, thread_id: str) -> int:
    """Commits of the Thread that repeat the one before them but for the version (a
    write made twice)."""
    lines = [commit_to_json(c) for c in store.commits(thread_id)]
    return sum(
        {k: v for k, v in before.items() if k != "version"} == {k: v for k, v in after.items() if k != "version"}
        for before, after in zip(lines, lines[1:])
    )


def downstream(ledger_path: Path) -> Downstream:
    """What the race app's tools recorded downstream (``RUNKERNEL_DEMO_LEDGER``)."""
    ledger = sqlite3.connect(ledger_path)
    try:
        repeated = ledger.execute(
            "SELECT count(*) FROM (SELECT operation_id FROM starts WHERE tool IN ('reserve', 'pay') AND refused = 0 "
            "GROUP BY operation_id HAVING count(*) > 1)"
        ).fetchone()[0]
        fenced = ledger.execute("SELECT count(*) FROM starts WHERE refused = 1").fetchone()[0]
        replays = ledger.execute(
            "SELECT count(*) - count(DISTINCT operation_id) FROM starts WHERE tool = 'lookup' AND refused = 0"
        ).fetchone()[0]
    finally:
        ledger.close()
    return Downstream(int(repeated), int(fenced), int(replays))
