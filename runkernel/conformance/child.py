"""What the store contract suite runs in a child process, on the storage a
``StoreFactory`` opens (no pytest here: a child imports only what it runs).

``python -m runkernel.conformance.child commit MODULE:ATTR ARGUMENT THREAD RUN STEPS``
opens the store, reads the Thread's head and appends the rest of
``text_run(THREAD, RUN, STEPS)`` from there, each commit settling an inbox command
(``Settlement``), printing each acknowledged version on a line
of its own as soon as ``append`` returned: the parent kills it with SIGKILL at a random
point and holds the store to every version it printed.
"""

from __future__ import annotations

import multiprocessing.connection
import sys
from collections.abc import MutableSequence, Sequence

from runkernel.adapters.stores.contract import Settlement
from runkernel.conformance.racing import Attempt, Barrier, Condition, RaceClock, StoreFactory, race
from runkernel.conformance.runs import text_run


def commit_until_killed(factory: StoreFactory, thread_id: str, run_id: str, steps: int) -> None:
    store = factory.open()
    commits = text_run(thread_id, run_id, steps)
    head = store.thread_head(thread_id)
    for commit in commits[0 if head is None else head.version :]:
        # each commit settles an inbox command in its own transaction: a command left
        # pending by a kill is the one the next commit settles
        pending = store.pending_commands(run_id)
        entry = pending[0].entry_id if pending else store.put_command(run_id, {"crash_test": commit.version})
        store.append(commit, Settlement(entry, f"applied at {commit.version}"))
        sys.stdout.write(f"{commit.version}\n")
        sys.stdout.flush()
    store.close()


def race_in_child(
    factory: StoreFactory,
    me: int,
    plan: Sequence[Attempt],
    barrier: Barrier,
    condition: Condition,
    reached: MutableSequence[int],
    results: multiprocessing.connection.Connection,
) -> None:
    """One racing process (``racing.race_in_processes``): its own instance, its outcome
    (or its failure) sent back."""
    try:
        clock = RaceClock(me, condition, reached)
        store = factory.open(clock=clock)
        try:
            results.send(race(store, clock, f"worker-{me}", barrier, plan))
        finally:
            store.close()
    except BaseException as error:
        results.send(f"racer {me} failed: {error!r}")
        raise
    finally:
        results.close()


def main(argv: list[str]) -> int:
    if len(argv) != 6 or argv[0] != "commit":
        print("usage: python -m runkernel.conformance.child commit MODULE:ATTR ARGUMENT THREAD RUN STEPS", file=sys.stderr)
        return 2
    _, target, argument, thread_id, run_id, steps = argv
    commit_until_killed(StoreFactory(target, argument), thread_id, run_id, int(steps))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
