"""A Hypothesis state machine over the reference runtime (``tests/test_stateful_runtime.py``).

The machine plays everything outside the runtime: it starts Runs with drawn scripts,
advances the current ``Drive`` one effect at a time, kills runtimes at drawn crash
boundaries or with failing store writes, recovers with fresh runtimes that know only
the store, and sends good and bad commands through the CLI path (``submit_resume`` /
``submit_end``) and straight into the inbox. After every step it checks I1-I14 from
what the store and the downstream World say, never from what a runtime believed.

Every rule is always applicable and does nothing when it cannot act (no preconditions:
they waste draws, see NOTES.md). Forty steps are few for Runs that need twenty effects
each, so rules that drive (crash, failing write, recovery, ``advance_further``) let a
worker pick up the Run that needs it most when no drive is live, a crash stays armed
until some drive reaches a boundary of its kind, and scripts, gate answers and tool
behaviours are weighted towards executing tools. Besides the trace checker, the
invariants judge each tool's fixed retry and recovery policies from the commits
(``check_policies``): an Executing{n} -> Executing{n+1} edge that is neither a retry, a
replay of a replay tool nor a reconnect answered ``not_found`` breaks I9 even when the
executor has not started yet.
"""

from __future__ import annotations

import collections
import itertools
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeAlias, TypeVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from runkernel.adapters.crash import Boundary, Position, SimulatedCrash
from runkernel.adapters.inbox import submit_end, submit_resume
from runkernel.adapters.memory_store import MemoryStore
from runkernel.adapters.ports import (
    GateAnswer,
    Hold,
    Permit,
    Provide,
    Refuse,
    ToolInvocation,
    ToolRegistry,
    ToolReply,
)
from runkernel.adapters.runtime import (
    Acknowledged,
    CheckpointLost,
    CommandSettled,
    Drive,
    Recovered,
    Runtime,
    RuntimeEvent,
)
from runkernel.adapters.serial import end_to_inbox, inbox_to_input, resume_from_json, resume_to_inbox
from runkernel.adapters.sqlite_store import SqliteStore
from runkernel.adapters.store import Store, StoreUnavailable
from runkernel.kernel.codec import TraceFormatError
from runkernel.kernel.policies import IndeterminateChoice, RecoveryMode
from runkernel.kernel.protocol import (
    PAYLOADS_BY_WAIT,
    Approve,
    DelegationResult,
    Deny,
    EndRequest,
    ExternalResult,
    ProvideInput,
    ResumeCommand,
    ResumePayload,
    TimerFired,
)
from runkernel.kernel.recover import RecoveryRow, classify, recover
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import (
    RESUMED_EVENT,
    Awaiting,
    CallExecuting,
    CallIndeterminate,
    EndCause,
    Ended,
    Message,
    Running,
    RunSnapshot,
    ThreadCommit,
    ToolCall,
    TypedError,
    is_terminal,
)
from runkernel.kernel.values import (
    AWAITING_END_CAUSES,
    EndCauseKind,
    IndeterminateReason,
    Role,
    WaitKind,
)
from runkernel.simulation.actors import (
    DELEGATE,
    FAIL,
    LOST,
    OK,
    RETRY,
    SCHEDULE,
    TRUTH,
    CountingIds,
    ScriptedModel,
    SimTool,
    StepScript,
    World,
)
from runkernel.specs.checker import TraceJudge, Verdict, check_commits

PAST = "2026-01-01T00:00:00.000000Z"
NOW = "2026-06-01T00:00:00.000000Z"
FUTURE = "2027-01-01T00:00:00.000000Z"

#: Effects a crash or write-failure rule runs through looking for its boundary.
REACH = 60

# --- tools, gate, crash plan ---------------------------------------------------------


class ToolSpec:
    """Name, recovery mode, retry attempts, replay bound and status script of a tool."""

    def __init__(
        self,
        name: str,
        mode: RecoveryMode,
        *,
        retry: int = 1,
        max_attempts: int = 3,
        status: tuple[str, ...] = (TRUTH,),
    ) -> None:
        self.name, self.mode, self.retry, self.max_attempts, self.status = name, mode, retry, max_attempts, status


_R, _C, _I = RecoveryMode.REPLAY, RecoveryMode.RECONNECT, RecoveryMode.INDETERMINATE
TOOL_SPECS: tuple[ToolSpec, ...] = (
    ToolSpec("replay", _R),
    ToolSpec("replay_retry", _R, retry=2, max_attempts=2),
    ToolSpec("indeterminate", _I),
    ToolSpec("indeterminate_retry", _I, retry=3),
    ToolSpec("reconnect", _C),
    ToolSpec("reconnect_retry", _C, retry=2),
    ToolSpec("reconnect_running", _C, status=("running", TRUTH)),
    ToolSpec("reconnect_unknown", _C, status=("unknown",)),
    ToolSpec("reconnect_failed", _C, status=("failed",)),
    ToolSpec("reconnect_done", _C, status=("done",)),
)


class ScriptedTool(SimTool):
    """A SimTool whose per-attempt behaviours come with each call's arguments."""

    def run(self, invocation: ToolInvocation) -> ToolReply:
        arguments = invocation.arguments
        replies = arguments.get("replies") if isinstance(arguments, dict) else None
        self.replies = tuple(replies) if replies else (OK,)
        return super().run(invocation)


def build_registry(world: World, max_steps: int | None, choice: IndeterminateChoice) -> ToolRegistry:
    tools = {
        spec.name: ScriptedTool(
            spec.name,
            world,
            mode=spec.mode,
            max_attempts=spec.max_attempts,
            retry_attempts=spec.retry,
            status_script=spec.status,
        )
        for spec in TOOL_SPECS
    }
    return ToolRegistry(tools, max_steps=max_steps, on_indeterminate=choice)


#: Gate answers a call can carry in its arguments (``"gate"``).
GATE_ANSWERS = (
    "permit",
    "refuse",
    "provide",
    "hold:approval",
    "hold:approval:expired",
    "hold:approval:later",
    "hold:input",
    "hold:external",
    "hold:scheduled",
)


class ScriptedGate:
    """Answers each call as its arguments say (``permit`` when they say nothing)."""

    def check(self, run_id: str, call: ToolCall) -> GateAnswer:
        arguments = call.arguments
        answer = arguments.get("gate", "permit") if isinstance(arguments, dict) else "permit"
        if answer == "refuse":
            return Refuse({"reason": "gate says no"})
        if answer == "provide":
            return Provide({"supplied_by": "plugin"})
        if isinstance(answer, str) and answer.startswith("hold:"):
            parts = answer.split(":")
            kind = WaitKind(parts[1])
            expires = {"expired": PAST, "later": FUTURE}.get(parts[2]) if len(parts) > 2 else None
            due = FUTURE if kind is WaitKind.SCHEDULED else None
            return Hold(kind, {"asked": call.call_id}, expires_at=expires, due_at=due)
        return Permit()


class ArmedCrash:
    """Crashes at a boundary of an armed kind (any position), once per arming, after
    letting ``skip`` earlier boundaries of that kind pass. Each kind is armed on its own."""

    def __init__(self) -> None:
        self.armed: dict[Boundary, int] = {}
        self.fired: list[tuple[Boundary, Position]] = []

    def arm(self, boundary: Boundary, skip: int) -> None:
        # a tool effect is rare next to writes: crash at the very next one
        self.armed[boundary] = 0 if boundary is Boundary.AFTER_EFFECT else skip

    def crash_here(self, boundary: Boundary, position: Position) -> bool:
        skip = self.armed.get(boundary)
        if skip is None:
            return False
        if skip > 0:
            self.armed[boundary] = skip - 1
            return False
        del self.armed[boundary]
        self.fired.append((boundary, position))
        return True


# --- scripts -------------------------------------------------------------------------

BEHAVIOURS = (OK, FAIL, RETRY, LOST, DELEGATE, SCHEDULE)


def _tool_step(calls: list[tuple[str, list[str], str]]) -> StepScript:
    return StepScript(
        "calling tools",
        tuple((tool, {"n": n, "replies": replies, "gate": gate}) for n, (tool, replies, gate) in enumerate(calls)),
    )


#: A tool: each recovery mode equally likely, then one of its variants.
TOOLS = st.sampled_from(RecoveryMode).flatmap(
    lambda mode: st.sampled_from([spec.name for spec in TOOL_SPECS if spec.mode is mode])
)
#: Behaviour of one attempt: ``ok`` half the time (``one_of`` would merge repeated
#: alternatives, so weights are repeated elements of ``sampled_from``).
ATTEMPTS = st.sampled_from((OK,) * 8 + tuple(b for b in BEHAVIOURS if b != OK))
#: Gate answers, mostly ``permit``.
GATES = st.sampled_from(("permit",) * 24 + tuple(g for g in GATE_ANSWERS if g != "permit"))
CALLS = st.tuples(TOOLS, st.lists(ATTEMPTS, min_size=1, max_size=3), GATES)
TOOL_STEPS = st.lists(CALLS, min_size=1, max_size=3).map(_tool_step)
TEXT_CONTINUE = StepScript("thinking")
TEXT_END = StepScript("all done", end=EndCauseKind.COMPLETED)
#: One to four steps, mostly tool batches; past its script the model ends the Run
#: with a text result (``ScriptedModel``), so every script ends with a text step.
STEPS = st.sampled_from(["tools", "tools", "tools", "continue", "end"]).flatmap(
    lambda kind: TOOL_STEPS if kind == "tools" else st.just(TEXT_CONTINUE if kind == "continue" else TEXT_END)
)
SCRIPTS = st.lists(STEPS, min_size=1, max_size=4).map(tuple)

_PAYLOADS: dict[WaitKind, ResumePayload] = {
    WaitKind.APPROVAL: Approve(),
    WaitKind.INPUT: ProvideInput("42"),
    WaitKind.EXTERNAL: ExternalResult({"answer": "from outside"}),
    WaitKind.DELEGATION: DelegationResult("child result"),
    WaitKind.SCHEDULED: TimerFired(),
}


def valid_payload(kind: WaitKind, choice: int) -> ResumePayload:
    """A payload of the type ``kind`` needs; ``choice`` varies it (approve or deny...)."""
    if kind is WaitKind.APPROVAL:
        return Approve() if choice % 2 == 0 else Deny(f"operator said no ({choice})")
    if kind is WaitKind.INPUT:
        return ProvideInput(f"input {choice}")
    if kind is WaitKind.EXTERNAL:
        return ExternalResult({"answer": choice})
    if kind is WaitKind.DELEGATION:
        return DelegationResult(f"child answered {choice}")
    return TimerFired()


def wrong_payload(kind: WaitKind) -> ResumePayload:
    """A payload that ``kind`` never takes."""
    for other in WaitKind:
        payload = _PAYLOADS[other]
        if not isinstance(payload, PAYLOADS_BY_WAIT[kind]):
            return payload
    raise AssertionError("every wait kind refuses some payload")


#: Crash kinds; a tool effect counts twice (it is where recovery policies matter).
BOUNDARIES = st.sampled_from(
    (Boundary.BEFORE_WRITE, Boundary.AFTER_WRITE, Boundary.AFTER_EFFECT, Boundary.AFTER_EFFECT)
)
BAD_COMMANDS = ("forged", "wrong_kind", "wrong_payload", "other_run", "repeat", "stale")
#: One to four resumes for a Run: (kind, straight into the inbox?).
COMMANDS = st.lists(
    st.tuples(st.sampled_from(("valid", "valid") + BAD_COMMANDS), st.booleans()), min_size=1, max_size=4
)
END_CAUSES = (
    EndCause(EndCauseKind.CANCELLED),
    EndCause(EndCauseKind.STOPPED),
    EndCause(EndCauseKind.FAILED, TypedError("OperatorFailure", "failed on purpose")),
    EndCause(EndCauseKind.COMPLETED),
)

Versions: TypeAlias = dict[str, int]
T = TypeVar("T")

#: ``pick`` values below this choose among the best-ranked candidates only.
FAVOURITE = 5


def choose(ranked: list[tuple[int, T]], pick: int) -> T | None:
    """The ``pick``-th candidate: among the best-ranked ones for most picks (0-4 of
    0-7), among all of them, best first, for the others."""
    if not ranked:
        return None
    ranked = sorted(ranked, key=lambda item: item[0])
    best = [item for item in ranked if item[0] == ranked[0][0]]
    pool = best if pick < FAVOURITE else ranked
    return pool[pick % len(pool)][1]


# --- the machine -----------------------------------------------------------------------


class RuntimeMachine(RuleBasedStateMachine):
    """Runs, crashes, recoveries and commands against one store; subclasses pick it."""

    store: Store

    def __init__(self) -> None:
        super().__init__()
        self.store = self.open_store()
        self.world = World.new(self.store)
        self.registry = build_registry(self.world, None, IndeterminateChoice.PUBLISH)
        self.crash = ArmedCrash()
        self.ids = CountingIds("m")
        self.scripts: dict[str, tuple[StepScript, ...]] = {}
        self.model = ScriptedModel(self.scripts)
        self.gate = ScriptedGate()
        self.serial = itertools.count(1)
        self.drive: Drive | None = None
        self.threads: list[str] = []
        self.runs: list[str] = []
        self.starts: dict[str, tuple[str, tuple[Message, ...]]] = {}
        # what the machine saw, for the invariants
        self.acknowledged: list[ThreadCommit] = []
        self.recoveries: list[tuple[RunSnapshot, int]] = []
        self.valid_digests: set[str] = set()
        self.bad_digests: set[str] = set()
        self.applied_resumes: set[str] = set()
        self.ended: dict[str, RunSnapshot] = {}
        self.problems: list[str] = []
        self.step_versions: Versions | None = None
        self.write_failures = 0
        self.judged: dict[str, tuple[list[ThreadCommit], TraceJudge]] = {}

    # --- store-specific hooks ----------------------------------------------------------

    def open_store(self) -> Store:
        raise NotImplementedError

    def fail_appends(self, failing: bool) -> None:
        """Make every append raise StoreUnavailable (True) or work again (False)."""
        raise NotImplementedError

    def fail_checkpoints(self, failing: bool) -> None:
        raise NotImplementedError

    def checkpoints_failing(self) -> bool:
        raise NotImplementedError

    # --- plumbing ---------------------------------------------------------------------

    def runtime(self) -> Runtime:
        return Runtime(
            self.store,
            self.model,
            self.registry,
            gate=self.gate,
            ids=self.ids,
            clock=lambda: NOW,
            crash=self.crash,
            on_event=self.on_event,
        )

    def versions(self) -> Versions:
        versions: Versions = {}
        for thread_id in self.store.thread_ids():
            head = self.store.thread_head(thread_id)
            versions[thread_id] = head.version if head else 0
        return versions

    def on_event(self, event: RuntimeEvent) -> None:
        match event:
            case Acknowledged():
                self.acknowledged.append(event.commit)
            case Recovered():
                self.recoveries.append((event.snapshot, len(self.world.executions)))
            case CommandSettled():
                self.settled(event)
            case CheckpointLost():
                if not self.checkpoints_failing():
                    self.problems.append(f"checkpoint lost while checkpoint writes work: {event.error}")

    def settled(self, event: CommandSettled) -> None:
        entry = event.entry
        try:
            command = inbox_to_input(entry.body)
        except TraceFormatError:
            command = None
        snapshot = self.store.run(entry.run_id)
        if event.outcome == "applied":
            if isinstance(command, ResumeCommand):
                digest = command.digest()
                self.applied_resumes.add(digest)
                applied = {a.digest for a in snapshot.resumes_applied} if snapshot else set()
                if digest not in applied:
                    self.problems.append(f"I14 inbox resume settled 'applied' but not committed: {entry.body}")
                if digest in self.bad_digests:
                    self.problems.append(f"I14 a wrong command was applied: {entry.body}")
            elif isinstance(command, EndRequest):
                if snapshot is None or snapshot.state != Ended(command.cause):
                    self.problems.append(f"inbox end settled 'applied' but the run is not Ended so: {entry.body}")
            return
        if not event.outcome.startswith("refused"):
            self.problems.append(f"inbox entry settled with an unknown outcome {event.outcome!r}")
        if self.step_versions is not None and self.versions() != self.step_versions:
            self.problems.append(f"I14 refusing inbox entry {entry.body} changed committed versions")

    def live(self) -> Drive | None:
        drive = self.drive
        return drive if drive is not None and drive.outcome is None else None

    def step_drive(self) -> bool:
        """One ``Drive.step()``; True when this drive has nothing more to do."""
        drive = self.live()
        if drive is None:
            return True
        self.step_versions = self.versions()
        try:
            return drive.step()
        except SimulatedCrash:
            self.drive = None  # the runtime died: only the store survives
            return True
        except StoreUnavailable as error:
            self.write_failures += 1
            self.fail_appends(False)  # only the next append fails
            self.drive = None  # a failed write kills the drive like a crash
            if self.versions() != self.step_versions:
                self.problems.append(f"I3 a failed append ({error}) still changed committed versions")
            return True
        finally:
            self.step_versions = None

    def snapshots(self) -> dict[str, RunSnapshot]:
        found: dict[str, RunSnapshot] = {}
        for run_id in self.runs:
            snapshot = self.store.run(run_id)
            if snapshot is not None:
                found[run_id] = snapshot
        return found

    def pick_run(self, pick: int) -> RunSnapshot | None:
        """A committed Run, mostly one of the most interesting kind: Awaiting, then
        Running, then Ended."""
        order = {Awaiting: 0, Running: 1, Ended: 2}
        snapshots = self.snapshots().values()
        return choose([(order[type(s.state)], s) for s in snapshots], pick)

    def ranked_runs(self) -> list[tuple[int, str]]:
        """Runs by how much they need a worker: 0 = pending commands or a call found
        Executing (where recovery policies matter), 1 = Running or never activated (and
        still able to start), 2 = Awaiting, 3 = Ended."""
        ranked: list[tuple[int, str]] = []
        for run_id in self.runs:
            snapshot = self.store.run(run_id)
            if snapshot is None:
                head = self.store.thread_head(self.starts[run_id][0])
                if head is None or head.active_run_id is None:
                    ranked.append((1, run_id))
            elif self.store.pending_commands(run_id) or classify(snapshot) is RecoveryRow.CALL_EXECUTING:
                ranked.append((0, run_id))
            elif isinstance(snapshot.state, Ended):
                ranked.append((3, run_id))
            else:
                ranked.append((1 if isinstance(snapshot.state, Running) else 2, run_id))
        return sorted(ranked, key=lambda item: item[0])

    def pick_to_drive(self, pick: int) -> str | None:
        """A Run worth driving, mostly one that needs it most (see ``ranked_runs``)."""
        return choose(self.ranked_runs(), pick)

    def needing_work(self) -> list[str]:
        """Runs a worker can make progress on without any command (ranks 0 and 1)."""
        return [run_id for rank, run_id in self.ranked_runs() if rank <= 1]

    def revive(self, run_id: str) -> None:
        """A fresh runtime for ``run_id``: recovery from the store, or the host asking
        again to start a Run whose activation never committed."""
        if self.store.run(run_id) is None:
            thread_id, task = self.starts[run_id]
            self.drive = self.runtime().begin_start(thread_id, run_id, task)
        else:
            self.drive = self.runtime().begin_drive(run_id)

    def expect_refused(self, what: str, result: Rejection | int, rules: set[Rule] | None, before: Versions) -> None:
        if not isinstance(result, Rejection):
            self.problems.append(f"I14 {what} was accepted (inbox entry {result})")
        elif rules is not None and result.rule not in rules:
            self.problems.append(f"I14 {what} refused with {result}, expected {sorted(r.value for r in rules)}")
        if self.versions() != before:
            self.problems.append(f"I14 refusing {what} changed committed versions")

    # --- rules -------------------------------------------------------------------------

    @initialize(
        max_steps=st.sampled_from([None, 3]),
        choice=st.sampled_from(IndeterminateChoice),
        script=SCRIPTS,
    )
    def configure(self, max_steps: int | None, choice: IndeterminateChoice, script: tuple[StepScript, ...]) -> None:
        """Host policies for the whole example, and a first Run (not driven yet)."""
        self.registry = build_registry(self.world, max_steps, choice)
        self.start_run(False, 0, script)

    @rule(same_thread=st.booleans(), pick=st.integers(0, 7), script=SCRIPTS)
    def start_another_run(self, same_thread: bool, pick: int, script: tuple[StepScript, ...]) -> None:
        """A new Run, in a new Thread or one whose Runs have all Ended.

        The worker first finishes what it is driving (up to its next stop)."""
        self.run_to_stop()
        self.start_run(same_thread, pick, script)

    def start_run(self, same_thread: bool, pick: int, script: tuple[StepScript, ...]) -> None:
        self.drive = None
        reusable = []
        for thread_id in self.threads:
            head = self.store.thread_head(thread_id)
            if head is None or head.active_run_id is None:
                reusable.append(thread_id)
        n = next(self.serial)
        if same_thread and reusable:
            thread_id = reusable[pick % len(reusable)]
        else:
            thread_id = f"thread-{n}"
            self.threads.append(thread_id)
        run_id = f"run-{n}"
        self.runs.append(run_id)
        self.scripts[run_id] = script
        self.starts[run_id] = (thread_id, (Message(Role.USER, f"task {n}"),))
        self.drive = self.runtime().begin_start(thread_id, run_id, self.starts[run_id][1])

    @rule()
    def advance(self) -> None:
        """Carry out the current drive's next effect."""
        self.step_drive()

    @rule(effects=st.sampled_from([3, REACH]))
    def advance_further(self, effects: int) -> None:
        """Carry out the current drive's next few effects, or drive it up to its stop.

        With no live drive, a worker first picks up the Run that most needs work (one
        with pending commands, a call found Executing, or Running) with a fresh runtime,
        as a polling worker would."""
        if self.live() is None:
            candidates = self.needing_work()
            if not candidates:
                return
            self.revive(candidates[0])
        for _ in range(effects):
            if self.step_drive():
                return

    def run_to_stop(self) -> None:
        for _ in range(REACH):
            if self.step_drive():
                return

    @rule(boundary=BOUNDARIES, skip=st.integers(0, 2), pick=st.integers(0, 7))
    def crash_at_boundary(self, boundary: Boundary, skip: int, pick: int) -> None:
        """Arm a crash at the next boundary of this kind (any position), or at a later
        one after ``skip`` of that kind went by, and drive into it.

        With no live drive, a fresh runtime continues a Run that needs work (so crashes
        also hit recoveries). The runtime that reaches the boundary dies and its drive is
        discarded; if the drive stops first, the crash stays armed for whichever drive
        reaches such a boundary next."""
        fired = len(self.crash.fired)
        self.crash.arm(boundary, skip)
        self.drive_into_trouble(pick, lambda: len(self.crash.fired) > fired)

    @rule(pick=st.integers(0, 7))
    def fail_next_append(self, pick: int) -> None:
        """The store refuses the next append (of whichever drive makes it next): the
        drive that meets the failure dies like a crash."""
        failures = self.write_failures
        self.fail_appends(True)
        self.drive_into_trouble(pick, lambda: self.write_failures > failures)

    def drive_into_trouble(self, pick: int, happened: Callable[[], bool]) -> None:
        """Drive the live drive, or fresh runtimes for Runs that need work (up to three
        drives), until the armed trouble ``happened``."""
        for attempt in range(3):
            if self.live() is None:
                candidates = self.needing_work()
                if not candidates:
                    return
                self.revive(candidates[(pick if attempt == 0 else 0) % len(candidates)])
            self.run_to_stop()
            if happened():
                return

    @rule(pick=st.integers(0, 7))
    def recover(self, pick: int) -> None:
        """A fresh runtime continues a Run from the store alone, up to its next stop.

        A live drive dies first (its process is killed between two effects) and its Run
        is the one continued; otherwise a Run that needs work, Ended ones last. A Run
        whose activation never committed is started again, as a host would."""
        live = self.live()
        run_id = live.decision.state.run_id if live is not None else self.pick_to_drive(pick)
        if run_id is None:
            return
        self.drive = None
        self.revive(run_id)
        self.run_to_stop()

    @rule()
    def toggle_checkpoint_failures(self) -> None:
        self.fail_checkpoints(not self.checkpoints_failing())

    @rule(pick=st.integers(0, 7), commands=COMMANDS, choice=st.integers(0, 3))
    def resume(self, pick: int, commands: list[tuple[str, bool]], choice: int) -> None:
        """Resumes for one Run, each through ``submit_resume`` or straight into its inbox.

        ``valid``: the committed ticket, wait kind and a payload of its type; it must be
        accepted (I14). Every other kind must be refused and never committed: a forged
        ticket, the wrong wait kind or payload type, another run's id, a repeat of an
        applied command ("already applied") or a different one for its ticket ("stale").
        A valid resume for a Run that is not Awaiting comes too late: refused as well."""
        snapshot = self.pick_run(pick)
        if snapshot is None:
            return
        for kind, via_inbox in commands:
            self.send_resume(snapshot, kind, choice, via_inbox)

    def send_resume(self, snapshot: RunSnapshot, kind: str, choice: int, via_inbox: bool) -> None:
        awaiting = snapshot.state.ticket if isinstance(snapshot.state, Awaiting) else None
        if kind == "valid" and awaiting is not None:
            command = ResumeCommand(
                snapshot.run_id, awaiting.ticket_id, awaiting.wait, valid_payload(awaiting.wait, choice)
            )
            self.valid_digests.add(command.digest())
            if via_inbox:
                self.store.put_command(snapshot.run_id, resume_to_inbox(command))
                return
            result = submit_resume(self.store, command)
            if isinstance(result, Rejection):
                self.problems.append(f"I14 a resume matching the committed ticket was refused: {result}")
            return
        made = self.bad_resume(snapshot, kind, choice)
        if made is None:
            return
        command, expected = made
        if kind != "repeat":
            self.bad_digests.add(command.digest())
        if via_inbox:
            # skipping pre-validation: the runtime that drives the Run must refuse it
            self.store.put_command(snapshot.run_id, resume_to_inbox(command))
            return
        before = self.versions()
        self.expect_refused(f"{kind} resume", submit_resume(self.store, command), expected, before)

    def bad_resume(self, snapshot: RunSnapshot, kind: str, choice: int) -> tuple[ResumeCommand, set[Rule] | None] | None:
        """A resume of ``kind`` that must be refused, and the rules it may be refused by."""
        run_id = snapshot.run_id
        awaiting = snapshot.state.ticket if isinstance(snapshot.state, Awaiting) else None
        applied = snapshot.resumes_applied
        if kind in ("repeat", "stale"):
            if not applied:
                return None
            original = self.find_resume(snapshot.thread_id, applied[choice % len(applied)].digest)
            if original is None:
                self.problems.append(f"I14 applied resume of {run_id} has no resumed event in the log")
                return None
            if kind == "repeat":
                return original, {Rule.ALREADY_APPLIED}
            changed = Deny("changed my mind")
            other: ResumePayload = changed if original.payload != changed else Approve()
            return ResumeCommand(run_id, original.ticket_id, original.kind, other), {Rule.STALE_COMMAND}
        if awaiting is None:
            return self.late_resume(snapshot, choice)
        if kind == "forged":
            forged = f"tk_forged_{next(self.serial)}_{'x' * 24}"
            return ResumeCommand(run_id, forged, awaiting.wait, _PAYLOADS[awaiting.wait]), {Rule.TICKET_MISMATCH}
        if kind == "wrong_kind":
            other_kind = next(k for k in WaitKind if k is not awaiting.wait)
            command = ResumeCommand(run_id, awaiting.ticket_id, other_kind, _PAYLOADS[other_kind])
            return command, {Rule.WAIT_KIND_MISMATCH}
        if kind == "wrong_payload":
            command = ResumeCommand(run_id, awaiting.ticket_id, awaiting.wait, wrong_payload(awaiting.wait))
            return command, {Rule.PAYLOAD_TYPE}
        # other_run: the right ticket and payload, addressed to another Run (or to none)
        others = [r for r in self.snapshots() if r != run_id]
        other_run = others[choice % len(others)] if others and choice % 2 else "run-nobody"
        command = ResumeCommand(other_run, awaiting.ticket_id, awaiting.wait, _PAYLOADS[awaiting.wait])
        # in this Run's inbox: refused as for another run; through submit_resume: judged
        # against the other Run, whose tickets differ
        return command, {Rule.WRONG_RUN} if other_run == "run-nobody" else None

    def late_resume(self, snapshot: RunSnapshot, choice: int) -> tuple[ResumeCommand, set[Rule] | None] | None:
        """A resume for a ticket of a Run that no longer (or never) waits on it."""
        used = sorted(snapshot.tickets_used)
        ticket_id = used[choice % len(used)] if used else f"tk_never_issued_{'x' * 24}"
        wait = WaitKind.APPROVAL
        for commit in self.store.commits(snapshot.thread_id):
            if isinstance(commit.disposition, Awaiting) and commit.disposition.ticket.ticket_id == ticket_id:
                wait = commit.disposition.ticket.wait
        command = ResumeCommand(snapshot.run_id, ticket_id, wait, valid_payload(wait, choice))
        if any(a.digest == command.digest() for a in snapshot.resumes_applied):
            return None  # exactly the applied command: a repeat, not a late one
        return command, None

    def find_resume(self, thread_id: str, digest: str) -> ResumeCommand | None:
        for commit in self.store.commits(thread_id):
            for event in commit.events:
                if event.type == RESUMED_EVENT and event.data.get("digest") == digest:
                    return resume_from_json(event.data.get("command"))
        return None

    @rule(pick=st.integers(0, 7), cause=st.sampled_from(END_CAUSES), via_inbox=st.booleans())
    def end(self, pick: int, cause: EndCause, via_inbox: bool) -> None:
        """Cancel, stop, fail (or complete) a Run through submit_end or the raw inbox."""
        snapshot = self.pick_run(pick)
        if snapshot is None:
            return
        request = EndRequest(cause)
        if via_inbox:
            self.store.put_command(snapshot.run_id, end_to_inbox(request))
            return
        before = self.versions()
        result = submit_end(self.store, snapshot.run_id, request)
        if isinstance(snapshot.state, Ended):
            self.expect_refused("end of an Ended run", result, {Rule.RUN_ENDED}, before)
        elif isinstance(snapshot.state, Awaiting) and cause.kind not in AWAITING_END_CAUSES:
            self.expect_refused(f"{cause.kind.value} of an Awaiting run", result, {Rule.AWAITING_END}, before)
        elif isinstance(result, Rejection):
            self.problems.append(f"I14 {cause.kind.value} of a {type(snapshot.state).__name__} run refused: {result}")

    # --- invariants ----------------------------------------------------------------------

    @invariant()
    def committed_facts_hold(self) -> None:
        logs = {t: list(self.store.commits(t)) for t in self.store.thread_ids()}
        snapshots = self.snapshots()
        problems = list(self.problems)
        problems += self.check_logs(logs)
        problems += self.check_acknowledged(logs)
        problems += self.check_executions()
        problems += self.check_policies(logs)
        problems += self.check_recoveries()
        problems += self.check_ended(logs, snapshots)
        problems += self.check_commands(logs)
        for run_id, snapshot in snapshots.items():
            if recover(snapshot, self.registry.policies) != recover(snapshot, self.registry.policies):
                problems.append(f"I11 recover() of {run_id} v{snapshot.version} is not deterministic")
            again = self.store.run(run_id)
            if again is None or recover(again, self.registry.policies) != recover(snapshot, self.registry.policies):
                problems.append(f"I11 recover() of {run_id} differs between two reads of the same state")
        assert not problems, "\n".join(problems)

    def check_logs(self, logs: dict[str, list[ThreadCommit]]) -> list[str]:
        """I1-I4, I6-I8, I13 with the trace checker, for every Thread; no ticket twice.

        Same verdicts as ``check_commits(log)`` on the whole log, but incremental: a
        Thread whose judged commits are unchanged only has its new commits judged (the
        judge's state depends on nothing else); any other log is judged from scratch."""
        problems = []
        tickets: collections.Counter[str] = collections.Counter()
        for thread_id, log in logs.items():
            judged, judge = self.judged.get(thread_id, ([], TraceJudge()))
            if log[: len(judged)] != judged:
                finding = check_commits(log)
                where = f"v{finding.line}: {finding.rule}: {finding.message}"
                if finding.verdict is Verdict.LEGAL:
                    where = "its judged commits changed"
                problems.append(f"I1-I8/I12/I13 {thread_id} {where}")
            else:
                for number, commit in enumerate(log[len(judged) :], start=len(judged) + 1):
                    rejection = judge.feed(commit)
                    if rejection is not None:
                        problems.append(f"I1-I8/I13 {thread_id} v{number}: {rejection}")
                        break
                else:
                    self.judged[thread_id] = (log, judge)
            tickets.update(c.disposition.ticket.ticket_id for c in log if isinstance(c.disposition, Awaiting))
        problems += [f"I14 ticket {t} was committed {n} times" for t, n in tickets.items() if n > 1]
        return problems

    def check_acknowledged(self, logs: dict[str, list[ThreadCommit]]) -> list[str]:
        problems = []
        for commit in self.acknowledged:
            log = logs.get(commit.thread_id, [])
            stored = log[commit.version - 1] if commit.version <= len(log) else None
            if stored != commit:
                problems.append(f"I12 acknowledged {commit.thread_id} v{commit.version} changed or vanished")
            if isinstance(commit.disposition, Ended) and self.store.load_checkpoint(commit.run_id) is not None:
                problems.append(f"I10 run {commit.run_id} ended but its stream checkpoint is still there")
        return problems

    def check_executions(self) -> list[str]:
        problems = []
        runs: collections.Counter[tuple[str, int]] = collections.Counter()
        for execution in self.world.executions:
            runs[(execution.operation_id, execution.attempt)] += 1
            if not execution.committed_first:
                problems.append(
                    f"I5 {execution.operation_id} ({execution.tool}) attempt {execution.attempt} "
                    "started before Executing was committed"
                )
        problems += [f"I6 {op} attempt {attempt} ran {n} times" for (op, attempt), n in runs.items() if n > 1]
        return problems

    def check_policies(self, logs: dict[str, list[ThreadCommit]]) -> list[str]:
        """Each tool's fixed policies, judged from the commits (the trace checker cannot:
        it knows no policies). Executing{n} -> Executing{n+1} is a retry (with an
        ``attempt_failed`` event, within the retry policy), a replay (replay tools only,
        within max_attempts) or a reconnect whose status said not_found; nothing else
        (I9). attempts_exhausted is only for replay tools that ran out."""
        problems = []
        policies = self.registry.policies
        for log in logs.values():
            statuses: dict[tuple[str, str], object] = {}
            for commit in log:
                if commit.batch is None:
                    continue
                failed = {
                    (e.data.get("call_id"), e.data.get("attempt")) for e in commit.events if e.type == "attempt_failed"
                }
                for call in commit.batch.calls:
                    key = (commit.batch.batch_id, call.call_id)
                    before, status = statuses.get(key), call.status
                    statuses[key] = status
                    if before == status:
                        continue
                    policy = policies.for_tool(call.tool)
                    mode = policy.recovery.mode
                    where = f"{commit.thread_id} v{commit.version} {call.operation_id} ({call.tool})"
                    if isinstance(before, CallExecuting) and isinstance(status, CallExecuting):
                        n = before.attempt
                        if (call.call_id, n) in failed:
                            if status.attempt > policy.retry.max_attempts:
                                problems.append(f"retry policy: {where} retried to attempt {status.attempt}")
                        elif mode is RecoveryMode.REPLAY:
                            if status.attempt > policy.recovery.max_attempts:
                                problems.append(f"replay policy: {where} replayed to attempt {status.attempt}")
                        elif mode is RecoveryMode.INDETERMINATE or call.operation_id not in self.world.not_found_answered:
                            problems.append(
                                f"I9 {where}: Executing{{{n}}} started again under {mode.value} "
                                "(no retry, no not_found status)"
                            )
                    if isinstance(status, CallIndeterminate) and status.reason is IndeterminateReason.ATTEMPTS_EXHAUSTED:
                        if mode is not RecoveryMode.REPLAY or status.attempt < policy.recovery.max_attempts:
                            problems.append(f"replay policy: {where} exhausted at attempt {status.attempt}")
        return problems

    def check_recoveries(self) -> list[str]:
        problems = []
        policies = self.registry.policies
        for snapshot, executed_before in self.recoveries:
            batch = snapshot.open_batch
            for call in batch.calls if batch else ():
                if not isinstance(call.status, CallExecuting):
                    continue
                mode = policies.for_tool(call.tool).recovery.mode
                if mode is RecoveryMode.REPLAY or call.operation_id in self.world.not_found_answered:
                    continue
                if any(e.operation_id == call.operation_id for e in self.world.executions[executed_before:]):
                    problems.append(
                        f"I9 {call.operation_id} ({call.tool}, {mode.value}) ran again after recovery "
                        f"found it Executing{{{call.status.attempt}}}"
                    )
        return problems

    def check_ended(self, logs: dict[str, list[ThreadCommit]], snapshots: dict[str, RunSnapshot]) -> list[str]:
        problems = []
        for run_id, first in self.ended.items():
            if snapshots.get(run_id) != first:
                problems.append(f"I4 run {run_id} was Ended and then changed: {snapshots.get(run_id)}")
        for run_id, snapshot in snapshots.items():
            uses: collections.Counter[str] = collections.Counter()
            results: collections.Counter[str] = collections.Counter()
            for commit in logs.get(snapshot.thread_id, []):
                if commit.run_id != run_id:
                    continue
                for message in commit.messages:
                    if message.role is Role.ASSISTANT and message.tool_calls:
                        uses.update(use.call_id for use in message.tool_calls)
                    if message.role is Role.TOOL and message.call_id is not None:
                        results[message.call_id] += 1
            problems += [f"I13 {run_id}: call {c} has {n} tool results" for c, n in results.items() if n > 1]
            problems += [f"I13 {run_id}: result for unknown call {c}" for c in results if c not in uses]
            if not isinstance(snapshot.state, Ended):
                continue
            self.ended.setdefault(run_id, snapshot)
            problems += [f"I13 {run_id} Ended: call {c} has no tool result" for c in uses if results[c] != 1]
            batch = snapshot.batch
            if batch is not None and (not batch.finalized or not all(is_terminal(c.status) for c in batch.calls)):
                problems.append(f"I13 {run_id} Ended with an open batch: {batch}")
        return problems

    def check_commands(self, logs: dict[str, list[ThreadCommit]]) -> list[str]:
        problems = []
        resumed: collections.Counter[str] = collections.Counter()
        for log in logs.values():
            for commit in log:
                for event in commit.events:
                    if event.type != RESUMED_EVENT:
                        continue
                    digest = str(event.data.get("digest"))
                    resumed[digest] += 1
                    try:
                        command = resume_from_json(event.data.get("command"))
                    except TraceFormatError as error:
                        problems.append(f"I14 resumed event with an unreadable command: {error}")
                        continue
                    if command.digest() != digest:
                        problems.append(f"I14 resumed event digest does not match its command: {event.data}")
                    if digest in self.bad_digests:
                        problems.append(f"I14 a wrong command was committed: {event.data}")
                    elif digest not in self.valid_digests and command.payload != Deny({"expired_at": PAST}):
                        problems.append(f"I14 a command nobody sent was committed: {event.data}")
        problems += [f"I14 command {d} committed {n} times" for d, n in resumed.items() if n > 1]
        problems += [f"I14 applied resume {d} is not committed" for d in self.applied_resumes if resumed[d] != 1]
        return problems


class MemoryMachine(RuntimeMachine):
    """The machine on the in-process store (fail_writes injects write failures)."""

    memory: MemoryStore

    def open_store(self) -> Store:
        self.memory = MemoryStore()
        return self.memory

    def fail_appends(self, failing: bool) -> None:
        self.memory.fail_writes = failing

    def fail_checkpoints(self, failing: bool) -> None:
        self.memory.fail_checkpoints = failing

    def checkpoints_failing(self) -> bool:
        return self.memory.fail_checkpoints


_FAIL_TRIGGERS = (
    "CREATE TEMP TRIGGER IF NOT EXISTS rk_fail_insert BEFORE INSERT ON main.runs "
    "BEGIN SELECT RAISE(ABORT, 'injected write failure'); END",
    "CREATE TEMP TRIGGER IF NOT EXISTS rk_fail_update BEFORE UPDATE ON main.runs "
    "BEGIN SELECT RAISE(ABORT, 'injected write failure'); END",
)


class SqliteMachine(RuntimeMachine):
    """The machine on a SQLite file in a fresh temporary directory.

    A write failure is injected inside the append transaction: temporary triggers make
    the write of the Run's row abort after the commit row was inserted, so the store's
    rollback must leave nothing half-written."""

    sqlite: SqliteStore

    def open_store(self) -> Store:
        self.directory = Path(tempfile.mkdtemp(prefix="rk-stateful-"))
        self.sqlite = SqliteStore(self.directory / "store.db")
        return self.sqlite

    def fail_appends(self, failing: bool) -> None:
        db = self.sqlite._db
        if failing:
            for sql in _FAIL_TRIGGERS:
                db.execute(sql)
        else:
            db.execute("DROP TRIGGER IF EXISTS temp.rk_fail_insert")
            db.execute("DROP TRIGGER IF EXISTS temp.rk_fail_update")

    def fail_checkpoints(self, failing: bool) -> None:
        self.sqlite.fail_checkpoints = failing

    def checkpoints_failing(self) -> bool:
        return self.sqlite.fail_checkpoints

    def teardown(self) -> None:
        self.sqlite.close()
        shutil.rmtree(self.directory, ignore_errors=True)
