"""Hypothesis strategies over the kernel: host policies, histories drawn by driving the
kernel with the random host of ``kernel_driver.py`` (the History and Step records are in
``driver_history.py``), and inputs for a committed state: any well-formed one, legal or
not, and fuzzed ones with odd ids and values.
"""

from __future__ import annotations

from hypothesis import reject
from hypothesis import strategies as st

from driver_history import History, Ids, Step
from kernel_driver import AFTER_DEADLINE, BEFORE_DEADLINE, DUE_AT, EXPIRES_AT, LISTED_TOOLS, Driver
from runkernel.kernel.history import NO_HISTORY, RunHistory
from runkernel.kernel.policies import (
    IndeterminateChoice,
    Policies,
    RecoveryMode,
    RetryPolicy,
    ToolPolicy,
    ToolRecoveryPolicy,
)
from runkernel.kernel.protocol import (
    Activate,
    Allow,
    Approve,
    Block,
    DeadlinePassed,
    DelegationResult,
    Deny,
    EndRequest,
    ExternalResult,
    GateOutcome,
    GateVerdict,
    InferenceResult,
    Input,
    OperationStatus,
    ProposedCall,
    ProvideInput,
    RequireWait,
    ResumeCommand,
    ResumePayload,
    StatusReport,
    Supply,
    TimerFired,
    ToolDelegated,
    ToolFailure,
    ToolFinished,
    ToolOutcome,
    ToolOutcomeLost,
    ToolOutput,
    ToolScheduled,
)
from runkernel.kernel.state import EndCause, Message, RunSnapshot, ThreadCommit, TypedError
from runkernel.kernel.values import EndCauseKind, Role, WaitKind


@st.composite
def policies(draw: st.DrawFn) -> Policies:
    """Varied host policies: a drawn recovery mode, limits and concurrency per tool, step
    limit, choice."""
    tools: dict[str, ToolPolicy] = {}
    for name in LISTED_TOOLS:
        mode = draw(st.sampled_from(RecoveryMode))
        tools[name] = ToolPolicy(
            recovery=ToolRecoveryPolicy(mode, max_attempts=draw(st.sampled_from([1, 2, 3]))),
            retry=RetryPolicy(max_attempts=draw(st.sampled_from([1, 2, 3]))),
            # consecutive calls of concurrent tools form a group (I8 amended)
            concurrent=draw(st.booleans()),
        )
    return Policies(
        tools=tools,
        max_steps=draw(st.none() | st.integers(1, 4)),
        on_indeterminate=draw(st.sampled_from(IndeterminateChoice)),
    )


@st.composite
def histories(
    draw: st.DrawFn,
    max_threads: int = 2,
    max_runs: int = 3,
    max_actions: int = 20,
) -> History:
    """Drive the kernel through 1..max_threads Threads of 1..max_runs Runs each."""
    ids = Ids()
    threads: list[list[ThreadCommit]] = []
    steps: list[Step] = []
    for _ in range(draw(st.integers(1, max_threads))):
        driver = Driver(draw, ids, draw(policies()), ids("thread"), max_actions)
        driver.run_thread(draw(st.integers(1, max_runs)))
        threads.append(driver.commits)
        steps.extend(driver.steps)
    order = [index for index, commits in enumerate(threads) for _ in commits]
    if len(threads) > 1:
        order = draw(st.permutations(order))
    cursors = [iter(commits) for commits in threads]
    merged = tuple(next(cursors[index]) for index in order)
    return History(merged, tuple(tuple(c) for c in threads), tuple(steps))


def thread_commits(max_threads: int = 2, max_runs: int = 3) -> st.SearchStrategy[list[ThreadCommit]]:
    """Only the commits: several Runs in sequence per Thread, several Threads."""
    return histories(max_threads=max_threads, max_runs=max_runs).map(lambda h: list(h.commits))


@st.composite
def resume_commands(draw: st.DrawFn, state: RunSnapshot, history: RunHistory) -> ResumeCommand:
    """Resume commands for ``state``'s Run: any ticket it used, any kind, any payload."""
    tickets = sorted(history.tickets) + ["ticket-x"]
    payloads: list[ResumePayload] = [
        Approve(), Deny("r"), ProvideInput(1), ExternalResult(2), DelegationResult(3), TimerFired()
    ]
    return ResumeCommand(
        draw(st.sampled_from([state.run_id, "other-run"])),
        draw(st.sampled_from(tickets)),
        draw(st.sampled_from(WaitKind)),
        draw(st.sampled_from(payloads)),
    )


@st.composite
def any_input(draw: st.DrawFn, state: RunSnapshot, history: RunHistory) -> Input:
    """Any well-formed input for ``state``'s Run, legal or not (for purity tests)."""
    batch = state.batch
    call_ids = [c.call_id for c in batch.calls] if batch else []
    call_id = draw(st.sampled_from(call_ids + ["stranger"]))
    attempt = draw(st.integers(0, 4))
    tickets = sorted(history.tickets) + ["ticket-x"]
    ticket_id = draw(st.sampled_from(tickets))
    wait = draw(st.sampled_from(WaitKind))
    end = draw(st.sampled_from(EndCauseKind))
    cause = EndCause(end, TypedError("E", "m") if end is EndCauseKind.FAILED else None)
    outcomes: list[ToolOutcome] = [
        ToolOutput(1),
        ToolFailure("e", True),
        ToolFailure("e", False),
        ToolDelegated("ticket-d"),
        ToolScheduled("ticket-s", DUE_AT),
        ToolOutcomeLost(),
    ]
    outcome = draw(st.sampled_from(outcomes))
    verdicts: list[GateOutcome] = [
        Allow(), Block("b"), Supply("s"), RequireWait(wait, "ticket-g", expires_at=EXPIRES_AT)
    ]
    verdict = draw(st.sampled_from(verdicts))
    batch_id = draw(st.sampled_from(([batch.batch_id] if batch else []) + ["batch-x", None]))
    calls = tuple(
        ProposedCall(f"new-call-{i}", "search", {}, f"new-op-{i}") for i in range(draw(st.integers(0, 2)))
    )
    options: list[Input] = [
        Activate(state.thread_id, state.run_id, state.version, ()),
        InferenceResult("text", calls=calls, batch_id=batch_id, end=draw(st.none() | st.just(end))),
        GateVerdict(call_id, verdict),
        ToolFinished(call_id, attempt, outcome),
        StatusReport(call_id, attempt, draw(st.sampled_from(OperationStatus)), "v"),
        draw(resume_commands(state, history)),
        DeadlinePassed(ticket_id, draw(st.sampled_from([AFTER_DEADLINE, BEFORE_DEADLINE]))),
        EndRequest(cause),
    ]
    return draw(st.sampled_from(options))


#: Ids a hostile or buggy host might send: empty, a lone surrogate, arbitrary text.
ODD_IDS = st.sampled_from(["", "\ud800", "x"]) | st.text(max_size=3)
#: JSON-ish values, including a string that is not valid Unicode.
ODD_VALUES = st.none() | st.integers() | st.text(max_size=3) | st.just("\ud800") | st.just({"k": "\udfff"})


@st.composite
def fuzz_input(draw: st.DrawFn, state: RunSnapshot | None, history: RunHistory = NO_HISTORY) -> Input:
    """Any input that can be constructed, with odd ids and values, or known ones."""
    known = [state.run_id, state.thread_id] if state else []
    if state is not None and state.batch is not None:
        known += [c.call_id for c in state.batch.calls]
    if state is not None:
        known += sorted(history.tickets)
    ids = ODD_IDS | st.sampled_from(known) if known else ODD_IDS
    value = ODD_VALUES
    payloads: st.SearchStrategy[ResumePayload] = st.one_of(
        st.just(Approve()),
        st.builds(Deny, value),
        st.builds(ProvideInput, value),
        st.builds(ExternalResult, value),
        st.builds(DelegationResult, value),
        st.just(TimerFired()),
    )
    outcomes: st.SearchStrategy[ToolOutcome] = st.one_of(
        st.builds(ToolOutput, value),
        st.builds(ToolFailure, value, st.booleans()),
        st.builds(ToolDelegated, ids),
        st.builds(ToolScheduled, ids, ids),
        st.just(ToolOutcomeLost()),
    )
    verdicts: st.SearchStrategy[GateOutcome] = st.one_of(
        st.just(Allow()),
        st.builds(Block, value),
        st.builds(Supply, value),
        st.builds(RequireWait, st.sampled_from(WaitKind), ids, value, st.none() | ids, st.none() | ids),
    )
    roles = st.sampled_from(Role)
    messages = st.lists(
        roles.flatmap(
            lambda role: st.builds(
                Message, st.just(role), value, st.none(), ids if role is Role.TOOL else st.none()
            )
        ),
        max_size=2,
    ).map(tuple)
    calls = st.lists(st.builds(ProposedCall, ids, ids, value, ids), max_size=2).map(tuple)
    version = st.integers(-1, 3) | st.just(state.version if state else 0)
    kind = draw(st.sampled_from([
        "activate", "inference", "gate", "finished", "status", "resume", "deadline", "end"
    ]))
    try:
        if kind == "activate":
            return Activate(draw(ids), draw(ids), draw(version), draw(messages))
        if kind == "inference":
            end = draw(st.none() | st.sampled_from(EndCauseKind))
            return InferenceResult(draw(value), draw(calls), draw(st.none() | ids), end)
        if kind == "gate":
            return GateVerdict(draw(ids), draw(verdicts), draw(st.lists(ids, max_size=2).map(tuple)))
        if kind == "finished":
            return ToolFinished(draw(ids), draw(st.integers(-1, 4)), draw(outcomes))
        if kind == "status":
            return StatusReport(
                draw(ids), draw(st.integers(-1, 4)), draw(st.sampled_from(OperationStatus)),
                draw(value),
            )
        if kind == "resume":
            return ResumeCommand(draw(ids), draw(ids), draw(st.sampled_from(WaitKind)), draw(payloads))
        if kind == "deadline":
            return DeadlinePassed(draw(ids), draw(ids))
        cause = draw(st.sampled_from(EndCauseKind))
        error = TypedError(draw(ids), "m") if cause is EndCauseKind.FAILED else None
        return EndRequest(EndCause(cause, error))
    except ValueError:
        reject()  # the input type itself refuses this shape: decide never sees it
