"""The README walk-through's app: a scripted model, a replay tool, a reconnect tool
and a tool that needs approval, for the pull-mode runtime.

    runkernel start --store sqlite:///demo.db --thread t1 --app demo "book me a table"
    runkernel worker --store sqlite:///demo.db --app examples.demo_app:app --once

Step 1 looks a restaurant up (``lookup``: replay, safe to run again) and holds a table
(``reserve``: reconnect, asked what became of it after a crash, never run twice).
Step 2 pays the deposit (``pay``: the gate holds it for an operator's approval). Step 3
answers and ends the Run.

The tools keep a downstream record, a SQLite file named by ``RUNKERNEL_DEMO_LEDGER``
(default ``demo-ledger.db`` in the working directory): one row per executor start, with
the operation id and the lease epoch (the fencing token). A start whose epoch is lower
than one the ledger already saw for the Run is refused, as a real downstream that
checks fencing tokens would. ``RUNKERNEL_DEMO_TOOL_SECONDS`` makes each start take that
long (the race test uses it so that kills land while tools run).
"""

from __future__ import annotations

import os
import sqlite3
import time

from attrs import frozen

from runkernel import (
    CallRequest,
    EndCauseKind,
    Failed,
    Hold,
    InferenceRequest,
    ModelReply,
    OperationStatus,
    Permit,
    Returned,
    RunCall,
    RuntimeApp,
    StatusReply,
    ToolPolicy,
    ToolRegistry,
    WaitKind,
)
from runkernel.kernel import ToolCall

APP_NAME = "demo"


def ledger_path() -> str:
    """Where the tools' downstream record is kept."""
    return os.environ.get("RUNKERNEL_DEMO_LEDGER", "demo-ledger.db")


def _ledger() -> sqlite3.Connection:
    db = sqlite3.connect(ledger_path(), timeout=30, isolation_level=None)
    db.execute(
        "CREATE TABLE IF NOT EXISTS starts (run_id TEXT, tool TEXT, operation_id TEXT, attempt INTEGER, "
        "epoch INTEGER, refused INTEGER)"
    )
    return db


def record_start(call: RunCall, tool: str) -> bool:
    """Record one executor start downstream; False if its fencing token is stale."""
    db = _ledger()
    try:
        db.execute("BEGIN IMMEDIATE")
        (highest,) = db.execute("SELECT max(epoch) FROM starts WHERE run_id = ?", (call.run_id,)).fetchone()
        stale = call.lease_epoch is not None and highest is not None and call.lease_epoch < highest
        db.execute(
            "INSERT INTO starts VALUES (?, ?, ?, ?, ?, ?)",
            (call.run_id, tool, call.operation_id, call.attempt, call.lease_epoch, int(stale)),
        )
        db.execute("COMMIT")
        return not stale
    finally:
        db.close()


def _work() -> None:
    seconds = float(os.environ.get("RUNKERNEL_DEMO_TOOL_SECONDS", "0") or 0)
    if seconds:
        time.sleep(seconds)


class ScriptedModel:
    """The same three steps for every Run, decided by the step number alone."""

    def infer(self, request: InferenceRequest) -> ModelReply:
        if request.step == 1:
            return ModelReply(
                "Looking for a table.",
                (CallRequest("lookup", {"cuisine": "thai"}), CallRequest("reserve", {"restaurant": "Baan", "seats": 2})),
            )
        if request.step == 2:
            return ModelReply("Paying the deposit.", (CallRequest("pay", {"amount": 20, "currency": "EUR"}),))
        return ModelReply("Your table at Baan is booked for two.", end=EndCauseKind.COMPLETED)


@frozen
class Lookup:
    """A read-only search: replayed after a crash (at-least-once is harmless)."""

    policy: ToolPolicy = ToolPolicy.replay()

    def run(self, call: RunCall) -> Returned | Failed:
        if not record_start(call, "lookup"):
            return Failed({"type": "Fenced", "message": "a newer lease drives this run"})
        _work()
        return Returned({"restaurant": "Baan", "rating": 4.6})

    def status(self, operation_id: str, lease_epoch: int | None = None) -> StatusReply:
        return StatusReply(OperationStatus.UNKNOWN)


@frozen
class Reserve:
    """Holds a table: never run twice. After a crash the runtime asks ``status``,
    answered from the ledger (the downstream system's own record)."""

    policy: ToolPolicy = ToolPolicy.reconnect()

    def run(self, call: RunCall) -> Returned | Failed:
        if not record_start(call, "reserve"):
            return Failed({"type": "Fenced", "message": "a newer lease drives this run"})
        _work()
        return Returned({"reservation": f"R-{call.operation_id}"})

    def status(self, operation_id: str, lease_epoch: int | None = None) -> StatusReply:
        db = _ledger()
        try:
            row = db.execute(
                "SELECT 1 FROM starts WHERE operation_id = ? AND refused = 0", (operation_id,)
            ).fetchone()
        finally:
            db.close()
        if row is None:
            return StatusReply(OperationStatus.NOT_FOUND)
        return StatusReply(OperationStatus.DONE, {"reservation": f"R-{operation_id}"})


@frozen
class Pay:
    """Pays a deposit; the gate holds it for approval first. Indeterminate after a
    crash: nobody can tell whether the money moved, so an operator reconciles it."""

    policy: ToolPolicy = ToolPolicy.indeterminate()

    def run(self, call: RunCall) -> Returned | Failed:
        if not record_start(call, "pay"):
            return Failed({"type": "Fenced", "message": "a newer lease drives this run"})
        _work()
        return Returned({"paid": 20, "currency": "EUR"})

    def status(self, operation_id: str, lease_epoch: int | None = None) -> StatusReply:
        return StatusReply(OperationStatus.UNKNOWN)


class ApprovePayments:
    """Payments wait for an operator's approval; everything else runs at once."""

    def check(self, run_id: str, call: ToolCall) -> Hold | Permit:
        if call.tool == "pay":
            return Hold(WaitKind.APPROVAL, {"prompt": f"pay {call.arguments}?"})
        return Permit()


app = RuntimeApp(
    name=APP_NAME,
    model=ScriptedModel(),
    tools=ToolRegistry({"lookup": Lookup(), "reserve": Reserve(), "pay": Pay()}, max_steps=10),
    gate=ApprovePayments(),
)


def crashtest_reset() -> None:
    """Empty the ledger: ``runkernel crashtest --app examples.demo_app:app`` calls this
    before every play, so each crash meets a downstream that saw only its own Run."""
    db = _ledger()
    try:
        db.execute("DELETE FROM starts")
    finally:
        db.close()
