"""Makes ``schema1.sqlite``: a SQLite store of schema version 1, written by the
runkernel of commit 289e1e7 (the last one whose snapshot row held the history facts).

Run it with that version on the path, e.g. from a checkout of it:

    PYTHONPATH=/path/to/checkout python tests/data/stores/make_schema1_store.py OUT.sqlite

One Thread, two Runs: the first has two tool batches, an approval wait resumed by
an approve, and ends completed; the second awaits an input (ticket used, not resumed).
"""

from __future__ import annotations

import sqlite3
import sys

from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.kernel.decide import decide
from runkernel.kernel.protocol import (
    Activate,
    Allow,
    Approve,
    Commit,
    Decision,
    GateVerdict,
    InferenceResult,
    Input,
    ProposedCall,
    RequireWait,
    ResumeCommand,
    ToolFinished,
    ToolOutput,
)
from runkernel.kernel.state import Message, RunSnapshot
from runkernel.kernel.values import EndCauseKind, Role, WaitKind


def main(path: str) -> None:
    store = SqliteStore(path)
    state: RunSnapshot | None = None

    def feed(event: Input) -> None:
        nonlocal state
        decision = decide(state, event)
        assert isinstance(decision, Decision), decision
        for effect in decision.effects:
            if isinstance(effect, Commit):
                store.append(effect.commit)
        state = decision.state

    feed(Activate("thread-1", "run-1", 0, (Message(Role.USER, "pay the invoice"),)))
    feed(InferenceResult("look it up", (ProposedCall("c1", "lookup", {"q": "invoice"}, "op-1"),), "batch-1"))
    feed(GateVerdict("c1", Allow()))
    feed(ToolFinished("c1", 1, ToolOutput({"amount": 12})))
    feed(InferenceResult("pay it", (ProposedCall("c2", "pay", {"amount": 12}, "op-2"),), "batch-2"))
    feed(GateVerdict("c2", RequireWait(WaitKind.APPROVAL, "ticket-approve-1")))
    feed(ResumeCommand("run-1", "ticket-approve-1", WaitKind.APPROVAL, Approve()))
    feed(ToolFinished("c2", 1, ToolOutput("paid")))
    feed(InferenceResult("done", end=EndCauseKind.COMPLETED))
    assert state is not None
    state = None
    head = store.thread_head("thread-1")
    assert head is not None
    feed(Activate("thread-1", "run-2", head.version, (Message(Role.USER, "and the next one?"),)))
    feed(InferenceResult("which?", (ProposedCall("c1", "ask", {}, "op-3"),), "batch-1"))
    feed(GateVerdict("c1", RequireWait(WaitKind.INPUT, "ticket-input-2")))
    store.close()
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, no -wal beside it
    db.execute("VACUUM")
    db.close()


if __name__ == "__main__":
    main(sys.argv[1])
