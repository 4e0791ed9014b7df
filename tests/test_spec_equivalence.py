"""The spec cannot drift: seed, python-statemachine declarations, kernel tables, docs.

* the machines declared with python-statemachine have exactly the kernel's edges;
* ``runkernel spec --format mermaid`` redraws the seed's two state diagrams edge for edge;
* the recovery table is the seed's, row for row;
* commit validation accepts a call or Run change exactly where the spec has an edge
  (with the edge's conditions), and ``decide`` refuses every input the spec has no edge
  for in the Run's phase;
* ``docs/spec.md`` is what ``runkernel spec --format markdown`` prints.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

import attrs
import pytest

from runkernel.kernel.decide import decide
from runkernel.kernel.edges import (
    CALL_EDGES,
    CALL_TABLE,
    RUN_FINAL_PHASES,
    RUN_TABLE,
    AttemptRule,
    CallPhase,
    RunPhase,
    call_phase,
    run_phase,
)
from runkernel.kernel.policies import IndeterminateChoice, Policies
from runkernel.kernel.protocol import (
    Activate,
    Allow,
    Approve,
    Block,
    DeadlinePassed,
    Decision,
    Deny,
    EndRequest,
    GateVerdict,
    InferenceResult,
    Input,
    OperationStatus,
    ProposedCall,
    RequireWait,
    ResumeCommand,
    StatusReport,
    Supply,
    ToolDelegated,
    ToolFailure,
    ToolFinished,
    ToolOutcomeLost,
    ToolOutput,
)
from runkernel.kernel.recover import RECOVERY_TABLE, RecoveryRow, classify
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import (
    RESUMED_EVENT,
    ActiveToolBatch,
    Awaiting,
    CallAwaiting,
    CallCompleted,
    CallExecuting,
    CallIndeterminate,
    CallRequested,
    CallStatus,
    EndCause,
    Ended,
    Event,
    Message,
    ResumeTicket,
    RunDisposition,
    RunSnapshot,
    Running,
    ThreadCommit,
    ThreadHead,
    ToolCall,
    ToolResult,
    ToolUse,
    TypedError,
    Wait,
)
from runkernel.kernel.validate import Accepted, validate_commit
from runkernel.kernel.values import (
    AWAITING_END_CAUSES,
    EndCauseKind,
    IndeterminateReason,
    ResultKind,
    Role,
    WaitKind,
)
from runkernel.specs.export import mermaid, render
from runkernel.specs.machines import RunMachine, SpecEdge, ToolCallMachine, spec_edges, state_names

ROOT = Path(__file__).resolve().parent.parent
SEED_NAME = "run-step-toolbatch-recovery.en.md"
SEED_COPY = ROOT / "tests" / "data" / "seed" / SEED_NAME
SHARED_SEED = ROOT.parent / "shared" / "seed" / SEED_NAME
SPEC_DOC = ROOT / "docs" / "spec.md"

Edge = tuple[str | None, str | None, str | None]
DrawnEdge = tuple[str, str, str | None]


# --- python-statemachine declarations == kernel tables ------------------------------


def _edge_set(edges: Sequence[SpecEdge]) -> set[Edge]:
    return {(e.source, e.target, e.event) for e in edges}


def test_run_machine_edges_equal_kernel_run_table() -> None:
    table: set[Edge] = {
        (r.source.value if r.source else None, r.target.value, r.edge.value) for r in RUN_TABLE
    }
    table |= {(phase.value, None, None) for phase in RUN_FINAL_PHASES}
    assert _edge_set(spec_edges(RunMachine)) == table
    assert (None, "Running", "run_activation") in table, "the [*] --> Running edge is missing"
    assert len(spec_edges(RunMachine)) == len(table), "an edge is declared twice"


def test_call_machine_edges_equal_kernel_call_table() -> None:
    table: set[Edge] = {
        (r.source.value if r.source else None, r.target.value, r.edge.value) for r in CALL_TABLE
    }
    assert _edge_set(spec_edges(ToolCallMachine)) == table
    assert (None, "Requested", "complete_batch_committed") in table
    assert {e for e in table if e[1] == "Finalized"} == {
        ("Completed", "Finalized", "every_call_terminal"),
        ("Indeterminate", "Finalized", "every_call_terminal"),
    }
    assert len(spec_edges(ToolCallMachine)) == len(table), "an edge is declared twice"


def test_machine_states_are_the_kernel_phases() -> None:
    assert state_names(RunMachine) == [phase.value for phase in RunPhase]
    assert state_names(ToolCallMachine) == [phase.value for phase in CallPhase]


# --- the seed's diagrams and table ---------------------------------------------------

_EDGE_LINE = re.compile(r"^\s*(\[\*\]|\w+)\s*-->\s*(\[\*\]|\w+)\s*(?::\s*(.*?))?\s*$")


def state_diagrams(text: str) -> list[list[DrawnEdge]]:
    """The edges (source, target, label) of every ``stateDiagram-v2`` block, in order."""
    diagrams = []
    for block in re.findall(r"```mermaid\n(.*?)```", text, flags=re.DOTALL):
        lines = [line for line in block.splitlines() if line.strip()]
        if not lines or lines[0].strip() != "stateDiagram-v2":
            continue
        edges: list[DrawnEdge] = []
        for line in lines[1:]:
            match = _EDGE_LINE.match(line)
            assert match is not None, f"cannot parse state diagram line {line!r}"
            edges.append((match.group(1), match.group(2), match.group(3) or None))
        diagrams.append(edges)
    return diagrams


def seed_text() -> str:
    return SEED_COPY.read_text(encoding="utf-8")


def test_seed_copy_is_identical_to_shared_seed() -> None:
    if not SHARED_SEED.exists():
        pytest.skip(f"{SHARED_SEED} is not there (tests run without ../shared)")
    assert SEED_COPY.read_bytes() == SHARED_SEED.read_bytes(), (
        f"tests/data/seed/{SEED_NAME} differs from {SHARED_SEED}; copy the seed again"
    )


def test_seed_has_two_state_diagrams() -> None:
    diagrams = state_diagrams(seed_text())
    assert len(diagrams) == 2
    assert diagrams[0][0] == ("[*]", "Running", "RunActivation")
    assert diagrams[1][0] == ("[*]", "Requested", "complete batch committed")


def test_mermaid_export_redraws_the_seed_diagrams_edge_for_edge() -> None:
    seed = state_diagrams(seed_text())
    ours = state_diagrams(mermaid())
    assert len(ours) == len(seed) == 2
    for drawn, expected in zip(ours, seed):
        assert set(drawn) == set(expected)
        assert drawn == expected


def test_mermaid_export_only_holds_the_state_diagrams() -> None:
    text = mermaid()
    assert text.count("```mermaid") == 2
    assert render("mermaid") == text


def seed_recovery_table(text: str) -> list[tuple[str, str, str]]:
    section = text.split("## Recovery decision table", 1)[1].split("\n## ", 1)[0]
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in section.splitlines()
        if line.strip().startswith("|")
    ]
    header, separator, body = rows[0], rows[1], rows[2:]
    assert header == ["Committed frontier", "Runtime action", "External action"]
    assert all(set(cell) <= {"-", ":"} for cell in separator)
    assert all(len(row) == 3 for row in body)
    return [(row[0], row[1], row[2]) for row in body]


def test_recovery_table_matches_the_seed_row_for_row() -> None:
    seed = seed_recovery_table(seed_text())
    ours = [(r.frontier, r.runtime_action, r.external_action) for r in RECOVERY_TABLE]
    assert ours == seed
    assert [r.row for r in RECOVERY_TABLE] == list(RecoveryRow)


# --- building committed states by hand ------------------------------------------------

THREAD, RUN = "thread-1", "run-1"
TICKET_OLD, TICKET_NEW = "ticket-old", "ticket-new"
FAILURE = TypedError("ToolCrashed", "gave up")


def cause(kind: EndCauseKind) -> EndCause:
    return EndCause(kind, FAILURE if kind is EndCauseKind.FAILED else None)


@dataclass(frozen=True)
class Chain:
    """A committed Thread head and Run snapshot, grown by validated commits."""

    head: ThreadHead | None
    run: RunSnapshot | None

    def judge(self, commit: ThreadCommit) -> Accepted | Rejection:
        return validate_commit(self.head, self.run, commit)

    def then(self, commit: ThreadCommit) -> Chain:
        verdict = self.judge(commit)
        assert isinstance(verdict, Accepted), f"setup commit refused: {verdict}"
        return Chain(verdict.head, verdict.run)

    @property
    def snapshot(self) -> RunSnapshot:
        assert self.run is not None
        return self.run


def commit_on(
    run: RunSnapshot,
    disposition: RunDisposition,
    batch: ActiveToolBatch | None,
    messages: Sequence[Message] = (),
    events: Sequence[Event] = (),
) -> ThreadCommit:
    return ThreadCommit(
        THREAD, RUN, run.version, run.step, disposition, batch, tuple(messages), tuple(events)
    )


def activated() -> Chain:
    first = ThreadCommit(
        THREAD, RUN, 0, 0, Running(), None, (Message(Role.USER, "go"),), (Event("activated"),)
    )
    return Chain(None, None).then(first)


def with_batch(calls: int) -> Chain:
    """Activated, then an inference result opening a batch of ``calls`` Requested calls."""
    chain = activated()
    tool_calls = tuple(
        ToolCall(f"c{i}", "tool", {"i": i}, f"op{i}", CallRequested()) for i in range(1, calls + 1)
    )
    uses = tuple(ToolUse(c.call_id, c.tool, c.arguments) for c in tool_calls)
    commit = ThreadCommit(
        THREAD, RUN, chain.snapshot.version, 1, Running(),
        ActiveToolBatch("b1", 1, False, tool_calls),
        (Message(Role.ASSISTANT, "using tools", tool_calls=uses),),
    )
    return chain.then(commit)


def move(chain: Chain, call_id: str, status: CallStatus, disposition: RunDisposition | None = None) -> Chain:
    run = chain.snapshot
    assert run.batch is not None
    old = run.batch.call(call_id)
    assert old is not None
    batch = run.batch.replace_call(attrs.evolve(old, status=status))
    return chain.then(commit_on(run, disposition or Running(), batch))


def gate_wait(chain: Chain, call_id: str) -> Chain:
    wait = Wait(WaitKind.APPROVAL, TICKET_OLD)
    ticket = ResumeTicket(TICKET_OLD, WaitKind.APPROVAL, call_id)
    return move(chain, call_id, CallAwaiting(0, wait), Awaiting(ticket))


def tool_wait(chain: Chain, call_id: str) -> Chain:
    chain = move(chain, call_id, CallExecuting(1))
    wait = Wait(WaitKind.DELEGATION, TICKET_OLD, child="child-run")
    ticket = ResumeTicket(TICKET_OLD, WaitKind.DELEGATION, call_id)
    return move(chain, call_id, CallAwaiting(1, wait), Awaiting(ticket))


#: Ways to bring one call from Requested into each phase through legal commits.
REACH: dict[CallPhase, list[Callable[[Chain, str], Chain]]] = {
    CallPhase.REQUESTED: [lambda chain, _call: chain],
    CallPhase.EXECUTING: [lambda chain, call: move(chain, call, CallExecuting(1))],
    CallPhase.AWAITING: [gate_wait, tool_wait],
    CallPhase.COMPLETED: [
        lambda chain, call: move(chain, call, CallCompleted(0, ToolResult(ResultKind.BLOCKED, "no")))
    ],
    CallPhase.INDETERMINATE: [
        lambda chain, call: move(
            move(chain, call, CallExecuting(1)),
            call,
            CallIndeterminate(1, IndeterminateReason.OUTCOME_UNKNOWN),
        )
    ],
}


def reach(phases: Sequence[CallPhase], variant: Sequence[int] | None = None) -> Chain:
    """A Run whose batch holds one call per phase, reached call by call, in order."""
    chain = with_batch(len(phases))
    for index, phase in enumerate(phases):
        how = REACH[phase][variant[index] if variant else 0]
        chain = how(chain, f"c{index + 1}")
    return chain


def statuses_of(phase: CallPhase, attempt: int) -> list[CallStatus]:
    """Every status of ``phase`` with a plausible attempt and every kind it can carry."""
    attempts = sorted({0, 1, attempt, attempt + 1})
    if phase is CallPhase.REQUESTED:
        return [CallRequested()]
    if phase is CallPhase.EXECUTING:
        return [CallExecuting(a) for a in attempts if a >= 1]
    if phase is CallPhase.AWAITING:
        return [CallAwaiting(a, Wait(k, TICKET_NEW)) for a in attempts for k in WaitKind]
    if phase is CallPhase.COMPLETED:
        return [CallCompleted(a, ToolResult(k, "value")) for a in attempts for k in ResultKind]
    if phase is CallPhase.INDETERMINATE:
        return [CallIndeterminate(a, r) for a in attempts for r in IndeterminateReason]
    raise AssertionError(f"{phase} is not a call status")


def tool_messages(batch: ActiveToolBatch) -> tuple[Message, ...]:
    return tuple(Message(Role.TOOL, {"result": c.call_id}, call_id=c.call_id) for c in batch.calls)


def resumed(run: RunSnapshot) -> Event:
    ticket = run.state.ticket if isinstance(run.state, Awaiting) else None
    return Event(
        RESUMED_EVENT,
        {
            "ticket_id": ticket.ticket_id if ticket else TICKET_OLD,
            "call_id": ticket.call_id if ticket else "c1",
            "command": {},
            "digest": "0" * 64,
        },
    )


@dataclass(frozen=True)
class Candidate:
    context: str
    status: CallStatus
    commit: ThreadCommit


def candidates(run: RunSnapshot, call_id: str, status: CallStatus) -> Iterator[Candidate]:
    """Every context in which ``call_id`` could take ``status`` in the next commit."""
    assert run.batch is not None
    old = run.batch.call(call_id)
    assert old is not None
    batch = run.batch.replace_call(attrs.evolve(old, status=status))
    final = attrs.evolve(batch, finalized=True)
    yield Candidate("running", status, commit_on(run, Running(), batch))
    yield Candidate("resume", status, commit_on(run, Running(), batch, events=(resumed(run),)))
    yield Candidate("finalize", status, commit_on(run, Running(), final, tool_messages(final)))
    yield Candidate(
        "resume+finalize",
        status,
        commit_on(run, Running(), final, tool_messages(final), events=(resumed(run),)),
    )
    if isinstance(status, CallAwaiting):
        ticket = ResumeTicket(status.wait.correlation, status.wait.kind, call_id)
        yield Candidate("await", status, commit_on(run, Awaiting(ticket), batch))
    for kind in EndCauseKind:
        yield Candidate(
            f"end:{kind.value}", status, commit_on(run, Ended(cause(kind)), final, tool_messages(final))
        )


# --- validate_commit accepts exactly the spec's call edges ----------------------------

CALL_PHASES = [p for p in CallPhase if p is not CallPhase.FINALIZED]
SPEC_CALL_EDGES = {(e.source, e.target) for e in spec_edges(ToolCallMachine)}


@pytest.mark.parametrize(
    ("source", "target"),
    list(itertools.product(CALL_PHASES, CALL_PHASES)),
    ids=lambda p: str(p.value),
)
def test_commit_validation_accepts_a_call_change_iff_the_spec_has_the_edge(
    source: CallPhase, target: CallPhase
) -> None:
    is_edge = (source.value, target.value) in SPEC_CALL_EDGES
    accepted: list[tuple[Candidate, int]] = []
    refused_rules: set[str] = set()
    tried = 0
    for variant in range(len(REACH[source])):
        chain = reach([source], [variant])
        before = chain.snapshot
        assert before.batch is not None
        old = before.batch.calls[0].status
        for status in statuses_of(target, old.attempt):
            if status == old:
                continue  # no change is no transition
            for candidate in candidates(before, "c1", status):
                tried += 1
                verdict = chain.judge(candidate.commit)
                if isinstance(verdict, Accepted):
                    accepted.append((candidate, old.attempt))
                else:
                    refused_rules.add(verdict.rule.value)
    if not is_edge:
        assert not accepted, (
            f"{source.value} -> {target.value} is not a spec edge, but validation accepted "
            f"{accepted[0][0]}"
        )
        if tried:  # in the context that suits it best, the change itself is what is refused
            assert refused_rules & {Rule.CALL_EDGE.value, Rule.TERMINAL_IMMUTABLE.value}, refused_rules
        return
    assert accepted, f"{source.value} -> {target.value} is a spec edge, but no commit was accepted"
    rule = CALL_EDGES[(source, target)]
    # the edge's conditions: exactly the allowed kinds, attempts as the table says
    statuses = [c.status for c, _ in accepted]
    if target is CallPhase.AWAITING:
        assert {s.wait.kind for s in statuses if isinstance(s, CallAwaiting)} == set(rule.waits)
    if target is CallPhase.COMPLETED:
        assert {s.result.kind for s in statuses if isinstance(s, CallCompleted)} == set(rule.results)
    if target is CallPhase.INDETERMINATE:
        assert {s.reason for s in statuses if isinstance(s, CallIndeterminate)} == set(rule.reasons)
    for candidate, before_attempt in accepted:
        expected = {
            AttemptRule.FIRST: 1,
            AttemptRule.INCREMENT: before_attempt + 1,
            AttemptRule.UNCHANGED: before_attempt,
            AttemptRule.ZERO: 0,
        }[rule.attempt] if rule.attempt else candidate.status.attempt
        assert candidate.status.attempt == expected, candidate
        if rule.needs_run_end:
            assert candidate.context.startswith("end:"), candidate
        if rule.needs_resume:
            assert candidate.context.startswith("resume"), candidate
        if target is CallPhase.AWAITING:
            assert candidate.context == "await", "a call waits only with its Run"
    if not rule.needs_run_end:
        assert any(not c.context.startswith("end:") for c, _ in accepted)


def _reachable_pairs() -> list[tuple[CallPhase, CallPhase]]:
    in_progress = {CallPhase.REQUESTED, CallPhase.EXECUTING, CallPhase.AWAITING}
    return [
        (first, second)
        for first, second in itertools.product(CALL_PHASES, CALL_PHASES)
        if first not in in_progress or second is CallPhase.REQUESTED
    ]


@pytest.mark.parametrize(("first", "second"), _reachable_pairs(), ids=lambda p: str(p.value))
def test_finalization_is_accepted_iff_every_call_is_terminal(first: CallPhase, second: CallPhase) -> None:
    chain = reach([first, second])
    run = chain.snapshot
    assert run.batch is not None
    final = attrs.evolve(run.batch, finalized=True)
    all_terminal = all(call_phase(c.status) in (CallPhase.COMPLETED, CallPhase.INDETERMINATE) for c in final.calls)
    verdict = chain.judge(commit_on(run, Running(), final, tool_messages(final)))
    assert isinstance(verdict, Accepted) == all_terminal, verdict
    if not all_terminal and isinstance(run.state, Running):
        assert isinstance(verdict, Rejection) and verdict.rule is Rule.FINALIZE
    if all_terminal:
        # Finalized is an edge from each terminal phase of the spec
        for call in final.calls:
            assert (call_phase(call.status).value, "Finalized") in SPEC_CALL_EDGES


# --- validate_commit accepts exactly the spec's Run edges ------------------------------

SPEC_RUN_EDGES = {(e.source, e.target) for e in spec_edges(RunMachine)}


def run_in(phase: RunPhase) -> Chain:
    if phase is RunPhase.RUNNING:
        return reach([CallPhase.REQUESTED])
    if phase is RunPhase.AWAITING:
        return reach([CallPhase.AWAITING])
    chain = reach([CallPhase.REQUESTED])
    run = chain.snapshot
    assert run.batch is not None
    closed = attrs.evolve(
        run.batch,
        finalized=True,
        calls=(attrs.evolve(run.batch.calls[0], status=CallIndeterminate(0, IndeterminateReason.RUN_ENDED)),),
    )
    return chain.then(commit_on(run, Ended(cause(EndCauseKind.CANCELLED)), closed, tool_messages(closed)))


def run_candidates(chain: Chain) -> Iterator[Candidate]:
    run = chain.snapshot
    assert run.batch is not None
    old = run.batch.calls[0].status
    yield Candidate("empty", old, commit_on(run, run.state, run.batch))
    yield Candidate("plain", old, commit_on(run, Running(), run.batch))
    for phase in CALL_PHASES:
        for status in statuses_of(phase, old.attempt):
            yield from candidates(run, "c1", status)


@pytest.mark.parametrize(
    ("source", "target"), list(itertools.product(RunPhase, RunPhase)), ids=lambda p: str(p.value)
)
def test_commit_validation_accepts_a_run_change_iff_the_spec_has_the_edge(
    source: RunPhase, target: RunPhase
) -> None:
    chain = run_in(source)
    accepted = []
    for candidate in run_candidates(chain):
        if run_phase(candidate.commit.disposition) is not target:
            continue
        verdict = chain.judge(candidate.commit)
        if isinstance(verdict, Accepted):
            accepted.append(candidate)
        elif source is RunPhase.ENDED:
            assert verdict.rule is Rule.AFTER_ENDED
    is_edge = (source.value, target.value) in SPEC_RUN_EDGES
    assert bool(accepted) == is_edge, (source, target, accepted[:1])
    if source is not RunPhase.ENDED and target is RunPhase.ENDED:
        causes = {c.commit.disposition.cause.kind for c in accepted if isinstance(c.commit.disposition, Ended)}
        expected = AWAITING_END_CAUSES if source is RunPhase.AWAITING else frozenset(EndCauseKind)
        assert causes == expected


@pytest.mark.parametrize("target", list(RunPhase), ids=lambda p: str(p.value))
def test_a_first_commit_is_accepted_only_when_running(target: RunPhase) -> None:
    call = ToolCall("c1", "tool", {}, "op1", CallRequested())
    use = (ToolUse("c1", "tool", {}),)
    commits: list[ThreadCommit] = []
    if target is RunPhase.RUNNING:
        commits.append(ThreadCommit(THREAD, RUN, 0, 0, Running(), None, (Message(Role.USER, "go"),)))
        commits.append(
            ThreadCommit(
                THREAD, RUN, 0, 1, Running(), ActiveToolBatch("b1", 1, False, (call,)),
                (Message(Role.USER, "go"), Message(Role.ASSISTANT, "t", tool_calls=use)),
            )
        )
    elif target is RunPhase.AWAITING:
        waiting = attrs.evolve(call, status=CallAwaiting(0, Wait(WaitKind.APPROVAL, TICKET_NEW)))
        commits.append(
            ThreadCommit(
                THREAD, RUN, 0, 1, Awaiting(ResumeTicket(TICKET_NEW, WaitKind.APPROVAL, "c1")),
                ActiveToolBatch("b1", 1, False, (waiting,)),
                (Message(Role.USER, "go"), Message(Role.ASSISTANT, "t", tool_calls=use)),
            )
        )
    else:
        for kind in EndCauseKind:
            commits.append(
                ThreadCommit(THREAD, RUN, 0, 1, Ended(cause(kind)), None, (Message(Role.ASSISTANT, "done"),))
            )
    is_edge = (None, target.value) in SPEC_RUN_EDGES
    for commit in commits:
        verdict = validate_commit(None, None, commit)
        assert isinstance(verdict, Accepted) == is_edge, verdict
        if not is_edge:
            assert isinstance(verdict, Rejection) and verdict.rule is Rule.FIRST_COMMIT


# --- decide refuses every input the spec has no edge for ------------------------------

#: The Run machine events an input of each kind may fire (None: it never commits).
INPUT_EVENTS: dict[type, frozenset[str]] = {
    Activate: frozenset({"run_activation"}),
    InferenceResult: frozenset({"commit_progress", "commit_end_cause"}),
    GateVerdict: frozenset({"commit_progress", "commit_resume_ticket", "commit_end_cause"}),
    ToolFinished: frozenset({"commit_progress", "commit_resume_ticket", "commit_end_cause"}),
    StatusReport: frozenset({"commit_progress", "commit_end_cause"}),
    ResumeCommand: frozenset({"validated_resume_command"}),
    DeadlinePassed: frozenset({"validated_resume_command"}),
    EndRequest: frozenset({"commit_end_cause", "cancel_stop_or_failure"}),
}

EXPIRES, LATER = "2030-01-01T00:00:00Z", "2031-01-01T00:00:00Z"
APPROVE = ResumeCommand(RUN, TICKET_OLD, WaitKind.APPROVAL, Approve())


def _d(state: RunSnapshot | None, event: Input) -> RunSnapshot:
    decision = decide(state, event)
    assert isinstance(decision, Decision), decision
    return decision.state


def decide_states() -> dict[str, tuple[RunPhase | None, RunSnapshot | None]]:
    """Concrete committed states of every Run phase, reached through ``decide``."""
    idle = _d(None, Activate(THREAD, RUN, 0, (Message(Role.USER, "go"),)))
    requested = _d(
        idle, InferenceResult("t", calls=(ProposedCall("c1", "tool", {}, "op1"),), batch_id="b1")
    )
    executing = _d(requested, GateVerdict("c1", Allow()))
    awaiting = _d(requested, GateVerdict("c1", RequireWait(WaitKind.APPROVAL, TICKET_OLD, expires_at=EXPIRES)))
    resumed_then_ended = _d(_d(awaiting, APPROVE), EndRequest(cause(EndCauseKind.CANCELLED)))
    return {
        "none": (None, None),
        "running-idle": (RunPhase.RUNNING, idle),
        "running-requested": (RunPhase.RUNNING, requested),
        "running-executing": (RunPhase.RUNNING, executing),
        "awaiting": (RunPhase.AWAITING, awaiting),
        "ended-while-awaiting": (RunPhase.ENDED, _d(awaiting, EndRequest(cause(EndCauseKind.STOPPED)))),
        "ended-after-resume": (RunPhase.ENDED, resumed_then_ended),
    }


def inputs_of(kind: type, state: RunSnapshot | None) -> list[Input]:
    """Concrete inputs of ``kind``, each one legal in some phase."""
    version = state.version if state else 0
    go = (Message(Role.USER, "go"),)
    if kind is Activate:
        return [Activate(THREAD, RUN, version, go)]
    if kind is InferenceResult:
        return [
            InferenceResult("text"),
            InferenceResult("done", end=EndCauseKind.COMPLETED),
            InferenceResult("t", calls=(ProposedCall("c9", "tool", {}, "op9"),), batch_id="b9"),
        ]
    if kind is GateVerdict:
        return [
            GateVerdict("c1", verdict)
            for verdict in (Allow(), Block("no"), Supply(1), RequireWait(WaitKind.INPUT, TICKET_NEW))
        ]
    if kind is ToolFinished:
        return [
            ToolFinished("c1", 1, outcome)
            for outcome in (ToolOutput(1), ToolFailure("e"), ToolOutcomeLost(), ToolDelegated(TICKET_NEW, "child"))
        ]
    if kind is StatusReport:
        reports: list[Input] = [StatusReport("c1", 1, s, "v") for s in OperationStatus]
        return reports
    if kind is ResumeCommand:
        return [APPROVE, ResumeCommand(RUN, TICKET_OLD, WaitKind.APPROVAL, Deny("no"))]
    if kind is DeadlinePassed:
        return [DeadlinePassed(TICKET_OLD, LATER)]
    if kind is EndRequest:
        return [EndRequest(cause(k)) for k in EndCauseKind]
    raise AssertionError(kind)


def _sources(events: frozenset[str]) -> set[RunPhase | None]:
    return {
        RunPhase(e.source) if e.source else None
        for e in spec_edges(RunMachine)
        if e.event in events
    }


def _event_of(source: RunPhase | None, target: RunPhase) -> str | None:
    for edge in spec_edges(RunMachine):
        if edge.source == (source.value if source else None) and edge.target == target.value:
            return edge.event
    return None


def test_input_event_table_covers_every_input_kind() -> None:
    assert set(INPUT_EVENTS) == set(get_args(Input))
    events = {e.event for e in spec_edges(RunMachine) if e.event}
    assert set().union(*INPUT_EVENTS.values()) == events, "every Run edge has an input that fires it"


#: Default policies, and policies under which a call's end can also end the Run.
DECIDE_POLICIES = (Policies(), Policies(max_steps=1, on_indeterminate=IndeterminateChoice.END_RUN))


def expected_refusal(name: str, event: Input) -> Rule:
    """The rule an Ended Run refuses ``event`` with."""
    if isinstance(event, Activate):
        return Rule.UNEXPECTED_INPUT
    if isinstance(event, ResumeCommand) and name == "ended-after-resume":
        return Rule.ALREADY_APPLIED if event == APPROVE else Rule.STALE_COMMAND
    return Rule.RUN_ENDED


@pytest.mark.parametrize("kind", list(INPUT_EVENTS), ids=lambda k: str(k.__name__))
def test_decide_refuses_inputs_the_spec_has_no_edge_for(kind: type) -> None:
    allowed = _sources(INPUT_EVENTS[kind])
    fired: set[str] = set()
    for policies in DECIDE_POLICIES:
        for name, (phase, state) in decide_states().items():
            for event in inputs_of(kind, state):
                outcome = decide(state, event, policies)
                if phase not in allowed:
                    assert isinstance(outcome, Rejection), f"{name}: {event} accepted"
                    if phase is RunPhase.ENDED:
                        assert outcome.rule is expected_refusal(name, event), (name, event, outcome)
                    continue
                if isinstance(outcome, Rejection):
                    continue
                commit = outcome.commit
                if commit is None:
                    continue
                event_id = _event_of(phase, run_phase(commit.disposition))
                assert event_id in INPUT_EVENTS[kind], (name, event, event_id)
                fired.add(event_id)
    assert fired == INPUT_EVENTS[kind], f"{kind.__name__} never fired {INPUT_EVENTS[kind] - fired}"


def test_decide_ends_an_awaiting_run_only_by_cancel_stop_or_failure() -> None:
    _, awaiting = decide_states()["awaiting"]
    ended = set()
    for kind in EndCauseKind:
        outcome = decide(awaiting, EndRequest(cause(kind)))
        if isinstance(outcome, Decision):
            ended.add(kind)
        else:
            assert outcome.rule is Rule.AWAITING_END
    assert ended == AWAITING_END_CAUSES


def test_recovery_classifies_each_frontier_by_its_row() -> None:
    expected = {
        RecoveryRow.RUNNING_NO_OPEN_BATCH: activated().snapshot,
        RecoveryRow.CALL_REQUESTED: reach([CallPhase.REQUESTED]).snapshot,
        RecoveryRow.CALL_EXECUTING: reach([CallPhase.COMPLETED, CallPhase.EXECUTING]).snapshot,
        RecoveryRow.CALL_AWAITING: reach([CallPhase.AWAITING]).snapshot,
        RecoveryRow.PARTLY_TERMINAL: reach([CallPhase.COMPLETED, CallPhase.REQUESTED]).snapshot,
        RecoveryRow.ENDED: run_in(RunPhase.ENDED).snapshot,
    }
    assert {row: classify(state) for row, state in expected.items()} == {row: row for row in expected}


# --- the generated document -----------------------------------------------------------


def test_docs_spec_md_is_generated_from_the_code() -> None:
    regenerate = "regenerate it with: runkernel spec --format markdown > docs/spec.md"
    assert SPEC_DOC.exists(), f"docs/spec.md is missing; {regenerate}"
    assert SPEC_DOC.read_text(encoding="utf-8") == render("markdown"), (
        f"docs/spec.md is out of date with the code; {regenerate}"
    )
