"""Cross-checks a read command makes before it answers: the Run's snapshot row against
the Thread's log. Stores keep both in one transaction, so any disagreement is damage
to the store, reported as DamagedStore rather than shown as a half-true answer."""

from __future__ import annotations

from collections.abc import Iterable

from runkernel.adapters.stores.contract import DamagedStore, Store
from runkernel.kernel.state import RunSnapshot, ThreadCommit


def check_snapshot(snapshot: RunSnapshot, log: Iterable[ThreadCommit]) -> None:
    """The snapshot must be what the Run's last commit in the log says."""
    last = None
    for commit in log:
        if commit.run_id == snapshot.run_id:
            last = commit
    if last is None:
        raise DamagedStore(
            f"run {snapshot.run_id!r} has a stored state but no commit in thread {snapshot.thread_id!r}"
        )
    found = (snapshot.thread_id, snapshot.version, snapshot.step, snapshot.state)
    expected = (last.thread_id, last.version, last.step, last.disposition)
    if found != expected:
        raise DamagedStore(
            f"the stored state of run {snapshot.run_id!r} disagrees with its log: it says version "
            f"{snapshot.version!r}, step {snapshot.step!r}; the log's last commit is version "
            f"{last.version}, step {last.step}"
        )


def check_thread(store: Store, thread_id: str) -> list[ThreadCommit]:
    """The Thread's log (checked by the store as it is read), with every Run's stored
    state checked against it."""
    log = list(store.commits(thread_id))
    for run_id in dict.fromkeys(c.run_id for c in log):
        snapshot = store.run(run_id)
        if snapshot is None:
            raise DamagedStore(f"run {run_id!r} has commits in thread {thread_id!r} but no stored state")
        check_snapshot(snapshot, log)
    return log
