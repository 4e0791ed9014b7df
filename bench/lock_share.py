"""How much of a Run a SQLite worker spends inside write transactions, holding the one
write lock every process on the file shares: ``python -m bench.lock_share [RUNS]``.

One worker drives RUNS short Runs (the worker group's: two tool calls, then an answer)
on a new file at ``synchronous=FULL``; the time inside ``append`` and the lease
transactions (each a ``BEGIN IMMEDIATE`` … ``COMMIT``, the fsync included) is summed
and set against the wall time of the whole drain. That share is what a second worker
cannot overlap (Amdahl), which is what the workers/sqlite rows' limit cites.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import subject


def lock_share(runs: int) -> tuple[float, float]:
    """(ms per Run inside write transactions, ms per Run in all), one worker."""
    from runkernel import Worker
    from runkernel.adapters.stores.sqlite import SqliteStore

    with tempfile.TemporaryDirectory() as scratch:
        store = SqliteStore(Path(scratch) / "runs.db")
        subject.start_runs(store, "share", runs, "share-app")
        inside = [0.0]

        def timed(method: Callable[..., Any]) -> Callable[..., Any]:
            def call(*args: Any, **kwargs: Any) -> Any:
                started = time.perf_counter()
                try:
                    return method(*args, **kwargs)
                finally:
                    inside[0] += time.perf_counter() - started

            return call

        setattr(store, "append", timed(store.append))  # noqa: B010 - a method replaced on one instance
        setattr(store, "_with_lease_row", timed(store._with_lease_row))  # noqa: B010
        # one Run at a time on this store (slots would drive through stores of their own, untimed)
        serial: dict[str, Any] = {} if subject.worker_slots() is None else {"concurrency": 1}
        worker = Worker(store, subject.two_call_app("share-app", lambda: None), worker_id="w1", **serial)
        started = time.perf_counter()
        worker.run_once()
        wall = time.perf_counter() - started
        store.close()
    return inside[0] * 1e3 / runs, wall * 1e3 / runs


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    runs = int(args[0]) if args else 300
    held, total = lock_share(runs)
    print(f"{runs} Runs, 1 worker, SQLite FULL: {held:.2f} of {total:.2f} ms per Run inside write transactions ({held / total:.0%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
