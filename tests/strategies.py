"""Hypothesis strategies and a random *kernel driver*.

The driver plays the host of ``runkernel.kernel``: it starts each Run with
``decide(None, Activate(...))``, then repeatedly looks at the latest committed
snapshot, picks an input that makes sense there (an inference result, a gate
verdict, a tool outcome, a status report after a crash, a resume command, a
deadline, an end request, now and then something the kernel must refuse) and feeds
it to ``decide``. At any point it may "crash": everything but the committed snapshot
is forgotten and ``recover(state, policies)`` decides how to go on. Every commit the
kernel makes is collected, so a drawn :class:`History` is a set of committed
Threads (several Runs in sequence per Thread, several Threads, interleaved) plus the
log of every step, rejections included.

Ids come from one counter per history, so they are unique across Threads and Runs
(ticket ids are never reused anywhere, as the trace checker demands).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

from hypothesis import reject
from hypothesis import strategies as st

from runkernel.kernel.decide import decide
from runkernel.kernel.policies import (
    IndeterminateChoice,
    Policies,
    RecoveryMode,
    RetryPolicy,
    ToolPolicy,
    ToolRecoveryPolicy,
)
from runkernel.kernel.protocol import (
    PAYLOADS_BY_WAIT,
    Activate,
    Allow,
    Approve,
    Block,
    DeadlinePassed,
    Decision,
    DelegationResult,
    Deny,
    EndRequest,
    Execute,
    ExternalResult,
    GateOutcome,
    GateVerdict,
    InferenceResult,
    Input,
    OperationStatus,
    ProposedCall,
    ProvideInput,
    QueryStatus,
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
from runkernel.kernel.recover import RecoveryDecision, recover
from runkernel.kernel.rules import Rejection
from runkernel.kernel.state import (
    Awaiting,
    CallExecuting,
    CallRequested,
    EndCause,
    Ended,
    Message,
    RunSnapshot,
    Running,
    ThreadCommit,
    ToolCall,
    TypedError,
)
from runkernel.kernel.values import EndCauseKind, Role, WaitKind

#: Tools whose policies are drawn, and one that no policy names (the safe default).
LISTED_TOOLS = ("search", "send_email", "charge_card")
TOOLS = LISTED_TOOLS + ("unlisted",)

#: An approval deadline, and clock readings before and after it.
EXPIRES_AT = "2030-01-01T00:00:00Z"
BEFORE_DEADLINE = "2029-12-31T23:59:59Z"
AFTER_DEADLINE = "2030-01-01T00:00:01Z"
DUE_AT = "2030-06-01T00:00:00Z"


@dataclass(frozen=True)
class Crash:
    """Not a kernel input: the host dies and restarts with ``recover(state, policies)``."""


Action: TypeAlias = Input | Crash
Outcome: TypeAlias = Decision | Rejection | RecoveryDecision


@dataclass(frozen=True)
class Step:
    """One thing the driver did: the committed state it acted on and what came back."""

    before: RunSnapshot | None
    action: Action
    outcome: Outcome
    policies: Policies

    @property
    def decision(self) -> Decision | None:
        """The Decision of ``decide`` or ``recover``; None for a rejection."""
        if isinstance(self.outcome, RecoveryDecision):
            return self.outcome.decision
        if isinstance(self.outcome, Decision):
            return self.outcome
        return None

    @property
    def commit(self) -> ThreadCommit | None:
        decision = self.decision
        return decision.commit if decision is not None else None


@dataclass(frozen=True)
class History:
    """Everything one drawn session of the driver produced."""

    #: every commit, Threads interleaved, each Thread's commits in order
    commits: tuple[ThreadCommit, ...]
    #: each Thread's commits on their own
    threads: tuple[tuple[ThreadCommit, ...], ...]
    #: every step of every Thread (Thread by Thread)
    steps: tuple[Step, ...]

    def snapshots(self) -> list[RunSnapshot]:
        """Every committed state the driver acted on or reached."""
        out: list[RunSnapshot] = []
        for step in self.steps:
            if step.before is not None:
                out.append(step.before)
            if step.decision is not None:
                out.append(step.decision.state)
        return out


class Ids:
    """Unique ids for one history: ``kind-N`` from a single counter."""

    def __init__(self) -> None:
        self._counter = itertools.count(1)

    def __call__(self, kind: str) -> str:
        return f"{kind}-{next(self._counter)}"


@st.composite
def policies(draw: st.DrawFn) -> Policies:
    """Varied host policies: a drawn recovery mode and limits per tool, step limit, choice."""
    tools: dict[str, ToolPolicy] = {}
    for name in LISTED_TOOLS:
        mode = draw(st.sampled_from(RecoveryMode))
        tools[name] = ToolPolicy(
            recovery=ToolRecoveryPolicy(mode, max_attempts=draw(st.sampled_from([1, 2, 3]))),
            retry=RetryPolicy(max_attempts=draw(st.sampled_from([1, 2, 3]))),
        )
    return Policies(
        tools=tools,
        max_steps=draw(st.none() | st.integers(1, 4)),
        on_indeterminate=draw(st.sampled_from(IndeterminateChoice)),
    )


@dataclass
class _RunContext:
    """What the (live) host remembers besides committed state; a crash clears it."""

    #: (call id, attempt) whose executor is running right now
    executing: tuple[str, int] | None = None
    #: (call id, attempt) a reconnect tool was asked ``status`` about
    querying: tuple[str, int] | None = None
    #: resume commands that were committed, for repeats
    applied: list[ResumeCommand] = field(default_factory=list)


class Driver:
    """Drives the kernel through the Runs of one Thread with drawn inputs."""

    def __init__(
        self,
        draw: st.DrawFn,
        ids: Ids,
        policies: Policies,
        thread_id: str,
        max_actions: int,
    ) -> None:
        self.draw = draw
        self.ids = ids
        self.policies = policies
        self.thread_id = thread_id
        self.max_actions = max_actions
        self.version = 0
        self.commits: list[ThreadCommit] = []
        self.steps: list[Step] = []

    # --- driving ---------------------------------------------------------------

    def run_thread(self, runs: int) -> None:
        for index in range(runs):
            self.run_one(last=index == runs - 1)

    def run_one(self, *, last: bool) -> RunSnapshot:
        """One Run from activation to Ended (or, for the last Run, maybe not)."""
        run_id = self.ids("run")
        activate = Activate(
            self.thread_id, run_id, self.version, (Message(Role.USER, f"task of {run_id}"),)
        )
        ctx = _RunContext()
        state = self.act(None, activate, ctx)
        assert state is not None, "the activation of a fresh run was refused"
        for _ in range(self.max_actions):
            if isinstance(state.state, Ended):
                break
            state = self.act(state, self.choose(state, ctx), ctx)
        if isinstance(state.state, Ended):
            for _ in range(self.draw(st.integers(0, 2))):
                state = self.act(state, self.after_end(state, ctx), ctx)
        elif not last:
            state = self.act(state, EndRequest(EndCause(EndCauseKind.STOPPED)), ctx)
            assert isinstance(state.state, Ended), "a stop request did not end the run"
        self.version = state.version
        return state

    def act(self, state: RunSnapshot | None, action: Action, ctx: _RunContext) -> RunSnapshot:
        """Feed one action; a rejection leaves the committed state as it was."""
        outcome: Outcome
        if isinstance(action, Crash):
            assert state is not None
            ctx.executing = None
            ctx.querying = None
            outcome = recover(state, self.policies)
        else:
            outcome = decide(state, action, self.policies)
        self.steps.append(Step(state, action, outcome, self.policies))
        if isinstance(outcome, Rejection):
            assert state is not None, f"activation refused: {outcome}"
            return state
        decision = outcome.decision if isinstance(outcome, RecoveryDecision) else outcome
        commit = decision.commit
        if commit is not None:
            self.commits.append(commit)
            ctx.querying = None
            if isinstance(action, ResumeCommand):
                ctx.applied.append(action)
        for effect in decision.effects:
            if isinstance(effect, Execute):
                ctx.executing = (effect.call_id, effect.attempt)
            elif isinstance(effect, QueryStatus):
                ctx.querying = (effect.call_id, effect.attempt)
        return decision.state

    # --- choosing an input -------------------------------------------------------

    def pick(self, options: Sequence[str]) -> str:
        """Draw one option; earlier options are what Hypothesis shrinks towards."""
        return self.draw(st.sampled_from(options))

    def choose(self, state: RunSnapshot, ctx: _RunContext) -> Action:
        run = state.state
        if isinstance(run, Awaiting):
            return self.while_awaiting(state, run, ctx)
        batch = state.open_batch
        if batch is None:
            kind = self.pick(["tools", "tools", "tools", "tools", "text", "final", "crash", "end", "odd"])
            if kind == "tools":
                return self.tool_inference()
            if kind == "text":
                return InferenceResult("thinking")
            if kind == "final":
                return InferenceResult("answer", end=self.draw(st.sampled_from(_INFERENCE_ENDS)))
        else:
            call = batch.first_open_call()
            executing = call is not None and isinstance(call.status, CallExecuting)
            kind = self.pick(
                ["call"] * 6 + ["crash", "end", "odd"] + (["crash", "crash"] if executing else [])
            )
            if kind == "call" and call is not None:
                if isinstance(call.status, CallRequested):
                    return GateVerdict(call.call_id, self.gate_outcome())
                if isinstance(call.status, CallExecuting):
                    running = (call.call_id, call.status.attempt)
                    if ctx.querying == running:
                        return self.status_report(call, call.status.attempt)
                    if ctx.executing == running:
                        return ToolFinished(call.call_id, call.status.attempt, self.tool_outcome())
            if kind == "call":
                kind = "crash"  # nothing runs: only a restart can move this run on
        if kind == "crash":
            return Crash()
        if kind == "end":
            return EndRequest(self.end_cause(_RUNNING_ENDS))
        return self.odd_input(state)

    def while_awaiting(self, state: RunSnapshot, run: Awaiting, ctx: _RunContext) -> Action:
        ticket = run.ticket
        kind = self.pick(
            ["resume", "resume", "resume", "bad-resume", "bad-resume", "deadline", "crash", "end", "odd"]
        )
        if kind == "resume":
            return ResumeCommand(state.run_id, ticket.ticket_id, ticket.wait, self.payload_for(ticket.wait))
        if kind == "bad-resume":
            return self.bad_resume(state, run)
        if kind == "deadline":
            now = self.draw(st.sampled_from([AFTER_DEADLINE, BEFORE_DEADLINE]))
            return DeadlinePassed(ticket.ticket_id, now)
        if kind == "crash":
            return Crash()
        if kind == "end":
            return EndRequest(self.end_cause(_AWAITING_ENDS))
        return self.odd_input(state)

    def after_end(self, state: RunSnapshot, ctx: _RunContext) -> Action:
        kind = self.pick(["crash", "repeat", "odd", "end"])
        if kind == "repeat" and ctx.applied:
            return self.draw(st.sampled_from(ctx.applied))
        if kind == "end":
            return EndRequest(self.end_cause(_RUNNING_ENDS))
        if kind == "odd":
            return self.odd_input(state)
        return Crash()

    # --- input builders ------------------------------------------------------------

    def tool_inference(self) -> InferenceResult:
        count = self.draw(st.integers(1, 3))
        calls = tuple(
            ProposedCall(
                self.ids("call"),
                self.draw(st.sampled_from(TOOLS)),
                {"index": index},
                self.ids("op"),
            )
            for index in range(count)
        )
        return InferenceResult("calling tools", calls=calls, batch_id=self.ids("batch"))

    def gate_outcome(self) -> GateOutcome:
        kind = self.pick(["allow", "allow", "wait", "allow", "block", "supply", "wait"])
        if kind == "allow":
            return Allow()
        if kind == "block":
            return Block("not allowed")
        if kind == "supply":
            return Supply({"cached": True})
        wait = self.draw(st.sampled_from(_GATE_WAITS))
        expires = self.draw(st.sampled_from([EXPIRES_AT, None])) if wait is WaitKind.APPROVAL else None
        due = DUE_AT if wait is WaitKind.SCHEDULED else None
        return RequireWait(wait, self.ids("ticket"), {"ask": "may I?"}, expires_at=expires, due_at=due)

    def tool_outcome(self) -> ToolOutcome:
        kind = self.pick(["output", "output", "failure", "failure", "delegated", "scheduled", "lost"])
        if kind == "output":
            return ToolOutput({"ok": True})
        if kind == "failure":
            return ToolFailure({"error": "boom"}, retryable=self.draw(st.sampled_from([True, False])))
        if kind == "delegated":
            return ToolDelegated(self.ids("ticket"), self.ids("child-run"))
        if kind == "scheduled":
            return ToolScheduled(self.ids("ticket"), DUE_AT)
        return ToolOutcomeLost()

    def status_report(self, call: ToolCall, attempt: int) -> StatusReport:
        status = self.draw(st.sampled_from(OperationStatus))
        return StatusReport(call.call_id, attempt, status, value={"status": status.value})

    def payload_for(self, wait: WaitKind) -> ResumePayload:
        if wait is WaitKind.APPROVAL:
            approvals: list[ResumePayload] = [Approve(), Approve(), Deny("no")]
            return self.draw(st.sampled_from(approvals))
        if wait is WaitKind.INPUT:
            return ProvideInput({"answer": 42})
        if wait is WaitKind.EXTERNAL:
            return ExternalResult({"external": "done"})
        if wait is WaitKind.DELEGATION:
            return DelegationResult({"child": "answer"})
        return TimerFired()

    def bad_resume(self, state: RunSnapshot, run: Awaiting) -> ResumeCommand:
        ticket = run.ticket
        how = self.pick(["ticket", "kind", "payload", "run"])
        if how == "ticket":
            return ResumeCommand(state.run_id, self.ids("ticket"), ticket.wait, self.payload_for(ticket.wait))
        if how == "kind":
            other = self.draw(st.sampled_from([k for k in WaitKind if k is not ticket.wait]))
            return ResumeCommand(state.run_id, ticket.ticket_id, other, self.payload_for(other))
        if how == "payload":
            wrong = [k for k in WaitKind if not set(PAYLOADS_BY_WAIT[k]) & set(PAYLOADS_BY_WAIT[ticket.wait])]
            payload = self.payload_for(self.draw(st.sampled_from(wrong)))
            return ResumeCommand(state.run_id, ticket.ticket_id, ticket.wait, payload)
        return ResumeCommand(self.ids("run"), ticket.ticket_id, ticket.wait, self.payload_for(ticket.wait))

    def end_cause(self, kinds: Sequence[EndCauseKind]) -> EndCause:
        kind = self.draw(st.sampled_from(kinds))
        if kind is EndCauseKind.FAILED:
            return EndCause(kind, TypedError("ToolCrashed", "the host gave up"))
        return EndCause(kind)

    def odd_input(self, state: RunSnapshot) -> Input:
        """An input that, in most states, the kernel must refuse."""
        batch = state.batch
        current = state.open_batch.first_open_call() if state.open_batch else None
        known_call = current.call_id if current else self.ids("call")
        attempt = current.status.attempt if current else 1
        options: list[Input] = [
            Activate(state.thread_id, state.run_id, state.version, ()),
            GateVerdict(self.ids("call"), Allow()),
            GateVerdict(known_call, Block("late")),
            ToolFinished(known_call, attempt + 5, ToolOutput("late")),
            ToolFinished(self.ids("call"), 1, ToolOutput("stray")),
            StatusReport(known_call, attempt + 5, OperationStatus.DONE, "stray"),
            InferenceResult("no batch id", calls=(ProposedCall(self.ids("call"), "search", {}, self.ids("op")),)),
            InferenceResult("failed by inference", end=EndCauseKind.FAILED),
            ResumeCommand(state.run_id, self.ids("ticket"), WaitKind.APPROVAL, Approve()),
            DeadlinePassed(self.ids("ticket"), AFTER_DEADLINE),
            InferenceResult(
                "dup",
                calls=(
                    ProposedCall("dup-call", "search", {}, self.ids("op")),
                    ProposedCall("dup-call", "search", {}, self.ids("op")),
                ),
                batch_id=self.ids("batch"),
            ),
        ]
        if batch is not None:
            options.append(
                InferenceResult(
                    "reused batch id",
                    calls=(ProposedCall(self.ids("call"), "search", {}, self.ids("op")),),
                    batch_id=batch.batch_id,
                )
            )
        if not isinstance(state.state, Running) or state.open_batch is not None:
            options.append(InferenceResult("too early"))
        return self.draw(st.sampled_from(options))


_INFERENCE_ENDS = (
    EndCauseKind.COMPLETED,
    EndCauseKind.COMPLETED,
    EndCauseKind.CANCELLED,
    EndCauseKind.STOPPED,
    EndCauseKind.STEP_LIMIT,
    EndCauseKind.OUTCOME_UNKNOWN,
)
_RUNNING_ENDS = (
    EndCauseKind.CANCELLED,
    EndCauseKind.STOPPED,
    EndCauseKind.FAILED,
    EndCauseKind.COMPLETED,
)
#: The last one is refused by the kernel: an Awaiting run ends only by cancel, stop, failure.
_AWAITING_ENDS = (
    EndCauseKind.CANCELLED,
    EndCauseKind.STOPPED,
    EndCauseKind.FAILED,
    EndCauseKind.COMPLETED,
)
#: Gate waits; delegation is refused (only a tool delegates).
_GATE_WAITS = (
    WaitKind.APPROVAL,
    WaitKind.INPUT,
    WaitKind.EXTERNAL,
    WaitKind.SCHEDULED,
    WaitKind.DELEGATION,
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
def resume_commands(draw: st.DrawFn, state: RunSnapshot) -> ResumeCommand:
    """Resume commands for ``state``'s Run: any ticket it used, any kind, any payload."""
    tickets = sorted(state.tickets_used) + ["ticket-x"]
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
def any_input(draw: st.DrawFn, state: RunSnapshot) -> Input:
    """Any well-formed input for ``state``'s Run, legal or not (for purity tests)."""
    batch = state.batch
    call_ids = [c.call_id for c in batch.calls] if batch else []
    call_id = draw(st.sampled_from(call_ids + ["stranger"]))
    attempt = draw(st.integers(0, 4))
    tickets = sorted(state.tickets_used) + ["ticket-x"]
    ticket_id = draw(st.sampled_from(tickets))
    wait = draw(st.sampled_from(WaitKind))
    end = draw(st.sampled_from(EndCauseKind))
    cause = EndCause(end, TypedError("E", "m") if end is EndCauseKind.FAILED else None)
    outcomes: list[ToolOutcome] = [
        ToolOutput(1),
        ToolFailure("e", True),
        ToolFailure("e", False),
        ToolDelegated("ticket-d", "child"),
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
        draw(resume_commands(state)),
        DeadlinePassed(ticket_id, draw(st.sampled_from([AFTER_DEADLINE, BEFORE_DEADLINE]))),
        EndRequest(cause),
    ]
    return draw(st.sampled_from(options))


#: Ids a hostile or buggy host might send: empty, a lone surrogate, arbitrary text.
ODD_IDS = st.sampled_from(["", "\ud800", "x"]) | st.text(max_size=3)
#: JSON-ish values, including a string that is not valid Unicode.
ODD_VALUES = st.none() | st.integers() | st.text(max_size=3) | st.just("\ud800") | st.just({"k": "\udfff"})


@st.composite
def fuzz_input(draw: st.DrawFn, state: RunSnapshot | None) -> Input:
    """Any input that can be constructed, with odd ids and values, or known ones."""
    known = [state.run_id, state.thread_id] if state else []
    if state is not None and state.batch is not None:
        known += [c.call_id for c in state.batch.calls]
    if state is not None:
        known += sorted(state.tickets_used)
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
        st.builds(ToolDelegated, ids, ids),
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
            return GateVerdict(draw(ids), draw(verdicts))
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
