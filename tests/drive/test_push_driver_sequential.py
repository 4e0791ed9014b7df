"""Sequential delegations under the push-mode driver (Step and ToolBatch):
a tool declared ``ToolPolicy(sequential_delegation=True)`` is handed its child's derived
identity in ``RunCall.delegation`` (fixed by the call's Executing commit) and answers
``call_delegated``; the Run then waits for the child's answer. (An undeclared tool that
delegates fails with ``UndeclaredDelegation`` under every host: test_sequential_delegation.py.)"""

from __future__ import annotations

import pytest

from push_children import all_lines, judged_legal
from push_host import SHELLS, make_shell
from runkernel.adapters.drive.actions import CallRequest, Done, Infer, RunCall, WaitFor
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.kernel.delegation import child_identity
from runkernel.kernel.policies import ToolPolicy
from runkernel.kernel.protocol import DelegationResult
from runkernel.kernel.state import CallAwaiting, CallCompleted, CallExecuting
from runkernel.kernel.values import EndCauseKind, WaitKind
from runkernel.testing import CountingIds

DECLARED = {"ask": ToolPolicy(sequential_delegation=True), "plain": ToolPolicy()}


@pytest.mark.parametrize("kind", SHELLS)
def test_a_declared_tool_is_told_its_derived_child_and_the_run_waits_for_it(kind: str) -> None:
    store = MemoryStore()
    driver = make_shell(kind, store, ids=CountingIds("id"), tools=DECLARED)
    assert isinstance(driver.start(["go"], thread_id="t1", run_id="r1"), Infer)
    action = driver.inferred("", [CallRequest("ask", {"q": "which?"}, "c1"), CallRequest("plain", 2, "c2")])
    assert isinstance(action, RunCall) and action.call_id == "c1"
    expected = child_identity("r1", action.operation_id, concurrent=False)
    assert action.delegation == expected
    state = store.run("r1")
    assert state is not None and state.batch is not None
    call = state.batch.calls[0]
    assert call.status == CallExecuting(1) and call.delegation == expected  # fixed by the Executing commit
    waiting = driver.call_delegated("c1")
    assert isinstance(waiting, WaitFor) and waiting.wait.kind is WaitKind.DELEGATION
    assert waiting.wait.child == expected.run_id and waiting.call.call_id == "c1"
    state = store.run("r1")
    assert state is not None and state.batch is not None and isinstance(state.batch.calls[0].status, CallAwaiting)
    # a fresh driver hands the same wait from the store alone
    again = make_shell(kind, store, ids=CountingIds("again"), tools=DECLARED)
    assert again.pick_up("r1") == waiting
    plain = again.resume(DelegationResult({"pick": "B"}))
    assert isinstance(plain, RunCall) and plain.call_id == "c2" and plain.delegation is None
    step = again.call_returned("c2", 2)
    assert isinstance(step, Infer) and step.step == 2
    done = again.inferred("B it is", end=EndCauseKind.COMPLETED)
    assert isinstance(done, Done) and done.cause.kind is EndCauseKind.COMPLETED
    finalized = [c.batch for c in store.commits("t1") if c.batch is not None and c.batch.finalized][0]
    status = finalized.calls[0].status
    assert isinstance(status, CallCompleted) and status.result.value == {"pick": "B"}
    assert judged_legal(store) == ""
    print(f"sequential [{kind}]: child {expected.run_id}, {len(all_lines(store))} commits, legal")
