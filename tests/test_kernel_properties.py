"""Property tests of the kernel, driven by the random host in ``strategies.py``.

Run with the ``ci`` profile by default; ``HYPOTHESIS_PROFILE=deep`` explores more.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import assume, given, note
from hypothesis import strategies as st

from runkernel.kernel.codec import commit_from_json, commit_to_json
from runkernel.kernel.decide import decide
from runkernel.kernel.edges import CallPhase, call_phase, run_phase
from runkernel.kernel.policies import (
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
    Commit,
    DeadlinePassed,
    Decision,
    DelegationResult,
    Deny,
    DeliverTerminus,
    EndRequest,
    Execute,
    GateVerdict,
    InferenceResult,
    Input,
    OperationStatus,
    ProposedCall,
    QueryStatus,
    RequestInference,
    RequireWait,
    ResumeCommand,
    StatusReport,
    ToolDelegated,
    ToolFailure,
    ToolFinished,
    ToolOutput,
    ToolScheduled,
)
from runkernel.kernel.recover import RecoveryRow, recover
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import (
    ActiveToolBatch,
    Awaiting,
    CallAwaiting,
    CallExecuting,
    CallIndeterminate,
    CallRequested,
    EndCause,
    Ended,
    Message,
    Running,
    RunSnapshot,
    ThreadCommit,
    is_terminal,
)
from runkernel.kernel.values import EndCauseKind, IndeterminateReason, Role, WaitKind
from runkernel.specs.checker import Verdict, check_commits, check_lines
from runkernel.specs.machines import RunMachine, ToolCallMachine, spec_edges, state_names
from strategies import (
    Crash,
    History,
    Step,
    any_input,
    fuzz_input,
    histories,
    policies,
    resume_commands,
)

RUN_STATES = frozenset(state_names(RunMachine))
CALL_STATES = frozenset(state_names(ToolCallMachine))
RUN_EDGES = frozenset((e.source, e.target) for e in spec_edges(RunMachine))
CALL_EDGES = frozenset((e.source, e.target) for e in spec_edges(ToolCallMachine))


# --- helpers ---------------------------------------------------------------------------


def assert_spec_state(state: RunSnapshot) -> None:
    """Only states of the spec's machines, shaped as the design says."""
    assert run_phase(state.state).value in RUN_STATES
    batch = state.batch
    awaiting = []
    if batch is not None:
        for call in batch.calls:
            phase = CallPhase.FINALIZED if batch.finalized else call_phase(call.status)
            assert phase.value in CALL_STATES
            if batch.finalized:
                assert is_terminal(call.status), f"finalized batch holds open call {call}"
            if isinstance(call.status, CallAwaiting):
                awaiting.append(call)
    if isinstance(state.state, Awaiting):
        assert [c.call_id for c in awaiting] == [state.state.ticket.call_id]
    else:
        assert not awaiting, "a call waits while its Run does not"
    if isinstance(state.state, Ended):
        assert batch is None or batch.finalized, "an Ended Run keeps an open batch"


def assert_spec_edges(before: RunSnapshot | None, commit: ThreadCommit) -> None:
    """The commit moves the Run and each call along edges of the spec's machines."""
    source = run_phase(before.state).value if before is not None else None
    assert (source, run_phase(commit.disposition).value) in RUN_EDGES
    old = before.batch if before is not None else None
    new = commit.batch
    if new is None:
        return
    if old is None or old.batch_id != new.batch_id:
        for call in new.calls:
            assert (None, call_phase(call.status).value) in CALL_EDGES
        return
    for old_call, new_call in zip(old.calls, new.calls):
        if old_call.status != new_call.status:
            edge = (call_phase(old_call.status).value, call_phase(new_call.status).value)
            assert edge in CALL_EDGES, f"{new_call.call_id}: {edge} is no spec edge"
    if new.finalized and not old.finalized:
        for call in new.calls:
            assert (call_phase(call.status).value, CallPhase.FINALIZED.value) in CALL_EDGES


def encode(commits: Iterator[ThreadCommit] | tuple[ThreadCommit, ...]) -> list[dict[str, Any]]:
    return [commit_to_json(c) for c in commits]


def to_lines(objects: list[dict[str, Any]]) -> list[bytes]:
    return [json.dumps(o).encode("utf-8") for o in objects]


def decided_steps(history: History) -> Iterator[Step]:
    """Steps where ``decide`` (not ``recover``) acted on a committed state."""
    for step in history.steps:
        if step.before is not None and not isinstance(step.action, Crash):
            yield step


# --- every commit is legal, every state is a spec state ----------------------------------


@given(histories())
def test_every_commit_the_driver_makes_is_legal(history: History) -> None:
    """Drawing the history already ran decide/recover: any exception (KernelBug) fails here."""
    finding = check_commits(history.commits)
    assert finding.verdict is Verdict.LEGAL, finding.report("driver")
    assert finding.commits == len(history.commits)
    assert finding.threads == len(history.threads)
    for thread in history.threads:
        versions = [c.version for c in thread]
        assert versions == list(range(1, len(thread) + 1))


@given(histories())
def test_decide_and_recover_yield_only_spec_states_and_edges(history: History) -> None:
    for step in history.steps:
        decision = step.decision
        if decision is None:
            continue
        assert_spec_state(decision.state)
        commits = [e.commit for e in decision.effects if isinstance(e, Commit)]
        assert len(commits) <= 1, "one decision commits at most once"
        if commits:
            assert_spec_edges(step.before, commits[0])
            assert decision.state.version == commits[0].version
        else:
            assert decision.state == step.before, "a decision without a commit changed state"


@given(histories())
def test_a_run_never_commits_more_inference_results_than_its_step_limit(history: History) -> None:
    for step in history.steps:
        commit = step.commit
        limit = step.policies.max_steps
        if commit is not None and limit is not None:
            assert commit.step <= limit, f"step {commit.step} committed under max_steps={limit}"


@given(histories(), st.data())
def test_decide_never_raises_on_any_input_it_can_be_given(history: History, data: st.DataObject) -> None:
    """Odd ids and values get a typed rejection (or cannot be built at all), never a crash."""
    state = data.draw(st.none() | st.sampled_from(history.snapshots()))
    pristine = copy.deepcopy(state)
    event = data.draw(fuzz_input(state))
    outcome = decide(state, event, history.steps[0].policies)
    assert isinstance(outcome, (Decision, Rejection))
    assert state == pristine


# --- rejections change nothing -------------------------------------------------------------


@given(histories())
def test_a_rejection_leaves_the_state_unchanged(history: History) -> None:
    rejected = [s for s in decided_steps(history) if isinstance(s.outcome, Rejection)]
    for step in rejected:
        assert step.before is not None and not isinstance(step.action, Crash)
        before = copy.deepcopy(step.before)
        again = decide(step.before, step.action, step.policies)
        assert again == step.outcome, "decide is not deterministic"
        assert step.before == before, "decide changed the snapshot it refused to act on"


@given(histories(), st.data())
def test_a_refused_input_does_not_change_what_a_valid_one_does(history: History, data: st.DataObject) -> None:
    valid = [s for s in decided_steps(history) if isinstance(s.outcome, Decision)]
    assume(valid)
    step = data.draw(st.sampled_from(valid))
    assert step.before is not None and not isinstance(step.action, Crash)
    state = step.before
    pristine = copy.deepcopy(state)
    bad = data.draw(any_input(state))
    outcome = decide(state, bad, step.policies)
    note(f"other input {bad!r} -> {outcome!r}")
    assert state == pristine
    if isinstance(outcome, Rejection):
        assert decide(state, step.action, step.policies) == step.outcome
        assert decide(pristine, step.action, step.policies) == step.outcome


def resume_should_commit(state: RunSnapshot, command: ResumeCommand) -> bool:
    """I14: Awaiting, same Run, ticket, wait kind and payload type match, not applied yet."""
    run = state.state
    return (
        isinstance(run, Awaiting)
        and command.run_id == state.run_id
        and command.ticket_id == run.ticket.ticket_id
        and command.kind is run.ticket.wait
        and isinstance(command.payload, PAYLOADS_BY_WAIT[run.ticket.wait])
    )


@given(histories(), st.data())
def test_a_resume_commits_iff_the_run_awaits_that_ticket_kind_and_payload(
    history: History, data: st.DataObject
) -> None:
    for step in decided_steps(history):
        if isinstance(step.action, ResumeCommand):
            assert step.before is not None
            committed = isinstance(step.outcome, Decision) and step.outcome.commit is not None
            assert committed == resume_should_commit(step.before, step.action), step
    awaiting = [s.before for s in decided_steps(history) if s.before is not None and isinstance(s.before.state, Awaiting)]
    for state in data.draw(st.lists(st.sampled_from(awaiting), max_size=5)) if awaiting else []:
        command = data.draw(resume_commands(state))
        outcome = decide(state, command)
        committed = isinstance(outcome, Decision) and outcome.commit is not None
        assert committed == resume_should_commit(state, command), (command, outcome)
        if committed:
            assert isinstance(outcome, Decision) and outcome.commit is not None
            events = [e for e in outcome.commit.events if e.type == "resumed"]
            assert len(events) == 1 and events[0].data["digest"] == command.digest()
            assert isinstance(outcome.state.state, Running)


# --- recovery ------------------------------------------------------------------------------


def check_recovery(state: RunSnapshot, policies: Policies) -> None:
    first = recover(state, policies)
    assert recover(copy.deepcopy(state), policies) == first, "recover is not deterministic"
    assert recover(state, policies) == first
    decision = first.decision
    assert_spec_state(decision.state)
    effects = decision.effects
    commits = [e.commit for e in effects if isinstance(e, Commit)]
    if isinstance(state.state, Ended):
        assert first.row is RecoveryRow.ENDED
        assert effects == (DeliverTerminus(state.state.cause, redelivery=True),)
        return
    for effect in effects:
        if isinstance(effect, RequestInference):
            # the open batch is settled (finalized) before the model is asked again
            assert decision.state.open_batch is None, "inference requested with an open batch"
            assert isinstance(decision.state.state, Running)
    if commits:
        commit = commits[0]
        assert_spec_edges(state, commit)
        old, new = state.batch, commit.batch
        if old is not None and new is not None and old.batch_id == new.batch_id:
            for before, after in zip(old.calls, new.calls):
                if isinstance(before.status, CallExecuting):
                    assert not isinstance(after.status, CallRequested), "Executing turned Requested"
                if is_terminal(before.status):
                    assert after.status == before.status, "recovery changed a terminal call"
    open_batch = state.open_batch
    current = open_batch.first_open_call() if open_batch else None
    if current is not None and isinstance(current.status, CallExecuting):
        # the seed's row for a call found Executing{n}: the tool's fixed policy
        attempt = current.status.attempt
        policy = policies.for_tool(current.tool).recovery
        after_call = None
        if commits and commits[0].batch is not None:
            after_call = commits[0].batch.call(current.call_id)
        if policy.mode is RecoveryMode.REPLAY and attempt < policy.max_attempts:
            assert after_call is not None and after_call.status == CallExecuting(attempt + 1)
            assert any(isinstance(e, Execute) and e.attempt == attempt + 1 for e in effects)
        elif policy.mode is RecoveryMode.RECONNECT:
            assert not commits
            assert QueryStatus(current.call_id, current.tool, current.operation_id, attempt) in effects
        else:
            reason = (
                IndeterminateReason.ATTEMPTS_EXHAUSTED
                if policy.mode is RecoveryMode.REPLAY
                else IndeterminateReason.OUTCOME_UNKNOWN
            )
            assert after_call is not None
            assert after_call.status == CallIndeterminate(attempt, reason)
            assert not any(isinstance(e, Execute) for e in effects)
    tools = {c.call_id: c.tool for c in state.batch.calls} if state.batch else {}
    for effect in effects:
        if isinstance(effect, Execute):
            # I5 and I9: a restart starts an executor only to replay, after committing it
            assert policies.for_tool(tools[effect.call_id]).recovery.mode is RecoveryMode.REPLAY
            started = decision.state.batch.call(effect.call_id) if decision.state.batch else None
            assert started is not None and started.status == CallExecuting(effect.attempt)
            assert commits, "an executor started without a commit"
        if isinstance(effect, QueryStatus):
            assert policies.for_tool(tools[effect.call_id]).recovery.mode is RecoveryMode.RECONNECT
            assert not commits, "asking a reconnect tool for its status commits nothing"


@given(histories(), policies())
def test_recover_is_deterministic_and_settles_batches_first(history: History, other: Policies) -> None:
    seen: set[int] = set()  # snapshots hold JSON values: not hashable, deduplicated by identity
    for step in history.steps:
        for state in (step.before, step.decision.state if step.decision else None):
            if state is None or id(state) in seen:
                continue
            seen.add(id(state))
            check_recovery(state, step.policies)
            check_recovery(state, other)


# --- traces --------------------------------------------------------------------------------


@given(histories())
def test_legal_traces_pass_the_checker_and_round_trip(history: History) -> None:
    objects = encode(history.commits)
    finding = check_lines(to_lines(objects))
    assert finding.verdict is Verdict.LEGAL, finding.report("trace")
    assert finding.commits == len(history.commits)
    for commit, obj in zip(history.commits, objects):
        assert commit_from_json(json.loads(json.dumps(obj))) == commit


class Script:
    """Feeds scripted inputs to one Run of a Thread and keeps every commit."""

    def __init__(self, thread_id: str, policies: Policies, version: int = 0) -> None:
        self.thread_id = thread_id
        self.policies = policies
        self.version = version
        self.state: RunSnapshot | None = None
        self.commits: list[ThreadCommit] = []

    def _take(self, decision: Decision) -> None:
        if decision.commit is not None:
            self.commits.append(decision.commit)
        self.state = decision.state
        self.version = decision.state.version

    def start(self, run_id: str) -> Script:
        self.state = None
        return self.feed(Activate(self.thread_id, run_id, self.version, (Message(Role.USER, "go"),)))

    def feed(self, *events: Input) -> Script:
        for event in events:
            outcome = decide(self.state, event, self.policies)
            assert isinstance(outcome, Decision), f"{event} refused: {outcome}"
            self._take(outcome)
        return self

    def crash(self) -> Script:
        assert self.state is not None
        self._take(recover(self.state, self.policies).decision)
        return self


def _tools(batch_id: str, *calls: tuple[str, str]) -> InferenceResult:
    proposed = tuple(ProposedCall(call_id, tool, {"call": call_id}, f"op-{call_id}") for call_id, tool in calls)
    return InferenceResult("using tools", calls=proposed, batch_id=batch_id)


SCRIPT_POLICIES = Policies(
    tools={
        "search": ToolPolicy(ToolRecoveryPolicy(RecoveryMode.REPLAY, 2), RetryPolicy(2)),
        "send_email": ToolPolicy(ToolRecoveryPolicy(RecoveryMode.RECONNECT)),
        "charge_card": ToolPolicy(ToolRecoveryPolicy(RecoveryMode.INDETERMINATE)),
    }
)


def scripted_trace() -> tuple[ThreadCommit, ...]:
    """A hand-written trace that offers a place for every mutation of the catalogue."""
    a = Script("thread-a", SCRIPT_POLICIES)
    a.start("run-a1").feed(
        _tools("b1", ("c1", "search"), ("c2", "send_email"), ("c3", "charge_card")),
        GateVerdict("c1", Allow()),
        ToolFinished("c1", 1, ToolFailure("flaky", retryable=True)),
        ToolFinished("c1", 2, ToolOutput("found")),
        GateVerdict("c2", RequireWait(WaitKind.APPROVAL, "ticket-1", expires_at="2030-01-01T00:00:00Z")),
        ResumeCommand("run-a1", "ticket-1", WaitKind.APPROVAL, Approve()),
    ).crash().feed(
        StatusReport("c2", 1, OperationStatus.DONE, "sent"),
        GateVerdict("c3", Allow()),
        ToolFinished("c3", 1, ToolOutput("charged")),
        InferenceResult("thinking"),
        _tools("b2", ("c4", "search"), ("c5", "search")),
        GateVerdict("c4", RequireWait(WaitKind.INPUT, "ticket-2")),
        EndRequest(EndCause(EndCauseKind.CANCELLED)),
    )
    a_first = len(a.commits)
    a.start("run-a2").feed(
        _tools("b3", ("c6", "send_email"), ("c7", "charge_card")),
        GateVerdict("c6", Allow()),
        ToolFinished("c6", 1, ToolDelegated("ticket-3", "child-run")),
        ResumeCommand("run-a2", "ticket-3", WaitKind.DELEGATION, DelegationResult("child says hi")),
        GateVerdict("c7", Block("over budget")),
        InferenceResult("done", end=EndCauseKind.COMPLETED),
    )
    b = Script("thread-b", SCRIPT_POLICIES)
    b.start("run-b1").feed(
        _tools("b4", ("c8", "charge_card"), ("c9", "search")),
        GateVerdict("c8", Allow()),
    ).crash().feed(
        GateVerdict("c9", Allow()),
        EndRequest(EndCause(EndCauseKind.STOPPED)),
    )
    # interleave: thread b's commits between the two runs of thread a
    return tuple(a.commits[:a_first] + b.commits + a.commits[a_first:])


Lines = list[dict[str, Any]]
Edit = Callable[[Lines], None]


@dataclass(frozen=True)
class Site:
    """One place to break a legal trace: the edit, and the 1-based line and rule it must
    be reported with. Edits are applied lazily, to a copy, only for the site tested."""

    edit: Edit
    line: int
    rule: Rule

    def mutate(self, lines: Lines) -> Lines:
        mutated = copy.deepcopy(lines)
        self.edit(mutated)
        return mutated


@dataclass(frozen=True)
class Context:
    """The legal trace, with each line's previous line of the same Run."""

    lines: Lines
    commits: tuple[ThreadCommit, ...]
    prev: list[int | None]

    @classmethod
    def of(cls, commits: tuple[ThreadCommit, ...]) -> Context:
        last: dict[str, int] = {}
        prev: list[int | None] = []
        for index, commit in enumerate(commits):
            prev.append(last.get(commit.run_id))
            last[commit.run_id] = index
        return cls(encode(commits), commits, prev)

    def open_before(self, index: int) -> bool:
        """The Run's previous commit left its batch open."""
        p = self.prev[index]
        if p is None:
            return False
        batch = self.commits[p].batch
        return batch is not None and not batch.finalized

    def prev_batch(self, index: int) -> ActiveToolBatch:
        p = self.prev[index]
        assert p is not None
        batch = self.commits[p].batch
        assert batch is not None
        return batch


Mutation = Callable[[Context], Iterator[Site]]


def skip_version(ctx: Context) -> Iterator[Site]:
    for k in range(len(ctx.lines)):
        def edit(lines: Lines, k: int = k) -> None:
            lines[k]["version"] += 1
        yield Site(edit, k + 1, Rule.VERSION)


def duplicate_line(ctx: Context) -> Iterator[Site]:
    for k in range(len(ctx.lines)):
        def edit(lines: Lines, k: int = k) -> None:
            lines.insert(k + 1, copy.deepcopy(lines[k]))
        yield Site(edit, k + 2, Rule.VERSION)


def change_terminal_result_later(ctx: Context) -> Iterator[Site]:
    for k in range(len(ctx.lines)):
        if not ctx.open_before(k):
            continue
        for j, call in enumerate(ctx.prev_batch(k).calls):
            if is_terminal(call.status):
                def edit(lines: Lines, k: int = k, j: int = j) -> None:
                    target = lines[k]["batch"]["calls"][j]
                    if "result" in target:
                        target["result"]["value"] = {"rewritten": True}
                    else:
                        target["reason"] = "run_ended" if target["reason"] != "run_ended" else "outcome_unknown"
                yield Site(edit, k + 1, Rule.TERMINAL_IMMUTABLE)


def change_finalized_result_later(ctx: Context) -> Iterator[Site]:
    for k, commit in enumerate(ctx.commits):
        p = ctx.prev[k]
        if p is None or commit.batch is None:
            continue
        old = ctx.commits[p].batch
        if old is None or not old.finalized or old.batch_id != commit.batch.batch_id:
            continue
        def edit(lines: Lines, k: int = k) -> None:
            target = lines[k]["batch"]["calls"][0]
            target.pop("reason", None)
            target["status"] = "completed"
            target["result"] = {"kind": "output", "value": "rewritten"}
        yield Site(edit, k + 1, Rule.BATCH_IDENTITY)


def bump_attempt_by_two(ctx: Context) -> Iterator[Site]:
    for k, commit in enumerate(ctx.commits):
        if not ctx.open_before(k) or commit.batch is None:
            continue
        for j, (old, new) in enumerate(zip(ctx.prev_batch(k).calls, commit.batch.calls)):
            if isinstance(new.status, CallExecuting) and old.status != new.status:
                def edit(lines: Lines, k: int = k, j: int = j, attempt: int = old.status.attempt + 2) -> None:
                    lines[k]["batch"]["calls"][j]["attempt"] = attempt
                yield Site(edit, k + 1, Rule.ATTEMPT)


def requested_straight_to_output(ctx: Context) -> Iterator[Site]:
    for k, commit in enumerate(ctx.commits):
        if not ctx.open_before(k) or commit.batch is None:
            continue
        for j, (old, new) in enumerate(zip(ctx.prev_batch(k).calls, commit.batch.calls)):
            if isinstance(old.status, CallRequested) and old.status != new.status:
                def edit(lines: Lines, k: int = k, j: int = j) -> None:
                    target = lines[k]["batch"]["calls"][j]
                    for key in ("wait", "reason"):
                        target.pop(key, None)
                    target.update(status="completed", attempt=0, result={"kind": "output", "value": 1})
                yield Site(edit, k + 1, Rule.EDGE_CONDITION)


def drop_resumed_event(ctx: Context) -> Iterator[Site]:
    for k, line in enumerate(ctx.lines):
        if any(e["type"] == "resumed" for e in line["events"]):
            def edit(lines: Lines, k: int = k) -> None:
                lines[k]["events"] = [e for e in lines[k]["events"] if e["type"] != "resumed"]
            yield Site(edit, k + 1, Rule.RESUME)


def resume_another_ticket(ctx: Context) -> Iterator[Site]:
    for k, line in enumerate(ctx.lines):
        if any(e["type"] == "resumed" for e in line["events"]):
            def edit(lines: Lines, k: int = k) -> None:
                for event in lines[k]["events"]:
                    if event["type"] == "resumed":
                        event["ticket_id"] = "ticket-of-someone-else"
            yield Site(edit, k + 1, Rule.RESUME)


def reuse_ticket(ctx: Context) -> Iterator[Site]:
    seen: list[str] = []
    for k, commit in enumerate(ctx.commits):
        if not isinstance(commit.disposition, Awaiting):
            continue
        ticket = commit.disposition.ticket
        for earlier in seen:
            def edit(lines: Lines, k: int = k, earlier: str = earlier, call_id: str = ticket.call_id) -> None:
                lines[k]["disposition"]["ticket"]["ticket_id"] = earlier
                for call in lines[k]["batch"]["calls"]:
                    if call["call_id"] == call_id:
                        call["wait"]["correlation"] = earlier
            yield Site(edit, k + 1, Rule.TICKET_REUSED)
        seen.append(ticket.ticket_id)


def _finalizing(ctx: Context) -> Iterator[tuple[int, list[int]]]:
    """Commits that finalize an open batch, with the positions of their tool messages."""
    for k, commit in enumerate(ctx.commits):
        if ctx.open_before(k) and commit.batch is not None and commit.batch.finalized:
            yield k, [i for i, m in enumerate(ctx.lines[k]["messages"]) if m["role"] == "tool"]


def remove_tool_result(ctx: Context) -> Iterator[Site]:
    for k, tools in _finalizing(ctx):
        for drop in tools:
            def edit(lines: Lines, k: int = k, drop: int = drop) -> None:
                del lines[k]["messages"][drop]
            yield Site(edit, k + 1, Rule.PUBLISH)


def reorder_tool_results(ctx: Context) -> Iterator[Site]:
    for k, tools in _finalizing(ctx):
        if len(tools) >= 2:
            def edit(lines: Lines, k: int = k, a: int = tools[0], b: int = tools[1]) -> None:
                messages = lines[k]["messages"]
                messages[a], messages[b] = messages[b], messages[a]
            yield Site(edit, k + 1, Rule.PUBLISH)


def assistant_while_batch_open(ctx: Context) -> Iterator[Site]:
    for k in range(len(ctx.lines)):
        if ctx.open_before(k):
            def edit(lines: Lines, k: int = k) -> None:
                lines[k]["messages"].insert(0, {"role": "assistant", "content": "sneaky"})
                lines[k]["step"] += 1
            yield Site(edit, k + 1, Rule.INFERENCE_OPEN_BATCH)


def commit_after_ended(ctx: Context) -> Iterator[Site]:
    for k, commit in enumerate(ctx.commits):
        if isinstance(commit.disposition, Ended):
            def edit(lines: Lines, k: int = k) -> None:
                extra = copy.deepcopy(lines[k])
                extra.update(version=extra["version"] + 1, disposition={"state": "running"}, messages=[], events=[])
                lines.insert(k + 1, extra)
            yield Site(edit, k + 2, Rule.AFTER_ENDED)


def change_operation_id(ctx: Context) -> Iterator[Site]:
    for k in range(len(ctx.lines)):
        if ctx.open_before(k) and ctx.lines[k]["batch"] is not None:
            def edit(lines: Lines, k: int = k) -> None:
                lines[k]["batch"]["calls"][-1]["operation_id"] += "-changed"
            yield Site(edit, k + 1, Rule.BATCH_IDENTITY)


def finalize_with_open_call(ctx: Context) -> Iterator[Site]:
    for k, commit in enumerate(ctx.commits):
        batch = commit.batch
        if ctx.open_before(k) and batch is not None and not batch.all_terminal():
            def edit(lines: Lines, k: int = k) -> None:
                lines[k]["batch"]["finalized"] = True
            yield Site(edit, k + 1, Rule.FINALIZE)


def first_commit_not_running(ctx: Context) -> Iterator[Site]:
    for k in range(len(ctx.lines)):
        if ctx.prev[k] is None:
            def edit(lines: Lines, k: int = k) -> None:
                lines[k]["disposition"] = {"state": "ended", "cause": {"kind": "completed"}}
            yield Site(edit, k + 1, Rule.FIRST_COMMIT)


def awaiting_ends_completed(ctx: Context) -> Iterator[Site]:
    for k, commit in enumerate(ctx.commits):
        p = ctx.prev[k]
        if p is not None and isinstance(commit.disposition, Ended) and isinstance(ctx.commits[p].disposition, Awaiting):
            def edit(lines: Lines, k: int = k) -> None:
                lines[k]["disposition"]["cause"] = {"kind": "completed"}
            yield Site(edit, k + 1, Rule.AWAITING_END)


def wrong_step(ctx: Context) -> Iterator[Site]:
    for k, line in enumerate(ctx.lines):
        if ctx.prev[k] is not None and any(m["role"] == "assistant" for m in line["messages"]):
            def edit(lines: Lines, k: int = k) -> None:
                lines[k]["step"] += 1
            yield Site(edit, k + 1, Rule.STEP)


def ticket_wrong_wait_kind(ctx: Context) -> Iterator[Site]:
    for k, commit in enumerate(ctx.commits):
        if isinstance(commit.disposition, Awaiting):
            def edit(lines: Lines, k: int = k) -> None:
                ticket = lines[k]["disposition"]["ticket"]
                ticket["wait"] = "input" if ticket["wait"] != "input" else "approval"
            yield Site(edit, k + 1, Rule.TICKET_SHAPE)


def end_leaving_batch_open(ctx: Context) -> Iterator[Site]:
    for k, commit in enumerate(ctx.commits):
        if ctx.open_before(k) and isinstance(commit.disposition, Ended):
            def edit(lines: Lines, k: int = k) -> None:
                lines[k]["batch"]["finalized"] = False
            yield Site(edit, k + 1, Rule.RUN_END_CLOSES)


def start_a_later_call_early(ctx: Context) -> Iterator[Site]:
    for k, commit in enumerate(ctx.commits):
        if not ctx.open_before(k) or commit.batch is None:
            continue
        calls = commit.batch.calls
        for j, (old, new) in enumerate(zip(ctx.prev_batch(k).calls[:-1], calls[:-1])):
            started = isinstance(old.status, CallRequested) and isinstance(new.status, CallExecuting)
            if started and isinstance(calls[j + 1].status, CallRequested):
                def edit(lines: Lines, k: int = k, j: int = j) -> None:
                    lines[k]["batch"]["calls"][j + 1].update(status="executing", attempt=1)
                yield Site(edit, k + 1, Rule.CALL_ORDER)


def drop_open_batch(ctx: Context) -> Iterator[Site]:
    for k in range(len(ctx.lines)):
        if ctx.open_before(k):
            def edit(lines: Lines, k: int = k) -> None:
                lines[k]["batch"] = None
            yield Site(edit, k + 1, Rule.BATCH_IDENTITY)


MUTATIONS: dict[str, Mutation] = {
    "skip-a-version": skip_version,
    "duplicate-a-line": duplicate_line,
    "change-a-terminal-result-later": change_terminal_result_later,
    "change-a-finalized-result-later": change_finalized_result_later,
    "bump-an-attempt-by-two": bump_attempt_by_two,
    "requested-straight-to-completed-output": requested_straight_to_output,
    "drop-the-resumed-event": drop_resumed_event,
    "resume-names-another-ticket": resume_another_ticket,
    "reuse-a-ticket-id": reuse_ticket,
    "remove-a-tool-result-from-finalizing-commit": remove_tool_result,
    "reorder-tool-results": reorder_tool_results,
    "assistant-message-while-batch-open": assistant_while_batch_open,
    "commit-after-ended": commit_after_ended,
    "change-an-operation-id": change_operation_id,
    "finalize-while-a-call-is-open": finalize_with_open_call,
    "first-commit-not-running": first_commit_not_running,
    "awaiting-run-ends-completed": awaiting_ends_completed,
    "step-does-not-count-inference": wrong_step,
    "ticket-names-the-wrong-wait-kind": ticket_wrong_wait_kind,
    "run-ends-with-batch-open": end_leaving_batch_open,
    "drop-an-open-batch": drop_open_batch,
    "start-a-later-call-early": start_a_later_call_early,
}


@given(history=histories(max_threads=2, max_runs=3), data=st.data())
def test_illegal_mutations_of_random_traces_are_reported_where_they_become_illegal(
    history: History, data: st.DataObject
) -> None:
    context = Context.of(history.commits)
    for name, mutation in MUTATIONS.items():
        sites = list(mutation(context))
        if not sites:
            continue
        site = data.draw(st.sampled_from(sites), label=name)
        finding = check_lines(to_lines(site.mutate(context.lines)))
        assert finding.verdict is Verdict.ILLEGAL, f"{name}: {finding.report('mutated')}"
        assert (finding.line, finding.rule) == (site.line, site.rule.value), (
            f"{name}: expected line {site.line} {site.rule.value}, got {finding.report('mutated')}"
        )


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_each_illegal_mutation_of_a_scripted_trace_is_reported_where_it_becomes_illegal(
    name: str,
) -> None:
    commits = scripted_trace()
    assert check_commits(commits).verdict is Verdict.LEGAL
    context = Context.of(commits)
    sites = list(MUTATIONS[name](context))
    assert sites, f"the scripted trace offers no place for {name}"
    for site in sites:
        finding = check_lines(to_lines(site.mutate(context.lines)))
        assert finding.verdict is Verdict.ILLEGAL, finding.report("mutated")
        assert (finding.line, finding.rule) == (site.line, site.rule.value), finding.report("mutated")


def test_mutation_catalogue_is_large_enough() -> None:
    assert len(MUTATIONS) >= 12
    assert len({mutation for mutation in MUTATIONS.values()}) == len(MUTATIONS)


# --- regressions: minimal reproductions of kernel bugs the properties found ----------------


def _awaiting_at_step_limit() -> tuple[RunSnapshot, Policies]:
    limited = Policies(max_steps=1)
    state = Script("thread-r", limited).start("run-r").feed(
        _tools("b1", ("c1", "search")),
        GateVerdict("c1", RequireWait(WaitKind.APPROVAL, "ticket-r")),
    ).state
    assert state is not None and isinstance(state.state, Awaiting)
    return state, limited


def test_an_activation_with_non_user_messages_is_refused_not_a_kernel_bug() -> None:
    for message in (
        Message(Role.ASSISTANT, "hi"),
        Message(Role.TOOL, "result", call_id="c1"),
    ):
        outcome = decide(None, Activate("thread-r", "run-r", 0, (Message(Role.USER, "go"), message)))
        assert isinstance(outcome, Rejection), outcome
    assert isinstance(decide(None, Activate("thread-r", "run-r", 0, (Message(Role.USER, "go"),))), Decision)


def test_no_inference_is_accepted_past_the_step_limit() -> None:
    state, limited = _awaiting_at_step_limit()
    resumed = decide(state, ResumeCommand("run-r", "ticket-r", WaitKind.APPROVAL, Deny("no")), limited)
    assert isinstance(resumed, Decision) and isinstance(resumed.state.state, Running)
    assert resumed.state.step == 1 and resumed.state.open_batch is None
    assert not any(isinstance(e, RequestInference) for e in resumed.effects)
    for result in (InferenceResult("more"), _tools("b2", ("c2", "search"))):
        outcome = decide(resumed.state, result, limited)
        assert isinstance(outcome, Rejection), outcome
    ended = recover(resumed.state, limited).decision.state
    assert isinstance(ended.state, Ended) and ended.state.cause.kind is EndCauseKind.STEP_LIMIT


@pytest.mark.parametrize(
    "command",
    [
        ResumeCommand("run-r", "ticket-r", WaitKind.APPROVAL, Deny("\ud800")),
        ResumeCommand("run-r", "ticket-r", WaitKind.APPROVAL, Deny({"not": {"json"}})),
        ResumeCommand("run-r", "ticket-\udfff", WaitKind.APPROVAL, Approve()),
    ],
    ids=["lone-surrogate", "not-json", "surrogate-ticket"],
)
def test_a_resume_command_without_canonical_json_is_refused(command: ResumeCommand) -> None:
    state, limited = _awaiting_at_step_limit()
    outcome = decide(state, command, limited)
    assert isinstance(outcome, Rejection) and outcome.rule is Rule.PAYLOAD_TYPE, outcome


@pytest.mark.parametrize(
    "build",
    [
        lambda: RequireWait(WaitKind.APPROVAL, ""),
        lambda: RequireWait(WaitKind.APPROVAL, "\ud800"),
        lambda: ToolDelegated("", "child"),
        lambda: ToolScheduled("", "2030-01-01T00:00:00Z"),
        lambda: DeadlinePassed("\ud800", "2030-01-01T00:00:00Z"),
        lambda: Activate("", "run", 0, ()),
        lambda: Activate("thread", "", 0, ()),
        lambda: Activate("thread", "run", -1, ()),
    ],
    ids=[
        "wait-empty", "wait-surrogate", "delegated-empty", "scheduled-empty",
        "deadline-surrogate", "activate-thread", "activate-run", "activate-version",
    ],
)
def test_inputs_with_ids_the_kernel_cannot_commit_cannot_be_built(build: Callable[[], Input]) -> None:
    with pytest.raises(ValueError):
        build()
