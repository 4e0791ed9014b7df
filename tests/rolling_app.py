"""The rolling-deploy test's app, in two versions of its code: ``v1`` and ``v2`` of app
``rolling`` (``v2`` adds a tool, so its tool table's digest, its default version, is
another). Every Run does what its run id says: ``book-*`` looks up, reserves and pays,
then ends; ``approve-*`` does the same with its payment held for an operator's approval;
``nap-*`` sleeps on a durable timer (``NAP`` seconds), then ends. The tools record every
executor start downstream (``examples.demo_app``'s ledger, ``RUNKERNEL_DEMO_LEDGER``)."""

from __future__ import annotations

import datetime
import sqlite3

from examples.demo_app import Lookup, Pay, Reserve, ledger_path, record_start
from runkernel.adapters.drive.actions import CallRequest, RunCall
from runkernel.adapters.drive.ports import (
    GateAnswer, Hold, InferenceRequest, ModelReply, Permit, Returned, Scheduled, StatusReply, Tool, ToolRegistry,
)
from runkernel.adapters.worker.apps import RuntimeApp
from runkernel.kernel.policies import ToolPolicy
from runkernel.kernel.protocol import OperationStatus
from runkernel.kernel.state import ToolCall
from runkernel.kernel.values import EndCauseKind, WaitKind

NAME = "rolling"
#: how long a ``nap-*`` Run sleeps on its timer, in seconds
NAP = 3.0


class Model:
    """The same steps for every Run of a kind, decided by its run id and step alone."""

    def infer(self, request: InferenceRequest) -> ModelReply:
        if request.run_id.startswith("nap-"):
            if request.step == 1:
                return ModelReply("Napping.", (CallRequest("nap", {"seconds": NAP}),))
            return ModelReply("Rested.", end=EndCauseKind.COMPLETED)
        if request.step == 1:
            return ModelReply(
                "Looking for a table.",
                (CallRequest("lookup", {"cuisine": "thai"}), CallRequest("reserve", {"restaurant": "Baan", "seats": 2})),
            )
        if request.step == 2:
            return ModelReply("Paying the deposit.", (CallRequest("pay", {"amount": 20, "currency": "EUR"}),))
        return ModelReply("Booked.", end=EndCauseKind.COMPLETED)


class Nap:
    """A durable timer: its first start schedules the call ``NAP`` seconds on, its start
    at the due time returns."""

    policy = ToolPolicy.replay()

    def run(self, call: RunCall) -> Returned | Scheduled:
        db = sqlite3.connect(ledger_path(), timeout=30)
        try:
            db.execute(
                "CREATE TABLE IF NOT EXISTS starts (run_id TEXT, tool TEXT, operation_id TEXT, attempt INTEGER, "
                "epoch INTEGER, refused INTEGER)"
            )
            (before,) = db.execute(
                "SELECT count(*) FROM starts WHERE operation_id = ? AND tool = 'nap'", (call.operation_id,)
            ).fetchone()
        finally:
            db.close()
        record_start(call, "nap")
        if before:
            return Returned({"rested": True})
        due = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=NAP)
        return Scheduled(due.isoformat())

    def status(self, operation_id: str, lease_epoch: int | None = None) -> StatusReply:
        return StatusReply(OperationStatus.UNKNOWN)


class HoldApprovals:
    """The payments of ``approve-*`` Runs wait for an operator's approval."""

    def check(self, run_id: str, call: ToolCall) -> GateAnswer:
        if call.tool == "pay" and run_id.startswith("approve-"):
            return Hold(WaitKind.APPROVAL, {"prompt": "pay the deposit?"})
        return Permit()


_TOOLS: dict[str, Tool] = {"lookup": Lookup(), "reserve": Reserve(), "pay": Pay(), "nap": Nap()}

v1 = RuntimeApp(NAME, Model(), ToolRegistry(_TOOLS, max_steps=10), gate=HoldApprovals())
#: the new code: one more tool (the model of this test never calls it)
v2 = RuntimeApp(NAME, Model(), ToolRegistry({**_TOOLS, "note": Lookup()}, max_steps=10), gate=HoldApprovals())


class _McpHost:
    """A push app whose tools an MCP server lists while it runs, with no declared version:
    ``runkernel start`` and ``runkernel worker`` refuse it (``VersionRequired``)."""

    name = NAME
    tools: dict[str, str] = {}
    dynamic_tools = True

    def serve(self, driver: object, action: object) -> None:
        raise AssertionError("never driven: refused before")


mcp_unversioned = _McpHost()
