"""What the model sees of a call's outcome: one documented shape per outcome kind, every
shape told apart by ``kind`` (``tool_result_content``), in what the kernel publishes and
in what a driver hands the host."""

from __future__ import annotations

import pytest

from runkernel import CallRequest, Done, Driver, EndCauseKind, Infer, RunCall, ToolPolicy
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.kernel import RecoveryMode, ToolRecoveryPolicy
from runkernel.kernel import tool_result_content
from runkernel.kernel.state import CallCompleted, CallExecuting, CallIndeterminate, ToolResult
from runkernel.kernel.values import IndeterminateReason, ResultKind


@pytest.mark.parametrize("kind", list(ResultKind), ids=lambda k: k.value)
def test_a_completed_call_shows_its_result_kind_and_value(kind: ResultKind) -> None:
    status = CallCompleted(1, ToolResult(kind, {"any": ["json"]}))
    assert tool_result_content(status, "op-1") == {"kind": kind.value, "value": {"any": ["json"]}}


@pytest.mark.parametrize("reason", list(IndeterminateReason), ids=lambda r: r.value)
def test_an_indeterminate_call_shows_its_reason_and_the_operation_id_to_reconcile(
    reason: IndeterminateReason,
) -> None:
    status = CallIndeterminate(1, reason)
    assert tool_result_content(status, "op-7") == {
        "kind": "indeterminate",
        "reason": reason.value,
        "operation_id": "op-7",
    }


def test_only_a_terminal_call_has_an_outcome_to_show() -> None:
    with pytest.raises(ValueError):
        tool_result_content(CallExecuting(1), "op-1")


def test_the_model_sees_one_shape_per_outcome_in_the_thread() -> None:
    """A returned call and a call closed by the Run's end, as the next Infer shows them."""
    policy = ToolPolicy(ToolRecoveryPolicy(RecoveryMode.INDETERMINATE))
    driver = Driver(MemoryStore(), {"pay": policy, "mail": policy})
    action = driver.start(["pay and mail"])
    assert isinstance(action, Infer)
    action = driver.inferred("on it", [CallRequest("pay", {"to": "A"}), CallRequest("mail", {"to": "B"})])
    assert isinstance(action, RunCall) and action.tool == "pay"
    action = driver.call_returned(action.call_id, {"paid": True})
    assert isinstance(action, RunCall) and action.tool == "mail"
    mail_operation = action.operation_id
    action = driver.end(EndCauseKind.STOPPED)
    assert isinstance(action, Done)
    shown = [m.content for m in driver.messages if m.role.value == "tool"]
    assert shown == [
        {"kind": "output", "value": {"paid": True}},
        {"kind": "indeterminate", "reason": "outcome_unknown", "operation_id": mail_operation},
    ]
