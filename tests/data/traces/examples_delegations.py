"""Examples for concurrent terminal-only delegations (I8, I15): a parent whose
two delegations run together, their children in Threads of their own, then an ordinary
call; and the planted mistakes (a child's identity changed, a child activated twice, a
result that is not the child's terminus, an ordinary call started while a delegation runs).
"""

from __future__ import annotations

from collections.abc import Callable

from example_log import Example, Line, Log, allow, call, done, mutated, text, tools, wait
from runkernel.kernel.decide import decide
from runkernel.kernel.delegation import child_identity, terminus
from runkernel.kernel.policies import Policies, ToolPolicy
from runkernel.kernel.protocol import Allow, Approve, ChildEnded, Decision, GateVerdict, RunGate
from runkernel.kernel.state import EndCause, ParentCall
from runkernel.kernel.values import EndCauseKind, JsonValue, WaitKind

DELEGATING = Policies(tools={"research": ToolPolicy(terminal_only_delegation=True)})
PARENT = "run-1"
D1 = child_identity(PARENT, "op-call-1", concurrent=True)
D2 = child_identity(PARENT, "op-call-2", concurrent=True)


def _answer(child_thread: str, child_run: str, final: str) -> JsonValue:
    return terminus(child_thread, child_run, EndCause(EndCauseKind.COMPLETED), final)


def _started() -> Log:
    """Both delegations Executing, both children activated."""
    log = Log()
    log.activate("thread-1", PARENT, "Research two topics, then fetch the report.")
    log.feed(PARENT, tools("batch-1", call("call-1", "research", {"topic": "tides"}),
                           call("call-2", "research", {"topic": "winds"}),
                           call("call-3", "fetch", {"report": 7})), DELEGATING)
    _gate_round(log)
    log.feed(PARENT, GateVerdict("call-2", Allow(), ("call-1",)), DELEGATING)  # both start in one commit
    log.activate_child(D1.thread_id, D1.run_id, {"topic": "tides"}, ParentCall("thread-1", PARENT, "call-1"))
    log.activate_child(D2.thread_id, D2.run_id, {"topic": "winds"}, ParentCall("thread-1", PARENT, "call-2"))
    return log


def _gate_round(log: Log) -> None:
    """The gate allows call-1: an Allow in a group's gate round commits nothing."""
    held = decide(log.runs[PARENT], allow("call-1"), DELEGATING, self_check=True)
    assert isinstance(held, Decision) and held.commit is None
    assert held.effects == (RunGate(log.runs[PARENT].batch.calls[1], ("call-1",)),)  # type: ignore[union-attr]


def _member_runs_alone() -> Log:
    """call-1 waited for approval before its group started; approved, it runs alone."""
    log = Log()
    log.activate("thread-1", PARENT, "Research two topics, then fetch the report.")
    log.feed(PARENT, tools("batch-1", call("call-1", "research", {"topic": "tides"}),
                           call("call-2", "research", {"topic": "winds"}),
                           call("call-3", "fetch", {"report": 7})), DELEGATING)
    log.feed(PARENT, wait("call-1", WaitKind.APPROVAL, "gate-1"), DELEGATING)
    log.resume(PARENT, "gate-1", WaitKind.APPROVAL, Approve(), DELEGATING)
    log.activate_child(D1.thread_id, D1.run_id, {"topic": "tides"}, ParentCall("thread-1", PARENT, "call-1"))
    return log


def legal_gated_delegation_in_group() -> list[Line]:
    log = _member_runs_alone()
    log.feed(D1.run_id, text("Tides follow the moon.", EndCauseKind.COMPLETED))
    log.feed(PARENT, ChildEnded("call-1", 1, _answer(D1.thread_id, D1.run_id, "Tides follow the moon.")), DELEGATING)
    log.feed(PARENT, allow("call-2"), DELEGATING)  # a new gate round: call-2 is its only member
    log.activate_child(D2.thread_id, D2.run_id, {"topic": "winds"}, ParentCall("thread-1", PARENT, "call-2"))
    log.feed(D2.run_id, text("Winds follow pressure.", EndCauseKind.COMPLETED))
    log.feed(PARENT, ChildEnded("call-2", 1, _answer(D2.thread_id, D2.run_id, "Winds follow pressure.")), DELEGATING)
    log.feed(PARENT, allow("call-3"), DELEGATING)
    log.feed(PARENT, done("call-3", 1, {"report": "ok"}), DELEGATING)
    log.feed(PARENT, text("Both topics researched.", EndCauseKind.COMPLETED), DELEGATING)
    return log.lines


def ex_group_gate() -> Example:
    log = _member_runs_alone()

    def call_2_waits(ln: Line) -> None:
        ln["batch"]["calls"][1].update(status="awaiting", attempt=0,
                                       wait={"kind": "approval", "correlation": "ticket-planted-0001"})
        ln["disposition"] = {"state": "awaiting", "ticket": {"ticket_id": "ticket-planted-0001",
                                                             "wait": "approval", "call_id": "call-2"}}
        ln["events"] = []

    resumed = [line for line in log.lines if line["run_id"] == PARENT][-1]  # call-1 runs alone
    planted = mutated(resumed, call_2_waits)
    planted.update(version=resumed["version"] + 1, messages=[])
    log.add(planted)
    return (legal_gated_delegation_in_group(), log.lines,
            "the Run becomes Awaiting (call-2 waits for approval) while call-1 of its group is Executing.")


def var_members_started_one_at_a_time() -> tuple[list[Line], str, str]:
    log = Log()
    log.activate("thread-1", PARENT, "Research two topics, then fetch the report.")
    log.feed(PARENT, tools("batch-1", call("call-1", "research", {"topic": "tides"}),
                           call("call-2", "research", {"topic": "winds"}),
                           call("call-3", "fetch", {"report": 7})), DELEGATING)
    _gate_round(log)

    def only_call_1(ln: Line) -> None:
        second = ln["batch"]["calls"][1]
        second.pop("delegation")
        second.update(status="requested", attempt=0)

    log.add(mutated(log.peek(PARENT, GateVerdict("call-2", Allow(), ("call-1",)), DELEGATING), only_call_1))
    return (log.lines, "group-gated-before-it-starts",
            "call-1 starts on its own while call-2 of its group is still Requested (allowed members start together).")


def _first_child_ended() -> Log:
    log = _started()
    log.feed(D1.run_id, text("Tides follow the moon.", EndCauseKind.COMPLETED))
    return log


def legal_concurrent_delegations() -> list[Line]:
    log = _first_child_ended()
    log.feed(PARENT, ChildEnded("call-1", 1, _answer(D1.thread_id, D1.run_id, "Tides follow the moon.")), DELEGATING)
    log.feed(D2.run_id, text("Winds follow pressure.", EndCauseKind.COMPLETED))
    log.feed(PARENT, ChildEnded("call-2", 1, _answer(D2.thread_id, D2.run_id, "Winds follow pressure.")), DELEGATING)
    log.feed(PARENT, allow("call-3"), DELEGATING)
    log.feed(PARENT, done("call-3", 1, {"report": "ok"}), DELEGATING)
    log.feed(PARENT, text("Both topics researched.", EndCauseKind.COMPLETED), DELEGATING)
    return log.lines


def ex_delegation_fixed() -> Example:
    log = _started()
    log.add(mutated(log.peek(PARENT, ChildEnded("call-1", 1, None), DELEGATING),
                    lambda ln: ln["batch"]["calls"][1]["delegation"].__setitem__("run_id", "someone-else")))
    return (legal_concurrent_delegations(), log.lines,
            "call-2's delegation names another child than the one its Executing commit fixed.")


def ex_child_once() -> Example:
    log = _started()
    first = next(line for line in log.lines if line["run_id"] == D1.run_id)

    def another_child(ln: Line) -> None:
        ln.update(thread_id="thread-again", run_id="run-again")

    log.add(mutated(first, another_child))
    return (legal_concurrent_delegations(), log.lines,
            "a second child Run is activated for call-1, which already activated its child.")


def ex_child_terminus() -> Example:
    log = _first_child_ended()
    log.add(mutated(log.peek(PARENT, ChildEnded("call-1", 1, _answer(D1.thread_id, D1.run_id, "Tides are random.")),
                             DELEGATING), lambda ln: None))
    return (legal_concurrent_delegations(), log.lines,
            "call-1 completes with a final answer its child never gave: not the child's terminus.")


def var_ordinary_call_while_delegation_runs() -> tuple[list[Line], str, str]:
    log = _first_child_ended()

    def start_call_3(ln: Line) -> None:
        ln["batch"]["calls"][2].update(status="executing", attempt=1)

    log.add(mutated(log.peek(PARENT, ChildEnded("call-1", 1, _answer(D1.thread_id, D1.run_id, "Tides follow the moon.")),
                             DELEGATING), start_call_3))
    return (log.lines, "calls-one-at-a-time-in-order",
            "call-3, an ordinary call, starts while call-2's delegation still runs.")


DELEGATION_RULES: dict[str, Callable[[], Example]] = {
    "delegation-child-fixed": ex_delegation_fixed,
    "child-activated-once": ex_child_once,
    "result-is-child-terminus": ex_child_terminus,
    "group-gated-before-it-starts": ex_group_gate,
}

DELEGATION_LEGAL: dict[str, Callable[[], list[Line]]] = {
    "concurrent-delegations-parent-and-children": legal_concurrent_delegations,
    "gated-delegation-in-a-group": legal_gated_delegation_in_group,
}

DELEGATION_VARIANTS: dict[str, Callable[[], tuple[list[Line], str, str]]] = {
    "calls-one-at-a-time-in-order--ordinary-call-while-delegation-runs": var_ordinary_call_while_delegation_runs,
    "group-gated-before-it-starts--members-started-one-at-a-time": var_members_started_one_at_a_time,
}
