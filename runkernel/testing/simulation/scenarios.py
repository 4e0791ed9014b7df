"""The scenario catalogue of ``runkernel simulate``.

Each scenario is a scripted agent Run: what the model answers at each step, which
tools exist with which recovery and retry policies and how their attempts behave, what
the gate says, and what the operator does at each wait. Together they cover text-only
runs, multi-call batches, every wait kind, approvals allowed / denied / expired /
forged, retries, every recovery policy and status answer, cancel / stop / failure in
both Run states, the step limit, the host's Indeterminate choice, checkpoint failures
and a second Run in the same Thread; groups of concurrent delegations and of concurrent
ordinary calls.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs
from attrs import frozen

from runkernel.adapters.drive.ports import GateAnswer, Hold, Provide, Refuse
from runkernel.kernel.policies import IndeterminateChoice, RecoveryMode
from runkernel.kernel.values import EndCauseKind, WaitKind
from runkernel.testing.scripted import (
    CANCEL_DURING,
    DELEGATE,
    FAIL,
    LOST,
    OK,
    RETRY,
    SCHEDULE,
    TRUTH,
    StepScript,
)

# Operator actions at a wait (in the order waits happen). "answer" gives the wait what
# its kind needs: approve, the input, the external answer, the child's result, the timer.
ANSWER, DENY, CANCEL, STOP, FAIL_RUN, LET_EXPIRE = "answer", "deny", "cancel", "stop", "fail", "expire"

PAST = "2026-01-01T00:00:00.000000Z"
SIM_NOW = "2026-06-01T00:00:00.000000Z"
LATER = "2026-06-01T00:05:00.000000Z"


@frozen
class ToolSpec:
    """A simulated tool: policies and per-attempt behaviour."""

    name: str
    mode: RecoveryMode = RecoveryMode.INDETERMINATE
    max_attempts: int = 3
    retry_attempts: int = 1
    replies: tuple[str, ...] = (OK,)
    status_script: tuple[str, ...] = (TRUTH,)
    #: a terminal-only delegation: its calls run concurrently, each with a child Run
    delegation: bool = False
    #: declared concurrent: its consecutive calls form a group (``ToolPolicy.concurrent``)
    concurrent: bool = False


@frozen
class Scenario:
    """One scripted Run (or two, with ``follow_up``)."""

    name: str
    steps: tuple[StepScript, ...]
    tools: tuple[ToolSpec, ...] = ()
    gate: Mapping[str, GateAnswer] = attrs.field(factory=dict, hash=False)
    operator: tuple[str, ...] = ()
    max_steps: int | None = None
    on_indeterminate: IndeterminateChoice = IndeterminateChoice.PUBLISH
    follow_up: bool = False
    checkpoint_failures: bool = False
    #: hooks that stage state, hand request-only context and react to tool results
    hooks: bool = False
    #: cancel the parent once its first concurrent delegation's child has ended
    cancel_while_delegating: bool = False


def _end(text: str = "done") -> StepScript:
    return StepScript(text, end=EndCauseKind.COMPLETED)


def _calls(*tools: str) -> StepScript:
    return StepScript("calling tools", tuple((tool, {"n": i}) for i, tool in enumerate(tools)))


def _tool(
    name: str,
    mode: RecoveryMode,
    *,
    max_attempts: int = 3,
    retry_attempts: int = 1,
    replies: tuple[str, ...] = (OK,),
    status_script: tuple[str, ...] = (TRUTH,),
) -> ToolSpec:
    return ToolSpec(name, mode, max_attempts, retry_attempts, replies, status_script)


_R, _C, _I = RecoveryMode.REPLAY, RecoveryMode.RECONNECT, RecoveryMode.INDETERMINATE


def catalogue() -> tuple[Scenario, ...]:
    """Every scenario, in a fixed order."""
    return (
        Scenario("text_only", (_end("hello"),)),
        Scenario("text_steps", (StepScript("one"), StepScript("two"), _end())),
        Scenario("one_call_indeterminate_tool", (_calls("lookup"), _end()), (_tool("lookup", _I),)),
        Scenario(
            "multi_call_batch",
            (_calls("fetch", "status_api", "send"), _end()),
            (_tool("fetch", _R), _tool("status_api", _C), _tool("send", _I)),
        ),
        Scenario("replay_tool", (_calls("fetch", "fetch"), _end()), (_tool("fetch", _R),)),
        Scenario(
            "replay_exhausted",
            (_calls("fetch"), _end()),
            (_tool("fetch", _R, max_attempts=1),),
        ),
        Scenario("reconnect_truth", (_calls("job"), _end()), (_tool("job", _C),)),
        Scenario(
            "reconnect_running_then_done",
            (_calls("job"), _end()),
            (_tool("job", _C, status_script=("running", "running", TRUTH)),),
        ),
        Scenario("reconnect_failed", (_calls("job"), _end()), (_tool("job", _C, status_script=("failed",)),)),
        Scenario("reconnect_unknown", (_calls("job"), _end()), (_tool("job", _C, status_script=("unknown",)),)),
        Scenario(
            "reconnect_not_found",
            (_calls("job"), _end()),
            (_tool("job", _C, status_script=("not_found", TRUTH)),),
        ),
        Scenario(
            "retry_then_ok",
            (_calls("flaky"), _end()),
            (_tool("flaky", _R, retry_attempts=3, max_attempts=6, replies=(RETRY, RETRY, OK)),),
        ),
        Scenario(
            "retries_exhausted_error",
            (_calls("flaky"), _end()),
            (_tool("flaky", _I, retry_attempts=2, replies=(RETRY,)),),
        ),
        Scenario("permanent_failure", (_calls("broken"), _end()), (_tool("broken", _I, replies=(FAIL,)),)),
        Scenario(
            "outcome_lost_published",
            (_calls("remote", "lookup"), _end()),
            (_tool("remote", _I, replies=(LOST,)), _tool("lookup", _R)),
        ),
        Scenario(
            "outcome_lost_ends_run",
            (_calls("remote", "lookup"), _end()),
            (_tool("remote", _I, replies=(LOST,)), _tool("lookup", _R)),
            on_indeterminate=IndeterminateChoice.END_RUN,
        ),
        Scenario(
            "approval_allowed",
            (_calls("lookup", "pay"), _end()),
            (_tool("lookup", _R), _tool("pay", _I)),
            gate={"pay": Hold(WaitKind.APPROVAL, {"prompt": "pay?"})},
            operator=(ANSWER,),
        ),
        Scenario(
            "approval_denied",
            (_calls("pay", "lookup"), _end()),
            (_tool("lookup", _R), _tool("pay", _I)),
            gate={"pay": Hold(WaitKind.APPROVAL, {"prompt": "pay?"})},
            operator=(DENY,),
        ),
        Scenario(
            "approval_expired",
            (_calls("pay"), _end()),
            (_tool("pay", _I),),
            gate={"pay": Hold(WaitKind.APPROVAL, {"prompt": "pay?"}, expires_at=PAST)},
            operator=(LET_EXPIRE,),
        ),
        Scenario(
            "input_wait",
            (_calls("ask"), _end()),
            (_tool("ask", _R),),
            gate={"ask": Hold(WaitKind.INPUT, {"question": "which file?"})},
            operator=(ANSWER,),
        ),
        Scenario(
            "external_wait",
            (_calls("webhook"), _end()),
            (_tool("webhook", _I),),
            gate={"webhook": Hold(WaitKind.EXTERNAL, {"endpoint": "callback"})},
            operator=(ANSWER,),
        ),
        Scenario(
            "scheduled_by_gate",
            (_calls("report"), _end()),
            (_tool("report", _R),),
            gate={"report": Hold(WaitKind.SCHEDULED, due_at=LATER)},
            operator=(ANSWER,),
        ),
        Scenario(
            "scheduled_by_tool",
            (_calls("poller"), _end()),
            (_tool("poller", _R, replies=(SCHEDULE, OK)),),
            operator=(ANSWER,),
        ),
        Scenario(
            "delegation",
            (_calls("delegate", "lookup"), _end()),
            (_tool("delegate", _I, replies=(DELEGATE,)), _tool("lookup", _R)),
            operator=(ANSWER,),
        ),
        Scenario(
            "blocked_and_supplied",
            (_calls("forbidden", "cached", "lookup"), _end()),
            (_tool("forbidden", _I), _tool("cached", _I), _tool("lookup", _R)),
            gate={"forbidden": Refuse({"policy": "no"}), "cached": Provide({"cached": True})},
        ),
        Scenario(
            "cancel_while_awaiting",
            (_calls("lookup", "pay", "send"), _end()),
            (_tool("lookup", _R), _tool("pay", _I), _tool("send", _I)),
            gate={"pay": Hold(WaitKind.APPROVAL)},
            operator=(CANCEL,),
        ),
        Scenario(
            "stop_while_awaiting",
            (_calls("ask"), _end()),
            (_tool("ask", _R),),
            gate={"ask": Hold(WaitKind.INPUT)},
            operator=(STOP,),
        ),
        Scenario(
            "failure_while_awaiting",
            (_calls("poller", "send"), _end()),
            (_tool("poller", _R, replies=(SCHEDULE, OK)), _tool("send", _I)),
            operator=(FAIL_RUN,),
        ),
        Scenario(
            "cancel_while_running",
            (_calls("fetch", "send"), _end()),
            (_tool("fetch", _R, replies=(CANCEL_DURING,)), _tool("send", _I)),
        ),
        Scenario(
            "step_limit",
            (_calls("fetch"), _calls("fetch"), _calls("fetch"), _end()),
            (_tool("fetch", _R),),
            max_steps=2,
        ),
        Scenario(
            "follow_up_run",
            (_calls("lookup"), _end()),
            (_tool("lookup", _R),),
            follow_up=True,
        ),
        Scenario(
            "checkpoint_failures",
            (StepScript("partial"), _calls("lookup"), _end()),
            (_tool("lookup", _R),),
            checkpoint_failures=True,
        ),
        Scenario(
            "staged_hooks",
            (_calls("fetch", "lookup"), StepScript("thinking"), _end()),
            (_tool("fetch", _R), _tool("lookup", _I)),
            hooks=True,
        ),
        Scenario(
            "concurrent_delegations",
            (_calls("research", "research", "fetch"), _end()),
            (ToolSpec("research", delegation=True), _tool("fetch", _R)),
            hooks=True,
        ),
        Scenario(
            # the gate holds the group's middle member: it waits before its group starts,
            # runs alone once approved, then the other two start together
            "gated_delegation_in_group",
            (_calls("research", "review", "research", "fetch"), _end()),
            (ToolSpec("research", delegation=True), ToolSpec("review", delegation=True), _tool("fetch", _R)),
            gate={"review": Hold(WaitKind.APPROVAL, {"prompt": "review?"})},
            operator=(ANSWER,),
        ),
        Scenario(
            # a group of concurrent calls, one per recovery policy (the replay member
            # retries once while its siblings are Executing), then an ordinary call
            "concurrent_calls",
            (_calls("read", "lookup", "charge", "fetch"), _end()),
            (
                ToolSpec("read", _R, retry_attempts=2, replies=(RETRY, OK), concurrent=True),
                ToolSpec("lookup", _C, concurrent=True),
                ToolSpec("charge", _I, concurrent=True),
                _tool("fetch", _R),
            ),
        ),
        Scenario(
            # the gate holds the group's middle member: it runs alone once approved, then
            # the other two start together
            "gated_call_in_group",
            (_calls("read", "charge", "read"), _end()),
            (ToolSpec("read", _R, concurrent=True), ToolSpec("charge", _I, concurrent=True)),
            gate={"charge": Hold(WaitKind.APPROVAL, {"prompt": "charge?"})},
            operator=(ANSWER,),
        ),
        Scenario(
            # concurrent calls next to terminal-only delegations: two groups, one after the other
            "concurrent_calls_after_delegations",
            (_calls("research", "research", "read", "lookup"), _end()),
            (ToolSpec("research", delegation=True), ToolSpec("read", _R, concurrent=True), ToolSpec("lookup", _C, concurrent=True)),
        ),
        Scenario(
            "concurrent_delegations_cancelled",
            (_calls("research", "research", "fetch"), _end()),
            (ToolSpec("research", delegation=True), _tool("fetch", _R)),
            cancel_while_delegating=True,
        ),
    )
