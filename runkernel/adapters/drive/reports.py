"""What a host's report means to the kernel: the ``Input`` a report stands for when it
answers the action the core handed out, or the ``DriverError`` it is refused with, and
the host metadata a report carries onto the messages it belongs to.

Pure functions and one small holder: the core (``core``) asks the kernel whether the
input is acceptable and keeps the metadata until its commit.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from runkernel.adapters.drive.actions import (
    Action,
    ChildrenRunning,
    CheckStatus,
    Done,
    DriverError,
    Fence,
    HostProtocolError,
    Infer,
    RunCall,
    RunCalls,
    UnknownTool,
    WaitFor,
)
from runkernel.adapters.drive.ports import IdSource
from runkernel.adapters.drive.protocol import (
    CallEnded,
    End,
    Fenced,
    InferenceFailed,
    Inferred,
    Partial,
    Poll,
    Report,
    Resume,
    Status,
)
from runkernel.kernel.policies import Policies
from runkernel.kernel.protocol import (
    EndRequest,
    InferenceResult,
    Input,
    ProposedCall,
    ResumeCommand,
    StatusReport,
    ToolDelegated,
    ToolFailure,
    ToolFinished,
)
from runkernel.kernel.state import ThreadCommit
from runkernel.kernel.values import JsonValue, Role

def report_input(
    action: Action, report: Report, policies: Policies, ids: IdSource, *, refuse_unknown_tools: bool
) -> Input | DriverError:
    """The kernel input ``report`` stands for, if it answers ``action``."""
    if isinstance(report, End):
        return EndRequest(report.cause)
    match action, report:
        case Infer(), Inferred():
            return _inference(report, policies, ids, refuse_unknown_tools=refuse_unknown_tools)
        case RunCall(), CallEnded() if report.call_id == action.call_id:
            return _finished(action, report)
        case RunCalls(), CallEnded() if any(c.call_id == report.call_id for c in action.calls):
            return _finished(next(c for c in action.calls if c.call_id == report.call_id), report)
        case CheckStatus(), Status() if report.call_id == action.call_id:
            return StatusReport(action.call_id, action.attempt, report.status, report.value)
        case WaitFor(), Resume():
            ticket = action.ticket
            return ResumeCommand(action.run_id, ticket.ticket_id, ticket.wait, report.payload)
    return HostProtocolError(
        f"{type(action).__name__} expects {EXPECTED[type(action)]}, "
        f"not {REPORT_NAMES[type(report)]}"
        + (f" for call {getattr(report, 'call_id')!r}" if isinstance(report, (CallEnded, Status)) else ""),
        None,
        action,
    )


def _finished(action: RunCall, report: CallEnded) -> ToolFinished:
    outcome = report.outcome
    if isinstance(outcome, ToolDelegated) and action.delegation is None:
        # the pull-mode runtime's answer too: only a declared tool has a child
        outcome = ToolFailure({
            "type": "UndeclaredDelegation",
            "message": f"tool {action.tool!r} delegated but is not declared a sequential delegation",
        })
    return ToolFinished(action.call_id, action.attempt, outcome, report.reaction)


def _inference(
    report: Inferred, policies: Policies, ids: IdSource, *, refuse_unknown_tools: bool
) -> InferenceResult | DriverError:
    unknown = sorted({c.tool for c in report.calls} - set(policies.tools))
    if unknown and refuse_unknown_tools:
        return UnknownTool(
            f"no policy for tool(s) {', '.join(map(repr, unknown))}: declare each tool's "
            "recovery policy (Driver(store, tools={name: ToolPolicy(...)}))"
        )
    if not report.calls:
        return InferenceResult(report.content, end=report.end, staged=report.staged)
    calls = tuple(
        ProposedCall(
            c.call_id or ids.new_id("call"), c.tool, c.arguments, c.operation_id or ids.new_id("op")
        )
        for c in report.calls
    )
    return InferenceResult(report.content, calls, ids.new_id("batch"), report.end, report.staged)


class HeldMetadata:
    """The host's metadata from reports the kernel accepted, until the commit that holds
    the messages it belongs to (the assistant message of the reply it came with, a
    call's tool-result message when the batch publishes)."""

    def __init__(self) -> None:
        self.assistant: JsonValue = None
        self.tools: dict[str, JsonValue] = {}

    def keep(self, report: Report) -> None:
        if isinstance(report, Inferred) and report.metadata is not None:
            self.assistant = report.metadata
        if isinstance(report, CallEnded) and report.metadata is not None:
            self.tools[report.call_id] = report.metadata

    def put_on(self, commit: ThreadCommit) -> ThreadCommit:
        """``commit`` with the held metadata on its messages (then no longer held)."""
        if self.assistant is None and not self.tools:
            return commit
        messages = []
        for message in commit.messages:
            metadata: JsonValue = None
            if message.role is Role.ASSISTANT and self.assistant is not None:
                metadata, self.assistant = self.assistant, None
            elif message.role is Role.TOOL and message.call_id in self.tools:
                metadata = self.tools.pop(message.call_id)
            messages.append(message if metadata is None else attrs.evolve(message, metadata=metadata))
        return attrs.evolve(commit, messages=tuple(messages))


#: what each action expects, for the refusal of a report that does not answer it
EXPECTED: Mapping[type, str] = {
    Infer: "inferred(...) or inference_failed(...)",
    RunCall: "call_returned / call_failed / call_lost / call_scheduled for its call",
    RunCalls: "call_returned / call_failed / call_lost / call_scheduled for one of its calls",
    CheckStatus: "status(...) for its call",
    Fence: "fenced(call_id) for its call, once the downstream took the fence",
    WaitFor: "resume(payload), or next_action() to apply a queued command",
    ChildrenRunning: "next_action() once a child may have ended, or end() / cancel()",
    Done: "nothing: the Run is Ended",
}

#: how a refusal names each report
REPORT_NAMES: Mapping[type, str] = {
    Inferred: "inferred(...)",
    InferenceFailed: "inference_failed(...)",
    CallEnded: "a call's result",
    Status: "status(...)",
    Fenced: "fenced(...)",
    Resume: "resume(...)",
    End: "end(...)",
    Partial: "checkpoint(...)",
    Poll: "next_action()",
}


__all__ = ["EXPECTED", "REPORT_NAMES", "HeldMetadata", "report_input"]
