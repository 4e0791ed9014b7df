"""A Run's history facts recomputed from its Thread's commit log, independently of the
store's indexed history rows (what the harnesses and store tests compare them with)."""

from __future__ import annotations

from runkernel.adapters.stores.contract import Store
from runkernel.kernel.history import NO_HISTORY, RunHistory
from runkernel.kernel.state import RESUMED_EVENT, AppliedResume, Awaiting


def logged_history(store: Store, run_id: str) -> RunHistory:
    """Tickets the Run awaited, batches it finalized and resumes it applied, in log order."""
    thread_id = store.thread_of(run_id)
    if thread_id is None:
        return NO_HISTORY
    tickets: set[str] = set()
    closed: set[str] = set()
    resumes: list[AppliedResume] = []
    for commit in store.commits(thread_id):
        if commit.run_id != run_id:
            continue
        if isinstance(commit.disposition, Awaiting):
            tickets.add(commit.disposition.ticket.ticket_id)
        if commit.batch is not None and commit.batch.finalized:
            closed.add(commit.batch.batch_id)
        for event in commit.events:
            if event.type == RESUMED_EVENT:
                resumes.append(AppliedResume(str(event.data["ticket_id"]), str(event.data["digest"])))
    return RunHistory(frozenset(tickets), frozenset(closed), tuple(resumes))
