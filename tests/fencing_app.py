"""The fencing test's worker app (``test_fencing_workers.py``): step 1 holds a table
(``reserve``: reconnect), step 2 pays (``pay``: indeterminate), step 3 ends the Run.

Both tools talk to one downstream, a SQLite file named by ``RUNKERNEL_FENCING_LEDGER``,
that keeps the highest lease epoch it was told per operation (by a start, a status
question or a fence) and refuses a start with a lower one. Every start is recorded with
its epoch and whether it was accepted; ``status`` answers from the accepted starts.
"""

from __future__ import annotations

import os
import sqlite3

from runkernel import (
    CallRequest,
    EndCauseKind,
    Failed,
    InferenceRequest,
    ModelReply,
    OperationStatus,
    Returned,
    RunCall,
    RuntimeApp,
    StatusReply,
    ToolPolicy,
    ToolRegistry,
)


def _ledger() -> sqlite3.Connection:
    db = sqlite3.connect(os.environ["RUNKERNEL_FENCING_LEDGER"], timeout=30, isolation_level=None)
    db.execute("CREATE TABLE IF NOT EXISTS highest (operation_id TEXT PRIMARY KEY, epoch INTEGER)")
    db.execute(
        "CREATE TABLE IF NOT EXISTS starts (run_id TEXT, tool TEXT, operation_id TEXT, epoch INTEGER, accepted INTEGER)"
    )
    return db


def _see(db: sqlite3.Connection, operation_id: str, epoch: int | None) -> bool:
    """Raise the operation's highest epoch to ``epoch``; False if it was higher already."""
    assert epoch is not None, "every question to the downstream carries the lease epoch"
    row = db.execute("SELECT epoch FROM highest WHERE operation_id = ?", (operation_id,)).fetchone()
    if row is not None and row[0] > epoch:
        return False
    db.execute("INSERT OR REPLACE INTO highest VALUES (?, ?)", (operation_id, epoch))
    return True


def start(call: RunCall, tool: str) -> bool:
    """One executor start downstream: accepted unless a higher epoch was seen."""
    db = _ledger()
    try:
        db.execute("BEGIN IMMEDIATE")
        accepted = _see(db, call.operation_id, call.lease_epoch)
        db.execute("INSERT INTO starts VALUES (?, ?, ?, ?, ?)", (call.run_id, tool, call.operation_id, call.lease_epoch, int(accepted)))
        db.execute("COMMIT")
        return accepted
    finally:
        db.close()


def fence(operation_id: str, lease_epoch: int | None) -> None:
    db = _ledger()
    try:
        db.execute("BEGIN IMMEDIATE")
        _see(db, operation_id, lease_epoch)
        db.execute("COMMIT")
    finally:
        db.close()


class Reserve:
    policy = ToolPolicy.reconnect()

    def run(self, call: RunCall) -> Returned | Failed:
        if not start(call, "reserve"):
            return Failed({"type": "Fenced", "message": "a newer lease drives this operation"})
        return Returned({"reservation": call.operation_id})

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        db = _ledger()
        try:
            db.execute("BEGIN IMMEDIATE")
            _see(db, operation_id, lease_epoch)
            row = db.execute("SELECT 1 FROM starts WHERE operation_id = ? AND accepted = 1", (operation_id,)).fetchone()
            db.execute("COMMIT")
        finally:
            db.close()
        if row is None:
            return StatusReply(OperationStatus.NOT_FOUND)
        return StatusReply(OperationStatus.DONE, {"reservation": operation_id})

    def fence(self, operation_id: str, lease_epoch: int | None) -> None:
        fence(operation_id, lease_epoch)


class Pay:
    policy = ToolPolicy.indeterminate()

    def run(self, call: RunCall) -> Returned | Failed:
        if not start(call, "pay"):
            return Failed({"type": "Fenced", "message": "a newer lease drives this operation"})
        return Returned({"paid": 20})

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        return StatusReply(OperationStatus.UNKNOWN)

    def fence(self, operation_id: str, lease_epoch: int | None) -> None:
        fence(operation_id, lease_epoch)


class Model:
    def infer(self, request: InferenceRequest) -> ModelReply:
        if request.step == 1:
            return ModelReply("Holding a table.", (CallRequest("reserve", {"seats": 2}),))
        if request.step == 2:
            return ModelReply("Paying.", (CallRequest("pay", {"amount": 20}),))
        return ModelReply("Booked.", end=EndCauseKind.COMPLETED)


app = RuntimeApp(name="fencing", model=Model(), tools=ToolRegistry({"reserve": Reserve(), "pay": Pay()}, max_steps=10))
