"""What the stateful test's machine (``runtime_harness.py``) keeps between steps and the
plumbing its rules and invariants share: the store (each subclass opens its own), the
World, the runtime a worker would build, and what the machine saw for the invariants.
"""

from __future__ import annotations

import collections
import itertools

from hypothesis.stateful import RuleBasedStateMachine
from history_facts import logged_history
from runtime_harness_hooks import STAGING_REDERIVED, HookedModel, RecordingHooks
from runtime_harness_ledger import AFTER_GROUP, PARENT_ENDED, PUBLISHED, REACTED, STAGED, TOGETHER, CommitLedger
from runtime_harness_scripts import Versions, choose
from runtime_harness_world import NOW, ArgumentGate, ArmedCrash, build_registry

from runkernel.adapters.drive.delegations import ended_children
from runkernel.adapters.drive.inbox import ALREADY_APPLIED_BY, APPLIED_OUTCOMES
from runkernel.adapters.drive.runtime import (
    ALREADY_COMMITTED,
    Acknowledged,
    CheckpointLost,
    CommandSettled,
    Drive,
    Recovered,
    Runtime,
    RuntimeEvent,
)
from runkernel.adapters.stores.serial import inbox_to_input
from runkernel.adapters.stores.contract import Store, StoreUnavailable
from runkernel.kernel.codec import TraceFormatError
from runkernel.kernel.delegation import executing_delegations, next_to_gate
from runkernel.kernel.policies import IndeterminateChoice
from runkernel.kernel.protocol import EndRequest, ResumeCommand
from runkernel.kernel.recover import RecoveryRow, classify
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import (
    Awaiting,
    CallExecuting,
    CallStatus,
    Ended,
    Message,
    Running,
    RunSnapshot,
    ThreadCommit,
)
from runkernel.specs.checker import TraceJudge
from runkernel.testing import CountingIds, CrashingStore, SimulatedCrash, StepScript, World, crashing_tools

# --- scenarios ---------------------------------------------------------------------

CRASH_WITH_CHILDREN = "crash while children run"
CHILD_CRASHED = "child crashed"
CHILD_ENDED_PARENT_DOWN = "child ended while its parent was down"
CHILD_CANCELLED = "child of an ended parent sent a cancel"
#: The staged-hook and concurrent-delegation scenarios, each counted once per example
#: that reaches it (``note``).
SCENARIOS = (
    STAGED,
    STAGING_REDERIVED,
    REACTED,
    TOGETHER,
    AFTER_GROUP,
    PUBLISHED,
    CRASH_WITH_CHILDREN,
    CHILD_CRASHED,
    CHILD_ENDED_PARENT_DOWN,
    PARENT_ENDED,
    CHILD_CANCELLED,
)
#: Examples that reached each scenario, over every example run in this process (the
#: test resets it before a run and reads it after).
SCENARIO_TALLY: collections.Counter[str] = collections.Counter()

# --- the machine -----------------------------------------------------------------------


class RuntimeMachineState(RuleBasedStateMachine):
    """The state and plumbing of RuntimeMachine; its rules and invariants come from
    RuntimeRules and RuntimeInvariants."""

    store: Store

    def __init__(self) -> None:
        super().__init__()
        #: (thread, version) of every append, in the order the store took them
        self.appended: list[tuple[str, int]] = []
        self.store = self.open_store()
        self.world = World.new(self.store)
        self.registry = build_registry(self.world, None, IndeterminateChoice.PUBLISH)
        self.crash = ArmedCrash()
        self.ids = CountingIds("m")
        self.scripts: dict[str, tuple[StepScript, ...]] = {}
        self.problems: list[str] = []
        self.seen: set[str] = set()
        self.hooks_on = False
        self.hooks = RecordingHooks(self.store, self.problems, self.note)
        self.model = HookedModel(self.scripts, self.world, lambda: self.hooks if self.hooks_on else None, self.problems)
        self.gate = ArgumentGate()
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
        #: inbox entry id -> digest of each valid resume submitted
        self.valid_entries: dict[int, str] = {}
        self.ended: dict[str, RunSnapshot] = {}
        #: child run -> (parent run, call) of every concurrent delegation's activated child
        self.children: dict[str, tuple[str, str]] = {}
        self.ledger = CommitLedger(self.store, self.note)
        #: run -> the drive that committed its end (it sends the running children a cancel)
        self.ending: dict[str, Drive | None] = {}
        self.step_versions: Versions | None = None
        self.write_failures = 0
        self.failures_seen = 0
        #: one judge for every Thread (parents and children together), fed in append order
        self.trace = TraceJudge()
        self.judged: dict[str, list[ThreadCommit]] = {}
        self.fed = 0
        #: run -> the version whose snapshot the invariants last judged
        self.recovered: dict[str, int] = {}
        #: what the invariants learnt from the commits they have seen (incremental)
        self.acked = 0
        self.acknowledged_ends: set[str] = set()
        self.policy_statuses: dict[tuple[str, str, str], CallStatus] = {}
        self.uses: dict[str, collections.Counter[str]] = {}
        self.results: dict[str, collections.Counter[str]] = {}
        self.tickets: collections.Counter[str] = collections.Counter()
        #: the invariants found a problem: teardown leaves the export alone
        self.broken = False

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
        # the runtime dies where the armed plan says: around its writes, after its tools
        return Runtime(
            CrashingStore(self.store, self.crash),
            self.model,
            crashing_tools(self.registry, self.crash),
            gate=self.gate,
            ids=self.ids,
            clock=lambda: NOW,
            on_event=self.on_event,
            self_check=True,
            hooks=self.hooks if self.hooks_on else None,
        )

    def note(self, scenario: str) -> None:
        self.seen.add(scenario)

    def teardown(self) -> None:
        SCENARIO_TALLY.update(self.seen)

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
                parent = event.commit.parent
                if parent is not None:
                    self.adopt(event.commit.run_id, parent.run_id, parent.call_id)
                if isinstance(event.commit.disposition, Ended):
                    self.ending[event.commit.run_id] = self.drive
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
        if event.outcome == ALREADY_COMMITTED:
            # its commit was written before a crash stopped the runtime from settling it
            if isinstance(command, ResumeCommand):
                applied = {a.digest for a in logged_history(self.store, entry.run_id).resumes}
                if command.digest() not in applied:
                    self.problems.append(f"I14 inbox resume settled as applied before, but not committed: {entry.body}")
            elif isinstance(command, EndRequest):
                if snapshot is None or snapshot.state != Ended(command.cause):
                    self.problems.append(f"inbox end settled as applied before, but the run is not Ended so: {entry.body}")
            return
        if event.outcome == "applied":
            if isinstance(command, ResumeCommand):
                digest = command.digest()
                self.applied_resumes.add(digest)
                applied = {a.digest for a in logged_history(self.store, entry.run_id).resumes}
                if digest not in applied:
                    self.problems.append(f"I14 inbox resume settled 'applied' but not committed: {entry.body}")
                if digest in self.bad_digests:
                    self.problems.append(f"I14 a wrong command was applied: {entry.body}")
            elif isinstance(command, EndRequest):
                if snapshot is None or snapshot.state != Ended(command.cause):
                    self.problems.append(f"inbox end settled 'applied' but the run is not Ended so: {entry.body}")
            return
        duplicate_of = ALREADY_APPLIED_BY.format(entry_id="")
        if event.outcome.startswith(duplicate_of):
            # exact: the command it names was applied, and is this same command
            named = event.outcome[len(duplicate_of):]
            kept = {e.entry_id: e for e in self.store.commands(entry.run_id)}
            applier = kept.get(int(named)) if named.isdigit() else None
            if applier is None or applier.outcome not in APPLIED_OUTCOMES or applier.body != entry.body:
                self.problems.append(f"inbox entry {entry.entry_id} settled as {event.outcome!r}, which is not so")
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
            self.died(drive.run_id)
            return True
        except StoreUnavailable as error:
            self.died(drive.run_id)
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
            elif self.store.pending_commands(run_id):
                ranked.append((0, run_id))
            elif (rank := self.delegating_rank(snapshot)) is not None:
                ranked.append((rank, run_id))
            elif classify(snapshot) is RecoveryRow.CALL_EXECUTING:
                ranked.append((0, run_id))
            elif isinstance(snapshot.state, Ended):
                ranked.append((3, run_id))
            else:
                ranked.append((1 if isinstance(snapshot.state, Running) else 2, run_id))
        return sorted(ranked, key=lambda item: item[0])

    def delegating_rank(self, snapshot: RunSnapshot) -> int | None:
        """A parent whose open work is concurrent delegations: 0 once a child has ended
        (or was never activated), 2 while it is quiet (only a child's end wakes it, as a
        command wakes an Awaiting Run); None for any other Run."""
        batch = snapshot.open_batch
        if batch is None or not executing_delegations(batch):
            return None
        if ended_children(self.store, snapshot.run_id):
            return 0
        return 2 if next_to_gate(batch, self.registry.policies) is None else None

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

    # --- concurrent delegations -----------------------------------------------------

    def adopt(self, child_run_id: str, parent_run_id: str, call_id: str) -> None:
        """A child Run joins the Runs the machine drives, picks and checks."""
        if child_run_id not in self.children:
            self.children[child_run_id] = (parent_run_id, call_id)
            self.runs.append(child_run_id)

    def discover_children(self, snapshots: dict[str, RunSnapshot]) -> None:
        """Adopt the activated children of every delegation: an activation whose
        runtime died before acknowledging it is only found in the store."""
        for run_id, snapshot in list(snapshots.items()):
            for call in snapshot.batch.calls if snapshot.batch is not None else ():
                child = call.delegation
                if child is None or not child.concurrent or child.run_id in self.children:
                    continue
                found = self.store.run(child.run_id)
                if found is not None:
                    self.adopt(child.run_id, run_id, call.call_id)
                    snapshots[child.run_id] = found

    @staticmethod
    def is_child(log: list[ThreadCommit]) -> bool:
        """Whether the Thread is a child Run's (its first commit names a parent)."""
        return bool(log) and log[0].parent is not None

    def children_running(self) -> bool:
        """Whether some child Run has not ended while its parent has not either."""
        for child, (parent, _) in self.children.items():
            child_snapshot, parent_snapshot = self.store.run(child), self.store.run(parent)
            if child_snapshot is None or parent_snapshot is None:
                continue
            if not isinstance(child_snapshot.state, Ended) and not isinstance(parent_snapshot.state, Ended):
                return True
        return False

    def died(self, run_id: str) -> None:
        """A drive died (a crash or a failed write): note what was running then."""
        if run_id in self.children:
            self.note(CHILD_CRASHED)
        if self.children_running():
            self.note(CRASH_WITH_CHILDREN)

    def parents_down(self, snapshots: dict[str, RunSnapshot]) -> None:
        """Note an Ended child whose parent's call still waits for it: the child ended
        while its parent was not driving (the parent takes the terminus when it wakes)."""
        for child, (parent, call_id) in self.children.items():
            child_snapshot, parent_snapshot = snapshots.get(child), snapshots.get(parent)
            if child_snapshot is None or parent_snapshot is None or not isinstance(child_snapshot.state, Ended):
                continue
            batch = parent_snapshot.open_batch
            call = batch.call(call_id) if batch is not None else None
            if call is not None and isinstance(call.status, CallExecuting):
                self.note(CHILD_ENDED_PARENT_DOWN)
