"""A random *kernel driver* for the property tests.

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

Why this module is long: it is one host, the kernel's only one in the property tests;
what it draws at each state (an inference, a gate answer in a group's round, a tool's
or a status answer for any member running, a resume, a crash, a bad input) reads
together with what it remembers between inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from hypothesis import strategies as st

from driver_history import Action, Crash, Ids, Outcome, Step
from runkernel.kernel.decide import decide
from runkernel.kernel.history import NO_HISTORY, RunHistory, commit_keys
from runkernel.kernel.policies import Policies
from runkernel.kernel.protocol import (
    RunGate,
    PAYLOADS_BY_WAIT,
    Activate,
    Allow,
    Approve,
    Block,
    DeadlinePassed,
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
    Running,
    RunSnapshot,
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


@dataclass
class _RunContext:
    """What the (live) host remembers besides committed state; a crash clears it."""

    #: (call id, attempt) whose executor is running right now (several: a concurrent group)
    executing: set[tuple[str, int]] = field(default_factory=set)
    #: (call id, attempt) a reconnect tool was asked ``status`` about
    querying: set[tuple[str, int]] = field(default_factory=set)
    #: the gate question due next (a group's gate round holds the allows so far)
    gate_next: RunGate | None = None
    #: resume commands that were committed, for repeats
    applied: list[ResumeCommand] = field(default_factory=list)
    #: the Run's committed history facts (committed, so a crash keeps them)
    history: RunHistory = NO_HISTORY


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
            ctx.executing, ctx.querying, ctx.gate_next = set(), set(), None
            outcome = recover(state, self.policies, self_check=True, history=ctx.history)
        else:
            outcome = decide(state, action, self.policies, ctx.history, self_check=True)
        self.steps.append(Step(state, action, outcome, self.policies, ctx.history))
        if isinstance(outcome, Rejection):
            assert state is not None, f"activation refused: {outcome}"
            return state
        decision = outcome.decision if isinstance(outcome, RecoveryDecision) else outcome
        commit = decision.commit
        if commit is not None:
            ctx.history = ctx.history.plus(commit_keys(state, commit))
            self.commits.append(commit)
            if isinstance(action, ResumeCommand):
                ctx.applied.append(action)
        # what runs or is asked about still is what is still Executing that attempt
        batch = decision.state.open_batch
        live = {(c.call_id, c.status.attempt) for c in batch.calls if isinstance(c.status, CallExecuting)} if batch else set()
        ctx.executing &= live
        ctx.querying &= live
        ctx.gate_next = None
        for effect in decision.effects:
            if isinstance(effect, Execute):
                ctx.executing.add((effect.call_id, effect.attempt))
            elif isinstance(effect, QueryStatus):
                ctx.querying.add((effect.call_id, effect.attempt))
            elif isinstance(effect, RunGate):
                ctx.gate_next = effect
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
                due = ctx.gate_next
                if due is not None and isinstance(call.status, CallRequested):
                    # the gate question the kernel asked: a group's round holds earlier allows
                    return GateVerdict(due.call.call_id, self.gate_outcome(), due.allowed)
                if isinstance(call.status, CallRequested):
                    return GateVerdict(call.call_id, self.gate_outcome())
                # any call answered next: a concurrent group's members end in any order
                asked = [c for c in batch.calls if isinstance(c.status, CallExecuting)
                         and {(c.call_id, c.status.attempt)} & (ctx.executing | ctx.querying)]
                if asked:
                    member = asked[0] if len(asked) == 1 else self.draw(st.sampled_from(asked))
                    assert isinstance(member.status, CallExecuting)
                    running = (member.call_id, member.status.attempt)
                    if running in ctx.querying:
                        return self.status_report(member, member.status.attempt)
                    return ToolFinished(member.call_id, member.status.attempt, self.tool_outcome())
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
            return ToolDelegated(self.ids("ticket"))
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
