"""Examples for concurrent ordinary calls (I8 amended): a group of three calls of tools
declared ``concurrent``, gated member by member, started in one commit, ended out of
call order (one retries while the others run), published in call order; and the planted
mistakes (the same starts in a trace whose policies do not say ``concurrent``, a
concurrent call that waits once started).
"""

from __future__ import annotations

from collections.abc import Callable

from example_log import Line, Log, call, done, mutated, text, tools
from runkernel.kernel.decide import decide
from runkernel.kernel.policies import Policies, ToolPolicy
from runkernel.kernel.protocol import Allow, Decision, GateVerdict, ToolFailure, ToolFinished
from runkernel.kernel.values import EndCauseKind

CONCURRENT = Policies(
    tools={
        "search": ToolPolicy.replay(retries=1, concurrent=True),
        "quote": ToolPolicy.reconnect(concurrent=True),
        "notify": ToolPolicy.indeterminate(concurrent=True),
    }
)
RUN = "run-1"


def _started() -> Log:
    """The three calls gated in order (each allow held, nothing committed) and started
    in one commit."""
    log = Log()
    log.activate("thread-1", RUN, "Search, quote and notify at once.")
    log.feed(RUN, tools("batch-1", call("call-1", "search", {"q": "tides"}),
                        call("call-2", "quote", {"item": 7}),
                        call("call-3", "notify", {"to": "ops"})), CONCURRENT)
    for member, held in (("call-1", ()), ("call-2", ("call-1",))):
        decision = decide(log.runs[RUN], GateVerdict(member, Allow(), held), CONCURRENT, self_check=True)
        assert isinstance(decision, Decision) and decision.commit is None  # an allow is held
    log.feed(RUN, GateVerdict("call-3", Allow(), ("call-1", "call-2")), CONCURRENT)  # all three start
    return log


def legal_concurrent_calls() -> list[Line]:
    log = _started()
    log.feed(RUN, done("call-3", 1, {"sent": True}), CONCURRENT)  # the last member ends first
    log.feed(RUN, ToolFinished("call-1", 1, ToolFailure("timeout", retryable=True)), CONCURRENT)  # retries
    log.feed(RUN, done("call-2", 1, {"price": 12}), CONCURRENT)
    log.feed(RUN, done("call-1", 2, {"hits": 3}), CONCURRENT)  # every call terminal: published in order
    log.feed(RUN, text("Searched, quoted, notified.", EndCauseKind.COMPLETED), CONCURRENT)
    return log.lines


def var_started_together_without_the_field() -> tuple[list[Line], str, str]:
    log = _started()

    def sequential(ln: Line) -> None:
        for member in ln["batch"]["calls"]:
            member["policy"].pop("concurrent")

    lines = [mutated(line, sequential) if line.get("batch") else line for line in log.lines]
    return (lines, "calls-one-at-a-time-in-order",
            "three calls whose committed policies do not say concurrent start in one commit.")


def var_concurrent_call_waits() -> tuple[list[Line], str, str]:
    log = _started()
    log.feed(RUN, done("call-2", 1, {"price": 12}), CONCURRENT)
    log.feed(RUN, done("call-3", 1, {"sent": True}), CONCURRENT)

    def schedules(ln: Line) -> None:
        ln["batch"]["calls"][0].update(status="awaiting",
                                       wait={"kind": "scheduled", "correlation": "ticket-planted-0002"})
        ln["disposition"] = {"state": "awaiting", "ticket": {"ticket_id": "ticket-planted-0002",
                                                             "wait": "scheduled", "call_id": "call-1"}}

    last = log.lines[-1]
    planted = mutated(last, schedules)
    planted.update(version=last["version"] + 1, messages=[], events=[])
    log.add(planted)
    return (log.lines, "edge-condition",
            "call-1, declared concurrent, moves Executing -> Awaiting (a concurrent call never waits once started).")


CONCURRENT_LEGAL: dict[str, Callable[[], list[Line]]] = {
    "concurrent-calls-group": legal_concurrent_calls,
}

CONCURRENT_VARIANTS: dict[str, Callable[[], tuple[list[Line], str, str]]] = {
    "calls-one-at-a-time-in-order--started-together-without-concurrent": var_started_together_without_the_field,
    "edge-condition--concurrent-call-waits-once-started": var_concurrent_call_waits,
}
