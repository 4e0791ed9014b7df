"""CrossHair contracts on the kernel's small helpers (PEP 316 docstring style):
is_terminal, closed_status, call_phase, run_phase, the call-order check,
first_open_call and the resume-command digest. Each is confirmed over all paths.

CrossHair evaluates ``pre:``/``post:`` conditions in this module's namespace, so every
name a condition uses is imported here, even where nothing else uses it. The rules the
contracts keep and how their int parameters decode are in ``contract_builders.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

from contract_builders import (
    AWAITING,
    EXECUTING,
    INDETERMINATE,
    REQUESTED,
    RUN,
    batch_of,
    make_call,
    make_payload,
    make_run_state,
    make_status,
    status_ok,  # noqa: F401  (used only in pre: conditions)
    terminal_code,
)
from runkernel.kernel.edges import (
    TERMINAL_PHASES,  # noqa: F401  (used only in a post: condition)
    CallPhase,
    RunPhase,
    call_phase,
    run_phase,
)
from runkernel.kernel.effects_plan import closed_status
from runkernel.kernel.protocol import Approve, Deny, ExternalResult, ProvideInput, ResumeCommand
from runkernel.kernel.state import (
    CallIndeterminate,  # noqa: F401  (used only in a post: condition)
    CallStatus,
    ToolCall,
    is_terminal,
)
from runkernel.kernel.validate_calls import Illegal, check_order
from runkernel.kernel.values import (
    IndeterminateReason,  # noqa: F401  (used only in a post: condition)
    JsonValue,
    WaitKind,
)


# --- small helpers: confirmed over all paths ------------------------------------------


def check_is_terminal(code: int, attempt: int, variant: int) -> bool:
    """is_terminal holds exactly for Completed and Indeterminate.

    pre: status_ok(code, attempt, variant)
    post: __return__ == (code == 3 or code == 4)
    """
    return is_terminal(make_status(0, code, attempt, variant))


def check_closed_status(code: int, attempt: int, variant: int) -> CallStatus:
    """closed_status (what a call becomes when its Run ends) always returns a terminal
    status, keeps terminal ones and the attempt, and says run_ended exactly for a call
    that never started.

    pre: status_ok(code, attempt, variant)
    post: is_terminal(__return__)
    post: (not terminal_code(code)) or __return__ == make_status(0, code, attempt, variant)
    post: __return__.attempt == attempt
    post: terminal_code(code) or __return__ == CallIndeterminate(attempt, IndeterminateReason.RUN_ENDED if attempt == 0 else IndeterminateReason.OUTCOME_UNKNOWN)
    """
    return closed_status(make_status(0, code, attempt, variant))


def check_call_phase(code: int, attempt: int, variant: int) -> CallPhase:
    """call_phase is total, never Finalized (a batch property), and agrees with
    is_terminal.

    pre: status_ok(code, attempt, variant)
    post: __return__ is (CallPhase.REQUESTED, CallPhase.EXECUTING, CallPhase.AWAITING, CallPhase.COMPLETED, CallPhase.INDETERMINATE)[code]
    post: (__return__ in TERMINAL_PHASES) == is_terminal(make_status(0, code, attempt, variant))
    """
    return call_phase(make_status(0, code, attempt, variant))


def check_run_phase(code: int, variant: int) -> RunPhase:
    """run_phase is total and names the state's machine phase.

    pre: 0 <= code <= 2
    pre: 0 <= variant <= 5
    post: __return__ is (RunPhase.RUNNING, RunPhase.AWAITING, RunPhase.ENDED)[code]
    """
    return run_phase(make_run_state(code, variant))


def order_spec(codes: Sequence[int]) -> bool:
    """The order predicate as I8 words it: terminal calls, then at most one
    in progress, then Requested calls."""
    index = 0
    while index < len(codes) and terminal_code(codes[index]):
        index += 1
    if index < len(codes) and (codes[index] == EXECUTING or codes[index] == AWAITING):
        index += 1
    return all(code == REQUESTED for code in codes[index:])


def canonical_status(index: int, code: int) -> CallStatus:
    return make_status(index, code, 1 if code == EXECUTING or code == INDETERMINATE else 0, 0)


def check_order_predicate(s0: int, s1: int, s2: int) -> bool:
    """validate's call-order check (``check_order``) accepts three calls exactly when
    they follow the spec's order. (Shorter batches are prefixes: every prefix of an
    ordered sequence is ordered, and the check reads calls left to right.)

    pre: 0 <= s0 <= 4 and 0 <= s1 <= 4 and 0 <= s2 <= 4
    post: __return__ == order_spec((s0, s1, s2))
    """
    calls = (make_call(0, canonical_status(0, s0)), make_call(1, canonical_status(1, s1)), make_call(2, canonical_status(2, s2)))
    try:
        check_order(calls)
    except Illegal:
        return False
    return True


def check_first_open_call(s0: int, s1: int) -> ToolCall | None:
    """first_open_call is None iff every call is terminal, else the first call that is
    not terminal; all_terminal agrees.

    pre: 0 <= s0 <= 4 and 0 <= s1 <= 4
    post: (__return__ is None) == batch_of((canonical_status(0, s0), canonical_status(1, s1))).all_terminal()
    post: (__return__ is None) == (terminal_code(s0) and terminal_code(s1))
    post: __return__ is None or __return__.call_id == ("c1" if terminal_code(s0) else "c0")
    """
    return batch_of((canonical_status(0, s0), canonical_status(1, s1))).first_open_call()


def json_value(value: int, reordered: bool) -> JsonValue:
    """A few JSON values; ``reordered`` builds the same value with its object keys
    inserted in another order."""
    if value == 0:
        return None
    if value == 1:
        return 7
    if value == 2:
        return "é"
    if value == 3:
        return {"b": [2], "a": {"y": 1, "x": 0}} if reordered else {"a": {"x": 0, "y": 1}, "b": [2]}
    return [1, {"k": "v"}]


def check_digest_equal(payload: int, value: int) -> tuple[str, str]:
    """Equal ResumeCommands, built separately (object keys inserted in another order),
    have equal digests: 64 hex digits of SHA-256 over the canonical command.

    pre: 0 <= payload <= 5 and 0 <= value <= 4
    post: __return__[0] == __return__[1] and len(__return__[0]) == 64 and all(ch in "0123456789abcdef" for ch in __return__[0])
    """
    kinds = (WaitKind.APPROVAL, WaitKind.APPROVAL, WaitKind.INPUT, WaitKind.EXTERNAL, WaitKind.DELEGATION, WaitKind.SCHEDULED)
    one = ResumeCommand(RUN, "tk-é", kinds[payload], make_payload(payload, json_value(value, False)))
    two = ResumeCommand(RUN, "tk-é", kinds[payload], make_payload(payload, json_value(value, True)))
    assert one == two
    return one.digest(), two.digest()


#: Pairwise different commands: another ticket, wait kind, payload type or value.
DISTINCT_COMMANDS = (
    ResumeCommand(RUN, "tk-c0", WaitKind.APPROVAL, Approve()),
    ResumeCommand(RUN, "tk-c1", WaitKind.APPROVAL, Approve()),
    ResumeCommand(RUN, "tk-c0", WaitKind.APPROVAL, Deny(None)),
    ResumeCommand(RUN, "tk-c0", WaitKind.APPROVAL, Deny("no")),
    ResumeCommand(RUN, "tk-c0", WaitKind.INPUT, ProvideInput("no")),
    ResumeCommand(RUN, "tk-c0", WaitKind.EXTERNAL, ExternalResult("no")),
    ResumeCommand("run-2", "tk-c0", WaitKind.APPROVAL, Approve()),
)


def check_digest_distinct(first: int, second: int) -> bool:
    """Different commands (another run, ticket, wait kind, payload type or value) have
    different digests, so a repeat is told apart from a stale command. Returns whether
    the digests are equal.

    pre: 0 <= first <= 6 and 0 <= second <= 6
    post: __return__ == (first == second)
    """
    return DISTINCT_COMMANDS[first].digest() == DISTINCT_COMMANDS[second].digest()
