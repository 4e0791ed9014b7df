"""Larger realistic legal example traces: several calls, waits, retries, delegation,
cancels, and Runs and Threads interleaved.
"""

from __future__ import annotations

from collections.abc import Callable

from example_log import (
    RETRY3,
    Line,
    Log,
    allow,
    call,
    done,
    end,
    finished,
    text,
    ticket,
    tools,
    wait,
)
from runkernel.kernel.delegation import child_identity
from runkernel.kernel.policies import IndeterminateChoice, Policies, ToolPolicy
from runkernel.kernel.protocol import (
    Approve,
    DeadlinePassed,
    DelegationResult,
    Deny,
    GateVerdict,
    ProvideInput,
    Supply,
    ToolDelegated,
    ToolFailure,
    ToolOutcomeLost,
    ToolScheduled,
)
from runkernel.kernel.state import ParentCall, TypedError
from runkernel.kernel.values import EndCauseKind, WaitKind


# --- larger realistic legal traces ------------------------------------------------------


def big_batch_approvals() -> list[Line]:
    log = Log()
    log.activate("thread-ops", "run-ops-1", "Rotate the keys of all four services.")
    names = ("billing", "search", "auth", "mailer")
    log.feed("run-ops-1", tools(
        "batch-rotate", *(call(f"rotate-{n}", "keys.rotate", {"service": n}) for n in names),
        content="I will rotate the four keys one at a time."))
    log.feed("run-ops-1", wait("rotate-billing", WaitKind.APPROVAL, "ops/billing",
                               request={"prompt": "Rotate billing keys?"}))
    log.resume("run-ops-1", "ops/billing", WaitKind.APPROVAL, Approve())
    log.feed("run-ops-1", done("rotate-billing", 1, {"rotated": True}))
    log.feed("run-ops-1", wait("rotate-search", WaitKind.APPROVAL, "ops/search"))
    log.resume("run-ops-1", "ops/search", WaitKind.APPROVAL, Deny("search is mid-reindex"))
    log.feed("run-ops-1", allow("rotate-auth"))
    log.feed("run-ops-1", done("rotate-auth", 1, {"rotated": True}))
    log.feed("run-ops-1", wait("rotate-mailer", WaitKind.APPROVAL, "ops/mailer",
                               expires_at="2026-12-01T12:00:00Z"))
    log.feed("run-ops-1", DeadlinePassed(ticket("ops/mailer"), "2026-12-01T12:00:01Z"))
    log.feed("run-ops-1", tools("batch-verify", call("verify-1", "keys.verify", {"all": True})))
    log.feed("run-ops-1", GateVerdict("verify-1", Supply({"ok": ["billing", "auth"]})))
    log.feed("run-ops-1", text("Rotated billing and auth; search was denied and the mailer "
                               "approval expired.", EndCauseKind.COMPLETED))
    return log.lines


def big_retries() -> list[Line]:
    log = Log()
    log.activate("thread-etl", "run-etl", "Load yesterday's and today's exports.")
    log.feed("run-etl", tools("batch-load", call("load-1", "fetch", {"day": "2026-11-29"}),
                              call("load-2", "fetch", {"day": "2026-11-30"})), RETRY3)
    log.feed("run-etl", allow("load-1"), RETRY3)
    log.feed("run-etl", finished("load-1", 1, ToolFailure({"http": 502}, retryable=True)), RETRY3)
    log.feed("run-etl", done("load-1", 2, {"rows": 1200}), RETRY3)
    log.feed("run-etl", allow("load-2"), RETRY3)
    for attempt in (1, 2, 3):
        log.feed("run-etl", finished("load-2", attempt, ToolFailure({"http": 503}, retryable=True)),
                 RETRY3)
    log.feed("run-etl", text("Yesterday loaded; today's export keeps failing. Retrying later."),
             RETRY3)
    log.feed("run-etl", tools("batch-later", call("load-3", "fetch", {"day": "2026-11-30"})), RETRY3)
    log.feed("run-etl", allow("load-3"), RETRY3)
    log.feed("run-etl", finished("load-3", 1, ToolOutcomeLost()), RETRY3)
    log.feed("run-etl", text("The second try timed out; check operation op-load-3.",
                             EndCauseKind.COMPLETED), RETRY3)
    return log.lines


def big_delegation() -> list[Line]:
    """A sequential delegation: its child, derived from the parent Run id and the call's
    operation id, is fixed by the Executing commit and names its parent call."""
    log = Log()
    child = child_identity("run-parent", "op-research", concurrent=False)
    log.activate("thread-parent", "run-parent", "Research three vendors and pick one.")
    log.feed("run-parent", tools("batch-research", call("research", "delegate",
                                                          {"task": "compare vendors"})), SEQUENTIAL)
    log.feed("run-parent", allow("research"), SEQUENTIAL)
    log.feed("run-parent", finished("research", 1, ToolDelegated(ticket("parent/child"))), SEQUENTIAL)
    log.activate_child(child.thread_id, child.run_id, "Compare vendors A, B and C.",
                       ParentCall("thread-parent", "run-parent", "research"))
    log.feed(child.run_id, tools("batch-child", call("c-1", "web.search", {"q": "vendor A"}),
                                 call("c-2", "web.search", {"q": "vendor B"}),
                                 call("c-3", "web.search", {"q": "vendor C"})))
    for cid in ("c-1", "c-2", "c-3"):
        log.feed(child.run_id, allow(cid))
        log.feed(child.run_id, done(cid, 1, {"hits": 10}))
    log.feed(child.run_id, text("B is cheapest with good support.", EndCauseKind.COMPLETED))
    log.resume("run-parent", "parent/child", WaitKind.DELEGATION,
               DelegationResult({"choice": "B"}), SEQUENTIAL)
    log.feed("run-parent", text("Vendor B it is.", EndCauseKind.COMPLETED), SEQUENTIAL)
    return log.lines


#: the parent's "delegate" tool hands its work to a child that talks back
SEQUENTIAL = Policies(tools={"delegate": ToolPolicy(sequential_delegation=True)})


def big_cancel_while_awaiting() -> list[Line]:
    log = Log()
    log.activate("thread-1", "run-1", "Sync the CRM, wait for the import, then notify sales.")
    log.feed("run-1", tools("batch-1", call("sync", "crm.sync", {}),
                            call("import", "crm.import", {"file": "leads.csv"}),
                            call("notify", "chat.post", {"channel": "#sales"})))
    log.feed("run-1", allow("sync"))
    log.feed("run-1", done("sync", 1, {"synced": 310}))
    log.feed("run-1", allow("import"))
    log.feed("run-1", finished("import", 1, ToolScheduled(ticket("cancel/poll"),
                                                          "2026-12-01T09:00:00Z")))
    log.feed("run-1", end(EndCauseKind.CANCELLED))
    # The thread continues with a new Run after the cancel.
    log.activate("thread-1", "run-2", "Never mind, just tell me the CRM count.")
    log.feed("run-2", text("The CRM holds 310 synced contacts.", EndCauseKind.COMPLETED))
    return log.lines


def big_two_runs_one_thread() -> list[Line]:
    log = Log()
    log.activate("thread-chat", "run-1", "What's 2+2? Use the calculator.")
    log.feed("run-1", tools("batch-1", call("calc-1", "calc", {"expr": "2+2"})))
    log.feed("run-1", allow("calc-1"))
    log.feed("run-1", done("calc-1", 1, 4))
    log.feed("run-1", text("2+2 = 4.", EndCauseKind.COMPLETED))
    limited = Policies(max_steps=2)
    log.activate("thread-chat", "run-2", "Now keep multiplying by 2.")
    log.feed("run-2", tools("batch-2", call("calc-2", "calc", {"expr": "4*2"})), limited)
    log.feed("run-2", allow("calc-2"), limited)
    log.feed("run-2", done("calc-2", 1, 8), limited)
    log.feed("run-2", text("8. Next would be 16...", ), limited)
    return log.lines


def big_two_threads_interleaved() -> list[Line]:
    log = Log()
    end_run = Policies(on_indeterminate=IndeterminateChoice.END_RUN)
    log.activate("thread-alice", "run-alice", "Order a pizza.")
    log.activate("thread-bob", "run-bob", "Order sushi.")
    log.feed("run-alice", tools("batch-a", call("order-a", "food.order", {"item": "pizza"})))
    log.feed("run-bob", tools("batch-b", call("order-b", "food.order", {"item": "sushi"})),
             end_run)
    log.feed("run-alice", wait("order-a", WaitKind.INPUT, "alice/address"))
    log.feed("run-bob", allow("order-b"), end_run)
    log.resume("run-alice", "alice/address", WaitKind.INPUT, ProvideInput({"street": "Main 1"}))
    log.feed("run-bob", finished("order-b", 1, ToolOutcomeLost()), end_run)
    log.feed("run-alice", done("order-a", 1, {"eta_min": 30}))
    log.feed("run-alice", text("Pizza arrives in 30 minutes.", EndCauseKind.COMPLETED))
    log.activate("thread-bob", "run-bob-2", "Did my sushi order go through?")
    log.feed("run-bob-2", text("I cannot tell; check order op-order-b with the shop.",
                               EndCauseKind.COMPLETED))
    failed = end(EndCauseKind.FAILED, TypedError("ModelError", "context window exceeded"))
    log.activate("thread-alice", "run-alice-2", "And a drink?")
    log.feed("run-alice-2", failed)
    return log.lines


BIG: dict[str, Callable[[], list[Line]]] = {
    "batch-approvals-and-denies": big_batch_approvals,
    "retries-attempt-failed": big_retries,
    "delegation-resumed": big_delegation,
    "cancel-while-awaiting": big_cancel_while_awaiting,
    "two-runs-one-thread": big_two_runs_one_thread,
    "two-threads-interleaved": big_two_threads_interleaved,
}
